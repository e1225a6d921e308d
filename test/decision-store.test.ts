import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * The decision store end to end: the shipped policy decides the demo logins over real HTTP, and
 * `GET /decisions` (on the default store: SQLite in the state dir, written from its own thread)
 * finds each under every filter, pages them, shows a label given through `POST /feedback` and the
 * lock-out's outcome on mallory's deny, and keeps no one-time code.
 */

let h: Harness;
let userIds: Record<string, string | undefined>;
const ids: Record<string, string> = {};
const rules: Record<string, string[]> = {};
let oneTimeCode: string | undefined;

type Page = { decisions: Record<string, unknown>[]; nextCursor?: string; counts?: Record<string, number> };

async function page(query: string): Promise<Page> {
  const res = await h.ops(`/decisions?${query}`);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as Page;
}
const idsOf = (p: Page) => p.decisions.map((d) => d.decisionId);

beforeAll(async () => {
  // Patient timeouts and deadline: what is stored, not the timing, is tested (none degraded).
  h = await startHarness({ policy: { yaml: patientShippedPolicy() }, deadlineMs: PATIENT_DEADLINE_MS });
  userIds = await lookUpUserIds(h.sandbox, ['alice', 'bob', 'mallory']);
  for (const name of ['alice', 'bob', 'mallory'] as const) {
    const { status, body } = await h.decide({
      ...demoRequest(name, userIds[name]),
      ip: `198.51.100.${name.length}`,
    });
    expect(status).toBe(200);
    ids[name] = body.decisionId as string;
    rules[name] = (body.reasons as { id: string }[]).map((r) => r.id);
    const code = (body.actions as { oneTimeCode?: string }[]).find((a) => a.oneTimeCode !== undefined);
    if (code !== undefined) oneTimeCode = code.oneTimeCode;
  }
  await eventually(async () => (await page('limit=200')).decisions.length >= 3, {
    timeoutMs: 15_000,
    what: 'the three decisions in the store',
  });
});
afterAll(() => h?.stop());

describe('GET /decisions', () => {
  it('finds each decision under every filter, newest first', async () => {
    expect(idsOf(await page(''))).toEqual([ids.mallory, ids.bob, ids.alice]);
    expect(idsOf(await page('verdict=deny'))).toEqual([ids.mallory]);
    expect(idsOf(await page('verdict=challenge'))).toEqual([ids.bob]);
    expect(idsOf(await page('accountId=bob'))).toEqual([ids.bob]);
    expect(idsOf(await page(`userId=${userIds.mallory}`))).toEqual([ids.mallory]);
    expect(idsOf(await page('ip=198.51.100.5'))).toEqual([ids.alice]);
    expect(idsOf(await page('unitId=bob-web'))).toEqual([ids.bob]);
    const malloryRule = rules.mallory!.find((r) => !rules.alice!.includes(r) && !rules.bob!.includes(r))!;
    expect(idsOf(await page(`rule=${malloryRule}`))).toEqual([ids.mallory]);
    expect(idsOf(await page('rule=no-such-rule'))).toEqual([]);
    expect(idsOf(await page('degraded=true'))).toEqual([]);
    expect(idsOf(await page('degraded=false'))).toHaveLength(3);
    expect(idsOf(await page('shadowDisagrees=true'))).toEqual([]);
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect(idsOf(await page(`from=${future}`))).toEqual([]);
    expect(idsOf(await page(`to=${future}&from=2020-01-01T00:00:00Z`))).toHaveLength(3);
    const { decisions } = await page(`accountId=mallory`);
    expect(decisions[0]).toMatchObject({
      verdict: 'deny',
      accountId: 'mallory',
      userId: userIds.mallory,
      unitId: 'mallory-web',
      degraded: false,
      rules: expect.arrayContaining(rules.mallory!),
      policy: { name: expect.any(String), revision: expect.any(String) },
    });
  });

  it('counts by verdict over the filter', async () => {
    expect((await page('counts=true')).counts).toEqual({ allow: 1, challenge: 1, deny: 1, total: 3 });
    expect((await page('counts=true&verdict=deny')).counts).toEqual({
      allow: 0,
      challenge: 0,
      deny: 1,
      total: 1,
    });
    expect((await page('')).counts).toBeUndefined();
  });

  it('pages with a cursor, each decision once, in order', async () => {
    const seen: unknown[] = [];
    let cursor: string | undefined;
    do {
      const p = await page(`limit=1${cursor === undefined ? '' : `&cursor=${cursor}`}`);
      expect(p.decisions.length).toBe(1);
      seen.push(...idsOf(p));
      cursor = p.nextCursor;
    } while (cursor !== undefined);
    expect(seen).toEqual([ids.mallory, ids.bob, ids.alice]);
  });

  it('answers a bad query with a 400 naming the parameter, an unknown id with a 404, no key with a 401', async () => {
    for (const [query, field] of [
      ['limit=500', 'limit'],
      ['verdict=maybe', 'verdict'],
      ['from=yesterday', 'from'],
      ['cursor=bm90LWEtY3Vyc29y', 'cursor'],
      ['degraded=yes', 'degraded'],
      ['label=spam', 'label'],
      ['colour=red', ''],
    ] as const) {
      const res = await h.ops(`/decisions?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
      const problem = (await res.json()) as { code: string; field?: string; detail: string };
      expect(problem.code).toBe('RG_ERR_INVALID_INPUT');
      if (field !== '') expect(problem.field, query).toBe(field);
      else expect(problem.detail).toMatch(/colour/);
    }
    const missing = await h.ops(`/decisions/${crypto.randomUUID()}`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { code: string }).code).toBe('RG_ERR_NOT_FOUND');
    expect((await fetch(`${h.url}/decisions`)).status).toBe(401);
  });
});

describe('GET /decisions/{decisionId}', () => {
  it("shows mallory's deny whole, with the lock-out done", async () => {
    const decision = await eventually(
      async () => {
        const res = await h.ops(`/decisions/${ids.mallory}`);
        const body = (await res.json()) as { actions: { type: string; status: string }[] };
        return body.actions.some((a) => a.type === 'lock_out_user' && a.status === 'done') ? body : undefined;
      },
      { timeoutMs: 15_000, what: "mallory's lock-out outcome in the store" },
    );
    expect(decision).toMatchObject({
      decisionId: ids.mallory,
      verdict: 'deny',
      line: { kind: 'decision', decisionId: ids.mallory, request: { accountId: 'mallory' } },
      labels: [],
      actions: [
        expect.objectContaining({
          actionId: `${ids.mallory}:lock_out_user:${userIds.mallory}`,
          type: 'lock_out_user',
          target: userIds.mallory,
          status: 'done',
          detail: expect.objectContaining({ attempts: 1 }),
        }),
      ],
    });
  });

  it("keeps no one-time code: bob's challenge answer carried one, the store has it redacted", async () => {
    expect(oneTimeCode).toBeDefined();
    const res = await h.ops(`/decisions/${ids.bob}`);
    const text = await res.text();
    expect(text).not.toContain(oneTimeCode!);
    expect(JSON.parse(text).line.actions).toContainEqual(
      expect.objectContaining({ oneTimeCode: '[redacted]' }),
    );
  });

  it('shows a label given through POST /feedback, and the label filter finds it', async () => {
    const res = await fetch(`${h.url}/feedback`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ decisionId: ids.bob, label: 'fraud', note: 'known fraud ring' }),
    });
    expect(res.status).toBe(202);
    await eventually(async () => idsOf(await page('label=fraud')).includes(ids.bob!), {
      timeoutMs: 15_000,
      what: 'the label in the store',
    });
    expect(idsOf(await page('label=none'))).toEqual([ids.mallory, ids.alice]);
    const bob = (await (await h.ops(`/decisions/${ids.bob}`)).json()) as Record<string, unknown>;
    expect(bob).toMatchObject({
      label: 'fraud',
      labels: [{ label: 'fraud', labelledBy: expect.stringMatching(/^key-/), note: 'known fraud ring' }],
    });
  });

  it('says in /healthz and the metrics that the store keeps up', async () => {
    const health = (await (await fetch(`${h.url}/healthz`)).json()) as Record<string, unknown>;
    expect(health.decisionStore).toMatchObject({ engine: 'sqlite', writing: true, dropped: 0 });
    const metrics = await (await h.ops('/metrics')).text();
    expect(metrics).toMatch(/^riskgate_decision_store_written_total [1-9]/m);
    expect(metrics).toMatch(/^riskgate_decision_store_dropped_total 0$/m);
    expect(metrics).toMatch(/^riskgate_decision_store_writing 1$/m);
  });
});
