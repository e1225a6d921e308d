import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { SteppedClock } from '../src/timing/driven-clock.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { postgresAvailable, type RunningPostgres } from './support/postgres-server.ts';
import { SNOOZE_POLICY } from './support/snooze-policy.ts';
import { startTwoReplicasOnPostgres, type TwoReplicas } from './support/two-replicas.ts';

/**
 * Issue 34's rule snoozes over real HTTP: a snooze made through `POST /snoozes` stops one rule for
 * one account (or IP, or CIDR) and nothing else; the decision's explanation says which snooze and
 * until when; its expiry (the service's clock stepped, no sleep) or its early end brings the rule
 * back; bad input is a 400 naming the field; two replicas on one PostgreSQL see a snooze within 2 s.
 */

const login = (account: string, context: Record<string, boolean>, ip = '192.0.2.10') => ({
  ...demoRequest(account, undefined),
  ip,
  context,
});

type Explanation = {
  snoozed?: { id: string; snoozeId: string; entity: string; value: string; until: string }[];
  snoozesUnavailable?: string;
};

const ops = (h: Harness, method: string, path: string, body?: unknown) =>
  fetch(`${h.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });

const inMs = (clock: { nowMs(): number }, ms: number) => new Date(clock.nowMs() + ms).toISOString();

describe('rule snoozes on one riskgate', () => {
  const clock = new SteppedClock();
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({
      policy: { yaml: SNOOZE_POLICY },
      env: { RISKGATE_OPS_KEYS: `anna:analyst:${OPS_KEY}`, RISKGATE_MAX_SNOOZE_DAYS: '30' },
      riskgate: { clock },
    });
  }, 60_000);
  afterAll(() => h?.stop());

  it('stops the rule for the snoozed account only, says so, and brings it back at its expiry', async () => {
    expect((await h.decide(login('alice', { flagged: true }))).body.verdict).toBe('deny');
    const res = await ops(h, 'POST', '/snoozes', {
      ruleId: 'backend-flagged',
      entity: 'accountId',
      value: 'alice',
      until: inMs(clock, 60_000),
      reason: 'travelling this week; confirmed by phone',
    });
    expect(res.status).toBe(201);
    const snooze = (await res.json()) as { id: string; until: string; author: string };
    expect(snooze.author).toBe('anna');

    const alice = await h.decide(login('alice', { flagged: true }));
    expect(alice.body.verdict).toBe('allow');
    expect((alice.body.explanation as Explanation).snoozed).toEqual([
      {
        id: 'backend-flagged',
        snoozeId: snooze.id,
        entity: 'accountId',
        value: 'alice',
        until: snooze.until,
      },
    ]);
    expect(alice.body.reasons).toEqual([]);
    // Another account, and another rule for alice, are untouched.
    const bob = await h.decide(login('bob', { flagged: true }));
    expect(bob.body.verdict).toBe('deny');
    expect((bob.body.explanation as Explanation).snoozed).toBeUndefined();
    expect((await h.decide(login('alice', { newRegion: true }))).body.verdict).toBe('challenge');

    // The audit trail has it, with the analyst who made it.
    const trail = (await (await h.ops('/audit?action=snooze.create')).json()) as { entries: unknown[] };
    expect(trail.entries).toContainEqual(
      expect.objectContaining({ target: snooze.id, actor: 'anna', role: 'analyst' }),
    );
    // Listed by rule and by entity.
    const byRule = (await (await h.ops('/snoozes?ruleId=backend-flagged')).json()) as {
      items: { id: string }[];
    };
    expect(byRule.items.map((s) => s.id)).toContain(snooze.id);
    const byEntity = (await (await h.ops('/snoozes?entity=accountId&value=alice')).json()) as {
      items: { id: string }[];
    };
    expect(byEntity.items.map((s) => s.id)).toEqual([snooze.id]);
    expect(
      ((await (await h.ops('/snoozes?entity=accountId&value=bob')).json()) as { items: unknown[] }).items,
    ).toEqual([]);

    // Past its until (the wall clock stepped, no sleep), the rule is back for alice.
    clock.step(61_000);
    const back = await eventually(
      async () => {
        const answer = await h.decide(login('alice', { flagged: true }));
        // Right after the step the snapshot is unconfirmed for a poll: every rule counts then too.
        return (answer.body.explanation as Explanation).snoozesUnavailable === undefined ? answer : undefined;
      },
      { what: 'a decision on a confirmed snapshot after the step' },
    );
    expect(back.body.verdict).toBe('deny');
    expect((back.body.explanation as Explanation).snoozed).toBeUndefined();
    expect(
      ((await (await h.ops('/snoozes?ruleId=backend-flagged')).json()) as { items: unknown[] }).items,
    ).toEqual([]);
  });

  it('snoozes a rule for a CIDR: logins from inside it only', async () => {
    const res = await ops(h, 'POST', '/snoozes', {
      ruleId: 'new-region',
      entity: 'ip',
      value: '198.51.100.77/24',
      until: inMs(clock, 3_600_000),
      reason: 'the office VPN egress',
    });
    expect(res.status).toBe(201);
    const snooze = (await res.json()) as { id: string; value: string };
    expect(snooze.value).toBe('198.51.100.0/24');
    const inside = await h.decide(login('carol', { newRegion: true }, '198.51.100.9'));
    expect(inside.body.verdict).toBe('allow');
    expect((inside.body.explanation as Explanation).snoozed?.[0]).toMatchObject({
      id: 'new-region',
      snoozeId: snooze.id,
      entity: 'ip',
      value: '198.51.100.0/24',
    });
    expect((await h.decide(login('carol', { newRegion: true }, '198.51.101.9'))).body.verdict).toBe(
      'challenge',
    );

    // Ended early: the rule is back at once on this replica.
    const ended = await ops(h, 'DELETE', `/snoozes/${snooze.id}`, { reason: 'VPN moved' });
    expect(ended.status).toBe(200);
    expect(((await ended.json()) as { ended: { by: string } }).ended.by).toBe('anna');
    expect((await h.decide(login('carol', { newRegion: true }, '198.51.100.9'))).body.verdict).toBe(
      'challenge',
    );
    expect((await ops(h, 'DELETE', `/snoozes/${snooze.id}`, { reason: 'again' })).status).toBe(404);
  });

  it('refuses bad input with a 400 naming the field', async () => {
    const valid = {
      ruleId: 'backend-flagged',
      entity: 'accountId',
      value: 'dave',
      until: inMs(clock, 3_600_000),
      reason: 'r',
    };
    const cases: [Record<string, unknown>, string][] = [
      [{ ...valid, ruleId: 'backend-flaged' }, 'ruleId'],
      [{ ...valid, entity: 'device' }, 'entity'],
      [{ ...valid, entity: 'ip', value: 'not-an-ip' }, 'value'],
      [{ ...valid, until: 'tomorrow' }, 'until'],
      [{ ...valid, until: inMs(clock, -1000) }, 'until'],
      [{ ...valid, until: inMs(clock, 31 * 86_400_000) }, 'until'],
      [{ ...valid, reason: '' }, 'reason'],
      [{ ...valid, extra: 1 }, ''],
    ];
    for (const [body, field] of cases) {
      const res = await ops(h, 'POST', '/snoozes', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
      const problem = (await res.json()) as { detail: string; errors?: { field: string }[] };
      if (field !== '') expect(problem.errors?.[0]?.field, JSON.stringify(problem)).toBe(field);
    }
    const unknown = (await (
      await ops(h, 'POST', '/snoozes', { ...valid, ruleId: 'backend-flaged' })
    ).json()) as {
      detail: string;
    };
    expect(unknown.detail).toContain('did you mean backend-flagged?');
    expect((await ops(h, 'GET', '/snoozes?entity=robot')).status).toBe(400);
    expect((await ops(h, 'DELETE', '/snoozes/nope')).status).toBe(400);
    // Nothing was snoozed by any of them.
    expect(
      ((await (await h.ops('/snoozes?entity=accountId&value=dave')).json()) as { items: unknown[] }).items,
    ).toEqual([]);
  });

  it('refuses a snooze from a viewer (403)', async () => {
    const viewer = await startHarness({
      policy: { yaml: SNOOZE_POLICY },
      env: { RISKGATE_OPS_KEYS: `vic:viewer:${OPS_KEY}` },
      sharedSandbox: h.sandbox,
    });
    try {
      const res = await ops(viewer, 'POST', '/snoozes', {
        ruleId: 'backend-flagged',
        entity: 'accountId',
        value: 'alice',
        until: new Date(Date.now() + 60_000).toISOString(),
        reason: 'r',
      });
      expect(res.status).toBe(403);
      expect((await ops(viewer, 'GET', '/snoozes')).status).toBe(200);
    } finally {
      await viewer.stop();
    }
  }, 60_000);
});

describe.runIf(postgresAvailable())('rule snoozes shared by two riskgates on PostgreSQL', () => {
  let replicas: TwoReplicas;
  let pg: RunningPostgres;
  let one: Harness;
  let two: Harness;

  beforeAll(async () => {
    replicas = await startTwoReplicasOnPostgres(SNOOZE_POLICY);
    ({ pg, one, two } = replicas);
  }, 60_000);
  afterAll(() => replicas?.stop());

  it('applies a snooze made on the first on the second within 2 s, and its early end too', async () => {
    expect((await two.decide(login('erin', { flagged: true }))).body.verdict).toBe('deny');
    const res = await ops(one, 'POST', '/snoozes', {
      ruleId: 'backend-flagged',
      entity: 'accountId',
      value: 'erin',
      until: new Date(Date.now() + 3_600_000).toISOString(),
      reason: 'known traveller',
    });
    expect(res.status).toBe(201);
    const madeAt = performance.now();
    const { id } = (await res.json()) as { id: string };
    await eventually(
      async () => (await two.decide(login('erin', { flagged: true }))).body.verdict === 'allow',
      {
        timeoutMs: 10_000,
        intervalMs: 50,
        what: 'the second riskgate applying the snooze',
      },
    );
    expect(performance.now() - madeAt).toBeLessThan(2000);
    expect((await two.decide(login('frank', { flagged: true }))).body.verdict).toBe('deny');

    expect((await ops(two, 'DELETE', `/snoozes/${id}?reason=back+home`)).status).toBe(200);
    const endedAt = performance.now();
    await eventually(
      async () => (await one.decide(login('erin', { flagged: true }))).body.verdict === 'deny',
      {
        timeoutMs: 10_000,
        intervalMs: 50,
        what: 'the first riskgate seeing the early end',
      },
    );
    expect(performance.now() - endedAt).toBeLessThan(2000);
  });

  it('counts every rule, and says so, once the snoozes cannot be read', async () => {
    expect(
      (
        await ops(one, 'POST', '/snoozes', {
          ruleId: 'backend-flagged',
          entity: 'accountId',
          value: 'gina',
          until: new Date(Date.now() + 3_600_000).toISOString(),
          reason: 'r',
        })
      ).status,
    ).toBe(201);
    await eventually(
      async () => (await two.decide(login('gina', { flagged: true }))).body.verdict === 'allow',
    );
    await pg.stop();
    const { body } = await eventually(
      async () => {
        const answer = await two.decide(login('gina', { flagged: true }));
        return answer.body.verdict !== 'allow' ? answer : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, what: 'the stale snapshot making the snoozes unavailable' },
    );
    // A snooze only relaxes: unreadable, the rule counts (deny), never silently snoozed.
    expect(body.verdict).toBe('deny');
    expect((body.explanation as Explanation).snoozesUnavailable).toBe('RG_ERR_SNOOZES_UNAVAILABLE');
    expect(two.serviceLog).toContainEqual(expect.objectContaining({ msg: 'snooze snapshot refresh failed' }));
  }, 60_000);
});
