import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actionsCommand } from '../src/cli/actions-commands.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';
import { LOCK_EVERYONE_POLICY, SANDBOX_USERS } from './support/lock-everyone-policy.ts';
import {
  oneRiskgateOn,
  postgresAvailable,
  type RunningPostgres,
  startPostgres,
} from './support/postgres-server.ts';

/**
 * The durable outbox in a running riskgate, over real HTTP with the sandbox: an Admin outage of a
 * minute, then recovery; what operators see and steer (GET /actions, retry, drop, the CLI, metrics).
 */

const LOCK_EVERYONE = LOCK_EVERYONE_POLICY;

const USERS = SANDBOX_USERS;
const PUT_USER = 'PUT /srv/admin/v1/users/:id';

let h: Harness;
let userIds: Record<string, string | undefined>;
beforeAll(async () => {
  h = await startHarness({
    policy: { yaml: LOCK_EVERYONE },
    // A short breaker, so recovery is seen within seconds of the outage's end.
    riskgate: { breakers: { openMs: { initialMs: 500, maxMs: 2000 } } },
  });
  userIds = await lookUpUserIds(h.sandbox, [...USERS]);
});
afterAll(() => h?.stop());

const lockOutOf = (body: Record<string, unknown>) =>
  (body.actions as { type: string; status: string }[]).find((a) => a.type === 'lock_out_user');

async function putCounts(): Promise<Record<string, number>> {
  const stats = (await h.control('GET', '/sandbox/stats')) as {
    routes: Record<string, Record<string, number>>;
  };
  return stats.routes[PUT_USER] ?? {};
}

async function outbox(query = '') {
  const res = await h.ops(`/actions${query}`);
  expect(res.status).toBe(200);
  return (await res.json()) as {
    pending: number;
    dead: number;
    oldestPendingAgeMs: number;
    actions: {
      id: string;
      decisionId: string;
      status: string;
      attempts: number;
      lastError?: string;
      reason?: string;
    }[];
  };
}

describe('a 60-second Admin API outage, then recovery', () => {
  it('applies every queued lock-out exactly once after the Admin API recovers', async () => {
    await h.control('POST', '/sandbox/reset');
    await h.control('POST', '/sandbox/stats/reset');
    await h.control('PUT', '/sandbox/faults', {
      rules: [{ route: 'PUT /srv/admin/v1/users/*', errorRate: 1, errorStatus: 503 }],
    });
    const outageStarted = performance.now();
    // mallory denied five times, every other account once: ten lock-outs promised.
    const logins = [...USERS.filter((u) => u !== 'mallory'), ...Array(5).fill('mallory')] as string[];
    const decisions: string[] = [];
    for (const user of logins) {
      const res = await h.decide(demoRequest(user, userIds[user]));
      expect(res.status).toBe(200);
      expect(lockOutOf(res.body)).toMatchObject({ status: 'queued' });
      decisions.push(String(res.body.decisionId));
    }

    // During the outage: all ten in the outbox, visible to operators, none given up.
    await eventually(async () =>
      (await outbox()).actions.some((a) => a.lastError !== undefined) ? true : undefined,
    );
    const during = await outbox('?status=pending');
    expect(during.pending).toBe(10);
    expect(during.actions).toHaveLength(10);
    const metrics = await (await h.ops('/metrics')).text();
    expect(metrics).toMatch(/^riskgate_outbox_pending 10$/m);
    expect(metrics).toMatch(/^riskgate_outbox_oldest_pending_age_seconds \d/m);
    expect(h.lines.filter((l) => l.kind === 'action')).toEqual([]);

    const left = 60_000 - (performance.now() - outageStarted);
    await new Promise((r) => setTimeout(r, Math.max(0, left)));
    expect(h.lines.filter((l) => l.kind === 'action')).toEqual([]);
    await h.control('DELETE', '/sandbox/faults');

    await eventually(async () => ((await outbox()).pending === 0 ? true : undefined), 20_000);
    await eventually(
      async () => (h.lines.filter((l) => l.kind === 'action').length >= 10 ? true : undefined),
      5000,
    );
    const lines = h.lines.filter((l) => l.kind === 'action');
    expect(lines.map((l) => l.decisionId).sort()).toEqual([...decisions].sort());
    expect(lines.every((l) => l.status === 'done')).toBe(true);
    for (const user of USERS) expect(await adminUserStatus(h.sandbox, userIds[user]!)).toBe('locked_out');
    // Exactly once: six accounts changed (200); mallory's four repeats found her locked already (304).
    const counts = await putCounts();
    expect(counts['200']).toBe(6);
    expect(counts['304']).toBe(4);
  }, 120_000);
});

type Mode = { name: string; kind: 'sqlite' | 'memory' | 'postgres' };
const MODES: Mode[] = [
  { name: 'the outbox in the SQLite database', kind: 'sqlite' },
  { name: 'the memory outbox', kind: 'memory' },
  { name: 'the outbox in PostgreSQL', kind: 'postgres' },
];

describe.each(MODES)('operators, with $name', (mode) => {
  const skip = mode.kind === 'postgres' && !postgresAvailable();
  it.skipIf(skip)(
    'see a dead-lettered action, retry it, and drop a pending one, each with its outcome line',
    async () => {
      const pg: RunningPostgres | undefined = mode.kind === 'postgres' ? await startPostgres() : undefined;
      const outboxEnv: Record<string, string> =
        pg !== undefined
          ? oneRiskgateOn(pg.url)
          : { RISKGATE_OUTBOX: mode.kind === 'memory' ? 'memory' : 'database' };
      // Its own riskgate with a one-second horizon: an action the Admin API keeps refusing is dead soon.
      const main = h;
      try {
        h = await startHarness({
          policy: { yaml: LOCK_EVERYONE },
          env: { RISKGATE_OUTBOX_HORIZON_SECONDS: '1', ...outboxEnv },
          riskgate: { breakers: { openMs: { initialMs: 200, maxMs: 500 } } },
        });
        try {
          await operatorsSteer(outboxEnv);
        } finally {
          await h.stop();
        }
      } finally {
        h = main;
        await pg?.stop();
      }
    },
    30_000,
  );
});

async function operatorsSteer(outboxEnv: Record<string, string>): Promise<void> {
  {
    await h.control('POST', '/sandbox/reset');
    // The Admin API keeps failing bob's update: dead once the horizon has passed.
    await h.control('PUT', '/sandbox/faults', {
      rules: [{ route: `PUT /srv/admin/v1/users/${userIds.bob}`, errorRate: 1, errorStatus: 503 }],
    });
    const bob = await h.decide(demoRequest('bob', userIds.bob));
    const bobId = `${bob.body.decisionId}:lock_out_user:${userIds.bob}`;
    await eventually(async () =>
      (await outbox('?status=dead')).actions.some((a) => a.id === bobId) ? true : undefined,
    );
    expect((await outbox('?status=dead')).actions.find((a) => a.id === bobId)).toMatchObject({
      status: 'dead',
      reason: 'horizon_exhausted:RG_ERR_UPSTREAM_SERVER_ERROR',
    });
    expect(h.lines).toContainEqual(
      expect.objectContaining({
        kind: 'action',
        key: bobId,
        status: 'failed',
        reason: 'horizon_exhausted:RG_ERR_UPSTREAM_SERVER_ERROR',
      }),
    );

    // The CLI reads the same store (the service's state dir), in another connection; the memory
    // store is in the service's process only, and the CLI says so.
    const out: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(l) };
    const listed = await actionsCommand(
      'list',
      undefined,
      { env: { RISKGATE_STATE_DIR: h.stateDir, ...outboxEnv }, status: 'dead', json: true },
      io,
    );
    if (outboxEnv.RISKGATE_OUTBOX === 'memory') {
      expect(listed).toBe(1);
      expect(out.join('\n')).toContain('GET /actions');
    } else {
      expect(listed).toBe(0);
      expect((JSON.parse(out[0]!) as { actions: { id: string }[] }).actions.map((a) => a.id)).toContain(
        bobId,
      );
    }

    // Cause fixed: an operator retries; it is delivered.
    await h.control('DELETE', '/sandbox/faults');
    const post = await fetch(`${h.url}/actions/${encodeURIComponent(bobId)}/retry`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPS_KEY}` },
    });
    expect(post.status).toBe(200);
    await eventually(async () =>
      h.lines.some((l) => l.key === bobId && l.status === 'done') ? true : undefined,
    );
    expect(await adminUserStatus(h.sandbox, userIds.bob!)).toBe('locked_out');

    // A pending action dropped by an operator: never delivered, one line saying so.
    await h.control('PUT', '/sandbox/faults', {
      rules: [{ route: 'PUT /srv/admin/v1/users/*', hang: true }],
    });
    const carol = await h.decide(demoRequest('carol', userIds.carol));
    const carolId = `${carol.body.decisionId}:lock_out_user:${userIds.carol}`;
    const dropped = await fetch(`${h.url}/actions/${encodeURIComponent(carolId)}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${OPS_KEY}` },
    });
    expect(dropped.status).toBe(200);
    expect(await dropped.json()).toMatchObject({
      id: carolId,
      status: 'dropped',
      reason: 'dropped_by_operator',
    });
    expect(h.lines).toContainEqual(
      expect.objectContaining({
        kind: 'action',
        key: carolId,
        status: 'failed',
        reason: 'dropped_by_operator',
      }),
    );
    await h.control('DELETE', '/sandbox/faults');
    // Unknown ids and bad queries are clear refusals.
    const missing = await fetch(`${h.url}/actions/nope/retry`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPS_KEY}` },
    });
    expect(missing.status).toBe(404);
    const bad = await h.ops('/actions?status=lost');
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ field: 'status' });
    // And without a key, nothing.
    expect((await fetch(`${h.url}/actions`)).status).toBe(401);
  }
}

describe('the memory outbox, which dies with its process', () => {
  /** A riskgate on the memory outbox whose lock-out of bob hangs at the Admin API; its key. */
  async function hangingLockOut(): Promise<{ m: Harness; key: string }> {
    const m = await startHarness({
      policy: { yaml: LOCK_EVERYONE },
      env: { RISKGATE_OUTBOX: 'memory' },
      riskgate: { drainTimeoutMs: 500 },
    });
    const [bobId] = Object.values(await lookUpUserIds(m.sandbox, ['bob']));
    await m.control('PUT', '/sandbox/faults', {
      rules: [{ route: 'PUT /srv/admin/v1/users/*', hang: true }],
    });
    const res = await m.decide(demoRequest('bob', bobId));
    expect(lockOutOf(res.body)).toMatchObject({ status: 'queued' });
    const key = `${res.body.decisionId}:lock_out_user:${bobId}`;
    await eventually(async () => (m.riskgate.outbox.attemptsStarted > 0 ? true : undefined));
    return { m, key };
  }

  it('reports an undelivered action failed (process_crash) on a fatal error, as nothing will deliver it', async () => {
    const { m, key } = await hangingLockOut();
    try {
      await m.riskgate.abandon('process_crash', 1000);
      expect(m.lines.filter((l) => l.kind === 'action')).toEqual([
        expect.objectContaining({ key, status: 'failed', reason: 'process_crash' }),
      ]);
    } finally {
      await m.stop();
    }
  });

  it('reports an action still undelivered after the shutdown grace failed (shutdown)', async () => {
    const { m, key } = await hangingLockOut();
    await m.stop();
    expect(m.lines.filter((l) => l.kind === 'action')).toEqual([
      expect.objectContaining({ key, status: 'failed', reason: 'shutdown' }),
    ]);
  });
});
