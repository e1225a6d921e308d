import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { CALLER_KEY, type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { consoleSignIn } from './support/console-client.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';
import { describeOnPostgres, oneRiskgateOn } from './support/postgres-server.ts';

/**
 * Outcomes from the login backend (issue 34) over real HTTP: `POST /decisions/{id}/outcome` with
 * the caller key that was answered the decision; the outcome is kept with the decision in the
 * store (SQLite, PostgreSQL), becomes a label by the documented rules below an analyst's, and the
 * rule report counts it as soon as the outcome is answered.
 */

const OTHER_KEY = 'another-caller-key-0123456789';

function outcomesOn(name: string, env: () => Record<string, string>) {
  let h: Harness;
  let ids: Record<string, string | undefined>;
  beforeAll(async () => {
    // Patient timeouts: each test starts from alice's allow, bob's challenge or mallory's deny.
    h = await startHarness({
      policy: { yaml: patientShippedPolicy() },
      deadlineMs: PATIENT_DEADLINE_MS,
      apiKeys: [CALLER_KEY, OTHER_KEY],
      env: env(),
    });
    ids = await lookUpUserIds(h.sandbox, ['alice', 'bob', 'mallory']);
  }, 60_000);
  afterAll(() => h?.stop());

  async function outcome(decisionId: string, body: unknown, key = CALLER_KEY) {
    const res = await fetch(`${h.url}/decisions/${decisionId}/outcome`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    for (const k of [CALLER_KEY, OTHER_KEY, OPS_KEY]) expect(text).not.toContain(k);
    return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
  }

  async function decided(user: 'alice' | 'bob' | 'mallory', verdict: string): Promise<string> {
    const r = await h.decide(demoRequest(user, ids[user]));
    expect(r.status).toBe(200);
    expect(r.body.verdict).toBe(verdict);
    return r.body.decisionId as string;
  }

  const stored = async (id: string) => {
    const res = await h.ops(`/decisions/${id}`);
    return res.status === 200 ? ((await res.json()) as Record<string, unknown>) : undefined;
  };

  const newBrowser = async () => {
    const report = (await (await h.ops('/rules/report')).json()) as {
      active: { rules: { ruleId: string; labelled: Record<string, number>; precision?: number }[] };
    };
    return report.active.rules.find((r) => r.ruleId === 'new-browser')!;
  };

  it(`keeps a failed step-up with the challenged decision, labels it fraud, and the rule report counts it at once (${name})`, async () => {
    const id = await decided('bob', 'challenge');
    // A report read before the outcome is cached: the outcome's answer must make it stale.
    expect((await newBrowser()).labelled.truePositives).toBe(0);
    const r = await outcome(id, { type: 'step_up', result: 'failed' });
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({ decisionId: id, type: 'step_up', value: 'failed' });
    expect(h.lines.find((l) => l.kind === 'outcome' && l.decisionId === id)).toMatchObject({
      type: 'step_up',
      value: 'failed',
    });
    // No wait: the 202 came once the store had it.
    expect(await stored(id)).toMatchObject({
      label: 'fraud',
      outcomeLabel: 'fraud',
      labels: [],
      outcomes: [{ type: 'step_up', value: 'failed', label: 'fraud' }],
    });
    expect(await newBrowser()).toMatchObject({
      labelled: { truePositives: 1, falsePositives: 0 },
      precision: 1,
    });

    // The same outcome again is the same outcome: kept once.
    expect((await outcome(id, { type: 'step_up', result: 'failed' })).status).toBe(202);
    expect((await stored(id))?.outcomes).toHaveLength(1);
  });

  it(`lets an analyst's label win over the outcomes' (${name})`, async () => {
    const id = await decided('bob', 'challenge');
    expect((await outcome(id, { type: 'step_up', result: 'passed' })).status).toBe(202);
    expect(await stored(id)).toMatchObject({ label: 'legit', outcomeLabel: 'legit' });
    // The user reports fraud later: fraud outweighs the passed step-up.
    expect((await outcome(id, { type: 'account_event', event: 'user_reported_fraud' })).status).toBe(202);
    expect(await stored(id)).toMatchObject({ label: 'fraud', outcomeLabel: 'fraud' });
    const fb = await fetch(`${h.url}/feedback`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ decisionId: id, label: 'legit', note: 'travelling, confirmed by phone' }),
    });
    expect(fb.status).toBe(202);
    await expect.poll(async () => (await stored(id))?.label, { timeout: 10_000 }).toBe('legit');
    // Another outcome after the analyst's label does not move it.
    expect((await outcome(id, { type: 'step_up', result: 'failed' })).status).toBe(202);
    expect(await stored(id)).toMatchObject({ label: 'legit', outcomeLabel: 'fraud' });
  });

  it(`labels nothing from a step-up of a login that was not challenged, or an account event but fraud (${name})`, async () => {
    const id = await decided('alice', 'allow');
    expect((await outcome(id, { type: 'step_up', result: 'failed' })).status).toBe(202);
    expect(
      (await outcome(id, { type: 'account_event', event: 'password_reset', at: '2026-01-02T03:04:05Z' }))
        .status,
    ).toBe(202);
    const d = await stored(id);
    expect(d?.label).toBeUndefined();
    expect(d?.outcomes).toEqual([
      {
        type: 'account_event',
        value: 'password_reset',
        reportedBy: expect.any(String),
        at: '2026-01-02T03:04:05.000Z',
      },
      { type: 'step_up', value: 'failed', reportedBy: expect.any(String), at: expect.any(String) },
    ]);
  });

  it(`shows the outcomes and the label they point to on the console's decision page (${name})`, async () => {
    const id = await decided('bob', 'challenge');
    expect((await outcome(id, { type: 'step_up', result: 'failed' })).status).toBe(202);
    const s = await consoleSignIn(h.url, OPS_KEY);
    const page = await (await s.get(`/console/decisions/${id}`)).text();
    const section = page.slice(page.indexOf('Outcomes from the login backend'));
    expect(section).toMatch(/<td>step-up<\/td><td>failed<\/td>/);
    expect(section).toContain('<td>fraud</td>');
    expect(page).toMatch(/<strong>fraud<\/strong> from the login backend(&#39;|')s outcomes/);
    expect(page).not.toContain('Not labelled yet.');
  });

  it(`takes an operator's report of a decision in the store, audited as decision.outcome (${name})`, async () => {
    const id = await decided('alice', 'allow');
    await expect.poll(() => stored(id), { timeout: 10_000 }).toBeDefined();
    const r = await outcome(id, { type: 'account_event', event: 'user_reported_fraud' }, OPS_KEY);
    expect(r.status).toBe(202);
    expect(await stored(id)).toMatchObject({ label: 'fraud', outcomeLabel: 'fraud' });
    const audit = (await (await h.ops(`/audit?action=decision.outcome&target=${id}`)).json()) as {
      entries: { action: string; target: string; outcome?: { status: string } }[];
    };
    expect(audit.entries).toEqual([expect.objectContaining({ action: 'decision.outcome', target: id })]);
  });

  it(`refuses a bad body naming the field, an unknown decision and another key's decision (${name})`, async () => {
    const id = await decided('mallory', 'deny');
    expect((await outcome(id, { type: 'step_up', result: 'maybe' })).body).toMatchObject({
      code: 'RG_ERR_INVALID_INPUT',
      field: 'result',
    });
    const badType = await outcome(id, { type: 'phone_call' });
    expect(badType.status).toBe(400);
    expect(badType.body.field).toBe('type');
    const extra = await outcome(id, { type: 'step_up', result: 'passed', note: 'x' });
    expect(extra).toMatchObject({ status: 400, body: { field: 'note' } });
    const badAt = await outcome(id, { type: 'step_up', result: 'passed', at: 'yesterday' });
    expect(badAt).toMatchObject({ status: 400, body: { field: 'at' } });
    expect(await outcome('not-a-uuid', { type: 'step_up', result: 'passed' })).toMatchObject({
      status: 400,
      body: { field: 'decisionId' },
    });
    const big = await fetch(`${h.url}/decisions/${id}/outcome`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'step_up', result: 'passed', pad: 'x'.repeat(4096) }),
    });
    expect(big.status).toBe(413);
    expect((await outcome(crypto.randomUUID(), { type: 'step_up', result: 'passed' })).status).toBe(404);
    expect((await outcome(id, { type: 'step_up', result: 'passed' }, OTHER_KEY)).status).toBe(404);
    expect((await outcome(id, { type: 'step_up', result: 'passed' }, 'wrong-key')).status).toBe(401);
    // Nothing of the refused ones was kept (none was answered: the store is waited for here).
    await expect.poll(() => stored(id), { timeout: 10_000 }).toBeDefined();
    expect((await stored(id))?.outcomes).toEqual([]);
  });
}

describe('outcomes from the login backend on the embedded SQLite', () => {
  outcomesOn('SQLite', () => ({}));
});

describeOnPostgres('outcomes from the login backend on PostgreSQL', (pg) => {
  outcomesOn('PostgreSQL', () => oneRiskgateOn(pg.url));
});

/** A policy reading the `outcomes` input: an account that failed a step-up lately is challenged. */
const OUTCOMES_POLICY = `
apiVersion: riskgate/v1
kind: Policy
name: outcomes
thresholds: { challenge: 50, deny: 100 }
rules:
  - id: failed-step-up-lately
    description: The account failed a step-up in the last days.
    when: outcomes.available && outcomes.stepUpsFailed >= 1.0
    score: 60
`;

function outcomesInputOn(name: string, env: () => Record<string, string>, pause?: () => () => void) {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ policy: { yaml: OUTCOMES_POLICY }, env: env() });
  }, 60_000);
  afterAll(() => h?.stop());

  const postOutcome = (id: string, body: unknown) =>
    fetch(`${h.url}/decisions/${id}/outcome`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it(`reads an account's recent step-ups in CEL and reports them in the answer (${name})`, async () => {
    const account = `acct-${crypto.randomUUID()}`;
    const first = await h.decide({ accountId: account, unitId: 'unit-1' });
    expect(first.body).toMatchObject({
      verdict: 'allow',
      signals: { outcomes: { status: 'ok', result: { stepUpsPassed: 0, stepUpsFailed: 0 } } },
      degraded: false,
    });
    expect(
      (await postOutcome(first.body.decisionId as string, { type: 'step_up', result: 'failed' })).status,
    ).toBe(202);
    const second = await h.decide({ accountId: account, unitId: 'unit-1' });
    expect(second.body).toMatchObject({
      verdict: 'challenge',
      reasons: [{ id: 'failed-step-up-lately' }],
      signals: { outcomes: { status: 'ok', result: { stepUpsFailed: 1, stepUpsPassed: 0 } } },
      degraded: false,
    });
    // Another account's outcomes are not this one's.
    const other = await h.decide({ accountId: `acct-${crypto.randomUUID()}` });
    expect(other.body).toMatchObject({
      verdict: 'allow',
      signals: { outcomes: { result: { stepUpsFailed: 0 } } },
    });
  });

  if (pause !== undefined) {
    it(`makes the answer degraded, never more permissive, while the store does not answer (${name})`, async () => {
      const resume = pause();
      try {
        const r = await h.decide({ accountId: `acct-${crypto.randomUUID()}` });
        expect(r.status).toBe(200);
        expect(r.body).toMatchObject({
          degraded: true,
          signals: { outcomes: { status: 'unavailable' } },
        });
      } finally {
        resume();
      }
    });
  }
}

describe('the outcomes input on the embedded SQLite', () => {
  outcomesInputOn('SQLite', () => ({}));
});

describeOnPostgres('the outcomes input on PostgreSQL', (pg) => {
  outcomesInputOn(
    'PostgreSQL',
    () => oneRiskgateOn(pg.url),
    () => {
      pg.pause();
      return () => pg.resume();
    },
  );
});
