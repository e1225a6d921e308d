import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import type { PolicyEvidence } from '../src/policy-evidence/policy-evidence.ts';
import { rolloutBucket } from '../src/policy-versions/policy-version-sync.ts';
import { browserPolicy } from './support/browser-policy.ts';
import { eventually } from './support/eventually.ts';
import { type OperatorsHarness, startOperatorsHarness } from './support/operators-harness.ts';

/**
 * Issue 33 over real HTTP on the embedded database: a proposal carries its evidence (a backtest of
 * the stored decisions, computed after the answer, shown by GET once written); an approved version
 * is staged to 10 % of accounts (a login in the bucket gets its verdict, one outside the active
 * one's), unstaged, scheduled and unscheduled, each step audited; bad input is a 400 naming the
 * field, a step the state refuses a 409.
 */

let h: OperatorsHarness;
beforeAll(async () => {
  h = await startOperatorsHarness({ policy: { yaml: browserPolicy('challenge') }, deadlineMs: 2000 });
});
afterAll(() => h?.stop());

const as: OperatorsHarness['as'] = (...call) => h.as(...call);

const login = (accountId: string) => demoRequest(accountId, undefined);

/** A draft of `yaml` by alice, proposed (with `window`), approved by bob. */
async function approved(yaml: string, window?: unknown): Promise<string> {
  const draft = await as('alice', 'POST', '/policy-versions', { yaml, message: 'deny browsers' });
  expect(draft.status).toBe(201);
  const id = String(draft.body.id);
  expect((await as('alice', 'POST', `/policy-versions/${id}/propose`, window)).status).toBe(200);
  expect((await as('bob', 'POST', `/policy-versions/${id}/approve`)).status).toBe(200);
  return id;
}

describe('the evidence of a proposal and staged activation over the API', () => {
  it('attaches a backtest of the stored decisions to a proposal, shown once written', async () => {
    const ids: string[] = [];
    for (const account of ['ev-1', 'ev-2', 'ev-3']) {
      const answer = await h.decide(login(account));
      expect(answer.body.verdict).toBe('challenge');
      ids.push(String(answer.body.decisionId));
    }
    await eventually(
      async () => {
        const { body } = await as('alice', 'GET', '/decisions?limit=200');
        const stored = (body.decisions as { decisionId: string }[]).map((d) => d.decisionId);
        return ids.every((id) => stored.includes(id));
      },
      { timeoutMs: 15_000, what: 'the three decisions in the store' },
    );
    const draft = await as('alice', 'POST', '/policy-versions', {
      yaml: browserPolicy('deny'),
      message: 'deny',
    });
    const id = String(draft.body.id);
    const bad = await as('alice', 'POST', `/policy-versions/${id}/propose`, { windowHours: 0 });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('windowHours');
    const lone = await as('alice', 'POST', `/policy-versions/${id}/propose`, {
      from: '2026-11-28T00:00:00Z',
    });
    expect(lone.status).toBe(400);
    expect(JSON.stringify(lone.body)).toContain('"to"');
    expect((await as('alice', 'GET', `/policy-versions/${id}`)).body.evidence).toBeNull();

    expect((await as('alice', 'POST', `/policy-versions/${id}/propose`, { windowHours: 1 })).status).toBe(
      200,
    );
    let shown: Record<string, unknown> = {};
    await eventually(
      async () => {
        shown = (await as('bob', 'GET', `/policy-versions/${id}`)).body.evidence as Record<string, unknown>;
        return shown.state === 'complete';
      },
      { timeoutMs: 15_000, what: 'the evidence written' },
    );
    expect(shown).toMatchObject({ state: 'complete', requestedBy: 'alice' });
    const evidence = shown.evidence as PolicyEvidence;
    expect(evidence.check.ok).toBe(true);
    expect(evidence.tests.ran).toBe(false);
    const b = evidence.backtest!;
    // Every browser login stored (these three at least) turns from challenge to deny.
    expect(b.decisions).toBeGreaterThanOrEqual(3);
    expect(b.changed).toBe(b.decisions);
    expect(b.byPair).toEqual([
      { from: 'challenge', to: 'deny', count: b.decisions, samples: expect.any(Array) },
    ]);
    expect(b.byPair[0]!.samples).toContain(ids[0]);
  });

  it('stages an approved version to 10 % of accounts, then ends the stage, audited', async () => {
    const id = await approved(browserPolicy('deny'));
    const badPercent = await as('bob', 'POST', `/policy-versions/${id}/stage`, { percent: 100 });
    expect(badPercent.status).toBe(400);
    expect(JSON.stringify(badPercent.body)).toContain('percent');
    const neither = await as('bob', 'POST', `/policy-versions/${id}/stage`, {});
    expect(neither.status).toBe(400);
    expect(JSON.stringify(neither.body)).toContain('percent');

    const staged = await as('bob', 'POST', `/policy-versions/${id}/stage`, { percent: 10 });
    expect(staged).toMatchObject({ status: 200, body: { versionId: id, stage: 'percent', percent: 10 } });
    await eventually(
      async () =>
        ((await as('bob', 'GET', '/policies')).body.version as { staged?: { versionId: string } })?.staged
          ?.versionId === id,
      { what: 'the staged version served' },
    );
    const accounts = Array.from({ length: 200 }, (_, i) => `acct-${i}`);
    const inside = accounts.find((a) => rolloutBucket(a, id) < 1000)!;
    const outside = accounts.find((a) => rolloutBucket(a, id) >= 1000)!;
    expect((await h.decide(login(inside))).body.verdict).toBe('deny');
    expect((await h.decide(login(outside))).body.verdict).toBe('challenge');

    // Another approved version cannot be staged while this one is.
    const other = await approved(browserPolicy('allow'));
    expect((await as('bob', 'POST', `/policy-versions/${other}/stage`, { shadow: true })).status).toBe(409);

    expect((await as('bob', 'POST', '/policy-versions/unstage')).status).toBe(204);
    expect((await as('bob', 'POST', '/policy-versions/unstage')).status).toBe(409);
    const audit = await as('bob', 'GET', '/audit?action=policy.stage');
    expect(JSON.stringify(audit.body)).toContain(id);
    expect(JSON.stringify((await as('bob', 'GET', '/audit?action=policy.unstage')).body)).toContain('bob');
  });

  it('schedules an approved version at a future time and cancels it; a past time is a 400 naming at', async () => {
    const id = await approved(browserPolicy('deny'));
    const past = await as('bob', 'POST', `/policy-versions/${id}/schedule`, { at: '2020-01-01T00:00:00Z' });
    expect(past.status).toBe(400);
    expect(JSON.stringify(past.body)).toContain('"at"');
    const notTime = await as('bob', 'POST', `/policy-versions/${id}/schedule`, { at: 'tomorrow' });
    expect(notTime.status).toBe(400);
    expect(JSON.stringify(notTime.body)).toContain('at');
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const scheduled = await as('bob', 'POST', `/policy-versions/${id}/schedule`, { at });
    expect(scheduled).toMatchObject({ status: 200, body: { versionId: id, at, by: 'bob' } });
    expect((await as('bob', 'POST', '/policy-versions/unschedule')).status).toBe(204);
    expect((await as('bob', 'POST', '/policy-versions/unschedule')).status).toBe(409);
    expect((await as('bob', 'POST', '/policy-versions/nope/schedule', { at })).status).toBe(404);
    expect(JSON.stringify((await as('bob', 'GET', '/audit?action=policy.schedule')).body)).toContain(id);
  });
});
