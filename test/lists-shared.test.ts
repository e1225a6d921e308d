import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { type Harness, OPS_KEY } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { LIST_POLICY } from './support/list-policy.ts';
import { postgresAvailable, type RunningPostgres } from './support/postgres-server.ts';
import { startTwoReplicasOnPostgres, type TwoReplicas } from './support/two-replicas.ts';

/**
 * Issue 26's shared lists: two riskgates on one PostgreSQL (RISKGATE_DATABASE). A CIDR added to a
 * deny list through one is denied by the other within 2 s; the entry stops matching at its expiry
 * (checked at lookup, not at the next refresh); removing it through the other is audited with the
 * operator's name. With the database gone, a replica's snapshot goes stale and a login the deny
 * list would have judged is held at the degraded verdict (challenge), never allowed.
 */

const login = (ip: string) => ({ ...demoRequest('alice', undefined), ip });

describe.runIf(postgresAvailable())('runtime lists shared by two riskgates on PostgreSQL', () => {
  let replicas: TwoReplicas;
  let pg: RunningPostgres;
  let one: Harness;
  let two: Harness;

  beforeAll(async () => {
    // Counters in each process (the lists are what is shared here).
    replicas = await startTwoReplicasOnPostgres(LIST_POLICY, { riskgate: { lists: { staleAfterMs: 4000 } } });
    ({ pg, one, two } = replicas);
  }, 60_000);
  afterAll(() => replicas?.stop());

  const ops = (h: Harness, method: string, path: string, body?: unknown) =>
    fetch(`${h.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });

  it('denies on the second a login from a CIDR added on the first within 2 s, until the entry expires', async () => {
    expect((await two.decide(login('192.0.2.10'))).body.verdict).toBe('allow');
    const res = await ops(one, 'POST', '/lists/blockedNetworks/entries', {
      value: '192.0.2.0/24',
      reason: 'attack from this range',
      ttlSeconds: 4,
    });
    expect(res.status).toBe(201);
    const addedAt = performance.now();
    const { expiresAt } = (await res.json()) as { expiresAt: string };
    await eventually(async () => (await two.decide(login('192.0.2.10'))).body.verdict === 'deny', {
      timeoutMs: 10_000,
      intervalMs: 50,
      what: 'the second riskgate denying the added range',
    });
    expect(performance.now() - addedAt).toBeLessThan(2000);
    expect((await two.decide(login('192.0.3.10'))).body.verdict).toBe('allow');
    // Expiry is checked at lookup: past expiresAt, neither replica matches, whatever its refresh.
    await eventually(() => Date.now() >= Date.parse(expiresAt), { timeoutMs: 10_000, intervalMs: 10 });
    expect((await two.decide(login('192.0.2.10'))).body.verdict).toBe('allow');
    expect((await one.decide(login('192.0.2.10'))).body.verdict).toBe('allow');
  });

  it('audits a removal through the other riskgate with the operator who made it', async () => {
    expect(
      (await ops(one, 'POST', '/lists/blockedNetworks/entries', { value: '198.51.100.0/24', reason: 'r' }))
        .status,
    ).toBe(201);
    await eventually(async () => (await two.decide(login('198.51.100.5'))).body.verdict === 'deny');
    const res = await ops(
      two,
      'DELETE',
      `/lists/blockedNetworks/entries/${encodeURIComponent('198.51.100.0/24')}`,
      {
        reason: 'the customer proved it was them',
      },
    );
    expect(res.status).toBe(200);
    // The audit trail is in the shared database: the first riskgate shows the second's entry.
    const trail = (await (await one.ops('/audit?action=list.remove')).json()) as { entries: unknown[] };
    expect(trail.entries).toHaveLength(1);
    expect(trail.entries[0]).toMatchObject({
      target: 'blockedNetworks:198.51.100.0/24',
      actor: 'olga',
      role: 'admin',
      detail: { reason: 'the customer proved it was them' },
    });
    await eventually(async () => (await one.decide(login('198.51.100.5'))).body.verdict === 'allow');
  });

  it('holds a login the lists would judge at challenge once the database has not answered for the bound', async () => {
    // Stopped, not paused: a SIGSTOP reaches the postmaster, but each backend is its own session.
    await pg.stop();
    const { body } = await eventually(
      async () => {
        const answer = await two.decide(login('203.0.113.1'));
        return answer.body.verdict !== 'allow' ? answer : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, what: 'the stale snapshot making the lists unavailable' },
    );
    expect(body.verdict).toBe('challenge');
    expect(body.degraded).toBe(true);
    const explanation = body.explanation as { degraded: { inputs: unknown[] } };
    expect(explanation.degraded.inputs).toEqual([{ input: 'lists', reason: 'RG_ERR_LISTS_UNAVAILABLE' }]);
    expect((body.signals as Record<string, unknown>).lists).toEqual({
      status: 'unavailable',
      reason: 'RG_ERR_LISTS_UNAVAILABLE',
      treatment: 'ignore',
    });
    expect(two.serviceLog).toContainEqual(expect.objectContaining({ msg: 'list snapshot refresh failed' }));
  }, 60_000);
});
