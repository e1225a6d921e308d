import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActionSpec } from '../src/actions/admin-actions.ts';
import type { DatabaseTarget } from '../src/database/database.ts';
import { MemoryOutboxStore } from '../src/outbox/memory-outbox-store.ts';
import type { OutboxStore } from '../src/outbox/outbox-store.ts';
import { openDatabaseOutbox, outboxSqliteFile } from './support/outbox-database.ts';
import { describeOnPostgres } from './support/postgres-server.ts';

/**
 * The store contract, run against every engine: this process's memory, and the database on the
 * embedded SQLite file (through its thread) and on a real PostgreSQL.
 */

let seq = 0;
function spec(user: string, type: ActionSpec['type'] = 'lock_out_user'): ActionSpec {
  seq++;
  return {
    id: `d${seq}:${type}:${user}`,
    decisionId: `d${seq}`,
    type,
    target: user,
    orderingKey: user,
    call: { method: 'updateUser', userId: user, update: { status: 'locked_out' } },
  };
}

const T0 = 1_800_000_000_000;
const LEASE = 10_000;

function contract(name: string, open: () => Promise<OutboxStore>) {
  describe(`outbox store: ${name}`, () => {
    let store: OutboxStore;
    beforeAll(async () => {
      store = await open();
    });
    afterAll(() => store?.close());

    it('passes over webhook deliveries when asked, and leaves them due', async () => {
      const hook: ActionSpec = {
        ...spec('u-hook', 'deliver_webhook'),
        call: { method: 'postWebhook', receiver: 'r', webhookId: 'e', body: '{"type":"lockout.created"}' },
      };
      const lock = spec('u-after-hook');
      await store.append([hook, lock], T0 - 1);
      const ids = async (options?: { skipWebhooks: boolean }) =>
        (await store.claim('w', 100, T0, LEASE, options))
          .map((e) => e.spec.id)
          .filter((id) => id === hook.id || id === lock.id);
      expect(await ids({ skipWebhooks: true })).toEqual([lock.id]);
      expect(await ids()).toEqual([hook.id]);
    });

    it('takes a jittered (fractional) retry time and lease, and is due by then', async () => {
      const a = spec('u-jitter');
      await store.append([a], T0);
      expect((await store.claim('wj', 100, T0, 1000.25)).map((e) => e.spec.id)).toContain(a.id);
      await store.retryLater(a.id, 'wj', T0 + 1234.5678, 'RG_ERR_UPSTREAM_TIMEOUT', true, T0 + 1);
      expect((await store.claim('wj', 100, T0 + 1236, LEASE)).map((e) => e.spec.id)).toContain(a.id);
      await store.complete(a.id, 'wj', T0 + 1237);
    });

    it('fails only the append whose companion rows are refused, its entries with them, not the others of its turn', async () => {
      const [a, b] = [spec('u-refused'), spec('u-taken')];
      const refused = store.append([a], T0, [
        {
          write: async () => {
            // As the database says it (SQLSTATE class 23): a refused row, not a database down.
            throw Object.assign(new Error('a row the database refuses'), { code: '23514' });
          },
        },
      ]);
      const taken = store.append([b], T0);
      await expect(refused).rejects.toThrow();
      expect(await taken).toEqual([true]);
      expect(await store.get(a.id)).toBeUndefined();
      expect((await store.get(b.id))?.status).toBe('pending');
    });

    it('appends once per id: a second append of the same action is a duplicate', async () => {
      const a = spec('u-dup');
      expect(await store.append([a], T0)).toEqual([true]);
      expect(await store.append([a, spec('u-dup2')], T0)).toEqual([false, true]);
      expect((await store.get(a.id))?.status).toBe('pending');
    });

    it('leases an entry to one owner at a time, and another takes it over once the lease runs out', async () => {
      const a = spec('u-lease');
      await store.append([a], T0);
      const mine = (await store.claim('w1', 100, T0, LEASE)).filter((e) => e.spec.id === a.id);
      expect(mine).toHaveLength(1);
      expect(mine[0]!.attempts).toBe(1);
      expect((await store.claim('w2', 100, T0 + 1, LEASE)).map((e) => e.spec.id)).not.toContain(a.id);
      expect(await store.leaseOwners(T0 + 1)).toContain('w1');
      // w1 died: after the lease, w2 claims it (a second attempt), and w1 can no longer finish it.
      const taken = (await store.claim('w2', 100, T0 + LEASE + 1, LEASE)).filter((e) => e.spec.id === a.id);
      expect(taken.map((e) => e.attempts)).toEqual([2]);
      expect(await store.complete(a.id, 'w1', T0 + LEASE + 2)).toBe(false);
      expect(await store.complete(a.id, 'w2', T0 + LEASE + 2)).toBe(true);
      expect((await store.get(a.id))?.status).toBe('delivered');
    });

    it("keeps one user's actions in order: a later one waits until the earlier one is final", async () => {
      const first = spec('u-order', 'lock_out_user');
      const second = spec('u-order', 'restrict_factors');
      await store.append([first, second], T0);
      const claimed = (await store.claim('w', 100, T0, LEASE)).map((e) => e.spec.id);
      expect(claimed).toContain(first.id);
      expect(claimed).not.toContain(second.id);
      // Even while the first waits for a retry, the second does not overtake it.
      await store.retryLater(first.id, 'w', T0 + 5000, 'RG_ERR_UPSTREAM_SERVER_ERROR', true, T0);
      expect((await store.claim('w', 100, T0 + 10, LEASE)).map((e) => e.spec.id)).not.toContain(second.id);
      const again = (await store.claim('w', 100, T0 + 5000, LEASE)).map((e) => e.spec.id);
      expect(again).toEqual([first.id]);
      await store.complete(first.id, 'w', T0 + 5001);
      expect((await store.claim('w', 100, T0 + 5002, LEASE)).map((e) => e.spec.id)).toContain(second.id);
    });

    it('gives back an attempt that never reached the vendor, and keeps the last upstream error', async () => {
      const a = spec('u-breaker');
      await store.append([a], T0);
      await store.claim('w', 100, T0, LEASE);
      await store.retryLater(a.id, 'w', T0 + 100, 'RG_ERR_UPSTREAM_SERVER_ERROR', false, T0);
      const e = await store.get(a.id);
      expect(e).toMatchObject({
        attempts: 0,
        lastError: 'RG_ERR_UPSTREAM_SERVER_ERROR',
        nextAttemptAtMs: T0 + 100,
      });
      expect((await store.claim('w', 100, T0 + 50, LEASE)).map((x) => x.spec.id)).not.toContain(a.id);
    });

    it('dead-letters, counts, lets an operator retry or drop, and never claims a dropped entry', async () => {
      const a = spec('u-dead');
      const b = spec('u-dead');
      await store.append([a, b], T0);
      await store.claim('w', 100, T0, LEASE);
      expect(await store.deadLetter(a.id, 'w', 'RG_ERR_UPSTREAM_NOT_FOUND', T0 + 1)).toBe(true);
      expect(await store.get(a.id)).toMatchObject({ status: 'dead', reason: 'RG_ERR_UPSTREAM_NOT_FOUND' });
      expect((await store.list({ status: 'dead' })).map((e) => e.spec.id)).toContain(a.id);
      // The user's next action is due now that the first is final.
      expect((await store.claim('w', 100, T0 + 2, LEASE)).map((e) => e.spec.id)).toContain(b.id);
      await store.complete(b.id, 'w', T0 + 3);
      expect(await store.retry(a.id, T0 + 10)).toBe(true);
      expect(await store.get(a.id)).toMatchObject({ status: 'pending', horizonStartMs: T0 + 10 });
      expect(await store.drop(a.id, 'dropped_by_operator', T0 + 11)).toBe(true);
      expect(await store.get(a.id)).toMatchObject({ status: 'dropped', reason: 'dropped_by_operator' });
      expect((await store.claim('w', 100, T0 + 12, LEASE)).map((e) => e.spec.id)).not.toContain(a.id);
      expect(await store.drop(a.id, 'again', T0 + 13)).toBe(false);
    });

    it('reports pending and the oldest pending age, ends a dead owner leases at once, and prunes what is final', async () => {
      const a = spec('u-stats');
      await store.append([a], T0 + 1000);
      const stats = await store.stats(T0 + 61_000);
      expect(stats.pending).toBeGreaterThanOrEqual(1);
      expect(stats.oldestPendingAgeMs).toBeGreaterThanOrEqual(60_000);
      await store.claim('dead-owner', 100, T0 + 61_000, LEASE);
      expect(await store.releaseOwner('dead-owner', T0 + 61_001)).toBeGreaterThanOrEqual(1);
      const back = (await store.claim('w', 100, T0 + 61_002, LEASE)).map((e) => e.spec.id);
      expect(back).toContain(a.id);
      await store.complete(a.id, 'w', T0 + 61_003);
      expect(await store.prune(T0 + 61_004)).toBeGreaterThanOrEqual(1);
      expect(await store.get(a.id)).toBeUndefined();
    });

    it('claims the oldest due first, at most `limit`, and leaves what is not due yet', async () => {
      const specs = [spec('u-batch-1'), spec('u-batch-2'), spec('u-batch-3')];
      const later = spec('u-batch-later');
      await store.append(specs, T0 + 100_000);
      await store.append([later], T0 + 100_500);
      // Whatever earlier tests left due is claimed first (it is older), then these, in order.
      const ours = new Set([...specs, later].map((s) => s.id));
      const seen: string[] = [];
      for (let i = 0; i < 50 && seen.length < 3; i++) {
        const batch = await store.claim('w-batch', 2, T0 + 100_000, LEASE);
        expect(batch.length).toBeLessThanOrEqual(2);
        if (batch.length === 0) break;
        seen.push(...batch.map((e) => e.spec.id).filter((id) => ours.has(id)));
      }
      expect(seen).toEqual(specs.map((s) => s.id));
      expect((await store.claim('w-batch', 10, T0 + 100_499, LEASE)).map((e) => e.spec.id)).not.toContain(
        later.id,
      );
      expect((await store.claim('w-batch', 10, T0 + 100_500, LEASE)).map((e) => e.spec.id)).toContain(
        later.id,
      );
    });

    it('lets only the lease holder give back, dead-letter or complete an entry', async () => {
      const a = spec('u-owner');
      await store.append([a], T0);
      await store.claim('holder', 100, T0, LEASE);
      await store.retryLater(a.id, 'stranger', T0 + 1, 'RG_ERR_UPSTREAM_TIMEOUT', true, T0);
      expect(await store.get(a.id)).toMatchObject({ status: 'pending', owner: 'holder', attempts: 1 });
      expect(await store.deadLetter(a.id, 'stranger', 'x', T0 + 1)).toBe(false);
      expect(await store.complete(a.id, 'stranger', T0 + 1)).toBe(false);
      expect(await store.releaseOwner('stranger', T0 + 1)).toBe(0);
      expect(await store.get(a.id)).toMatchObject({ status: 'pending', owner: 'holder' });
      expect(await store.complete(a.id, 'holder', T0 + 2)).toBe(true);
      // Final: nothing changes it any more but an operator.
      expect(await store.deadLetter(a.id, 'holder', 'x', T0 + 3)).toBe(false);
      expect(await store.retry(a.id, T0 + 3)).toBe(false);
      expect(await store.drop(a.id, 'x', T0 + 3)).toBe(false);
      expect(await store.get(a.id)).toMatchObject({ status: 'delivered', updatedAtMs: T0 + 2 });
    });

    it('names only unexpired leases among the owners', async () => {
      const a = spec('u-owners');
      await store.append([a], T0 + 200_000);
      await store.claim('short-lived', 100, T0 + 200_000, LEASE);
      expect(await store.leaseOwners(T0 + 200_000 + LEASE - 1)).toContain('short-lived');
      expect(await store.leaseOwners(T0 + 200_000 + LEASE)).not.toContain('short-lived');
    });

    it('lists ended entries unlogged until their lines are confirmed, the dropped ones too', async () => {
      const done = spec('u-lines');
      const dead = spec('u-lines-dead');
      const dropped = spec('u-lines-dropped');
      await store.append([done, dead, dropped], T0 + 300_000);
      await store.claim('w-lines', 100, T0 + 300_000, LEASE);
      await store.complete(done.id, 'w-lines', T0 + 300_001);
      await store.deadLetter(dead.id, 'w-lines', 'RG_ERR_UPSTREAM_NOT_FOUND', T0 + 300_002);
      await store.drop(dropped.id, 'dropped_by_operator', T0 + 300_003);
      const ids = [done.id, dead.id, dropped.id];
      const unlogged = (await store.unlogged(1000)).filter((e) => ids.includes(e.spec.id));
      expect(unlogged.map((e) => [e.spec.id, e.status])).toEqual([
        [done.id, 'delivered'],
        [dead.id, 'dead'],
        [dropped.id, 'dropped'],
      ]);
      expect(unlogged[0]!.owner).toBe('w-lines');
      await store.markLogged([done.id, dead.id]);
      expect((await store.unlogged(1000)).map((e) => e.spec.id).filter((id) => ids.includes(id))).toEqual([
        dropped.id,
      ]);
      await store.markLogged([dropped.id]);
      expect((await store.unlogged(1000)).map((e) => e.spec.id).filter((id) => ids.includes(id))).toEqual([]);
    });

    it('settles and claims in one step: the completions first (a stranger’s refused), the marks, then a claim that sees them', async () => {
      const [first, next, other, told] = [spec('u-step'), spec('u-step'), spec('u-step-2'), spec('u-step-3')];
      await store.append([first, next, other, told], T0 + 500_000);
      await store.claim('w-step', 100, T0 + 500_000, LEASE);
      await store.complete(told.id, 'w-step', T0 + 500_001);
      const settled = await store.settleAndClaim({
        owner: 'w-step',
        completed: [
          { id: first.id, nowMs: T0 + 500_002 },
          { id: 'not-mine', nowMs: T0 + 500_002 },
        ],
        logged: [told.id],
        limit: 100,
        nowMs: T0 + 500_003,
        leaseMs: LEASE,
      });
      expect(settled).toMatchObject({ completed: [true, false], logged: true, errors: [] });
      // The user's next entry, free once the first is delivered; the other user's is still leased.
      expect(settled.claimed.map((e) => e.spec.id)).toEqual([next.id]);
      expect(settled.claimed[0]).toMatchObject({ owner: 'w-step', attempts: 1 });
      expect(await store.get(first.id)).toMatchObject({ status: 'delivered', updatedAtMs: T0 + 500_002 });
      const unlogged = (await store.unlogged(1000)).map((e) => e.spec.id);
      expect(unlogged).toContain(first.id);
      expect(unlogged).not.toContain(told.id);
      // Nothing to claim (limit 0): the completion alone.
      const alone = await store.settleAndClaim({
        owner: 'w-step',
        completed: [{ id: other.id, nowMs: T0 + 500_004 }],
        logged: [],
        limit: 0,
        nowMs: T0 + 500_004,
        leaseMs: LEASE,
      });
      expect(alone).toEqual({ completed: [true], logged: true, claimed: [], errors: [] });
    });

    it('lists newest first, by status and up to the limit, and counts the dead', async () => {
      const before = await store.stats(T0);
      const first = spec('u-list');
      const second = spec('u-list-2');
      await store.append([first], T0 + 400_000);
      await store.append([second], T0 + 400_001);
      const newest = (await store.list({ limit: 2 })).map((e) => e.spec.id);
      expect(newest).toEqual([second.id, first.id]);
      expect(await store.list({ limit: 1 })).toHaveLength(1);
      await store.claim('w-list', 100, T0 + 400_002, LEASE);
      await store.deadLetter(second.id, 'w-list', 'RG_ERR_UPSTREAM_NOT_FOUND', T0 + 400_003);
      const dead = await store.list({ status: 'dead' });
      expect(dead.every((e) => e.status === 'dead')).toBe(true);
      expect(dead[0]?.spec).toEqual(second);
      expect((await store.list({ status: 'pending' })).map((e) => e.spec.id)).toContain(first.id);
      expect((await store.stats(T0)).dead).toBe(before.dead + 1);
      expect(await store.get('no-such-action')).toBeUndefined();
      expect(await store.retry('no-such-action', T0)).toBe(false);
      expect(await store.drop('no-such-action', 'x', T0)).toBe(false);
      await store.complete(first.id, 'w-list', T0 + 400_004);
    });

    it("makes an operator's retry due at once with a new horizon, and keeps dead entries when pruning", async () => {
      const a = spec('u-retry-order');
      await store.append([a], T0 + 500_000);
      await store.claim('w-retry', 100, T0 + 500_000, LEASE);
      await store.deadLetter(a.id, 'w-retry', 'RG_ERR_UPSTREAM_NOT_FOUND', T0 + 500_001);
      expect(await store.prune(T0 + 10 * 500_000)).toBeGreaterThanOrEqual(0);
      expect((await store.get(a.id))?.status).toBe('dead');
      expect(await store.retry(a.id, T0 + 500_002)).toBe(true);
      const retried = (await store.claim('w-retry', 100, T0 + 500_002, LEASE)).find(
        (e) => e.spec.id === a.id,
      );
      expect(retried).toMatchObject({ status: 'pending', horizonStartMs: T0 + 500_002 });
      await store.complete(a.id, 'w-retry', T0 + 500_003);
    });
  });
}

contract('memory', async () => new MemoryOutboxStore());

const databaseStore = openDatabaseOutbox;
const sqliteFile = (): DatabaseTarget => outboxSqliteFile('outbox-');

contract('database, SQLite', () => databaseStore(sqliteFile()));

describeOnPostgres('with PostgreSQL', (pg) => {
  contract('database, PostgreSQL', () => databaseStore({ kind: 'postgres', url: pg.url }));

  it('never leases one entry to two replicas claiming at the same time, and keeps each user in order', async () => {
    const [a, b] = [
      await databaseStore({ kind: 'postgres', url: pg.url }),
      await databaseStore({ kind: 'postgres', url: pg.url }),
    ];
    try {
      const specs = Array.from({ length: 200 }, (_, i) => spec(`race-${i % 20}`));
      await a.append(specs, T0 + 10_000_000);
      const now = T0 + 10_000_001;
      const claimed: string[] = [];
      // Both replicas claim in rounds, at the same time, completing what they got.
      for (let round = 0; round < 20; round++) {
        const [x, y] = await Promise.all([a.claim('ra', 7, now, LEASE), b.claim('rb', 7, now, LEASE)]);
        for (const e of x) expect(await a.complete(e.spec.id, 'ra', now)).toBe(true);
        for (const e of y) expect(await b.complete(e.spec.id, 'rb', now)).toBe(true);
        claimed.push(...x.map((e) => e.spec.id), ...y.map((e) => e.spec.id));
      }
      const ours = claimed.filter((id) => specs.some((s) => s.id === id));
      expect(new Set(ours).size).toBe(ours.length);
      expect(ours.length).toBe(specs.length);
      // Each user's actions were claimed in append order.
      for (let u = 0; u < 20; u++) {
        const theirs = specs.filter((s) => s.orderingKey === `race-${u}`).map((s) => s.id);
        expect(ours.filter((id) => theirs.includes(id))).toEqual(theirs);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('the memory store against the database store', () => {
  it('gives the same answers to the same random operations: claims, leases, order, ends, operator steps', async () => {
    const memory = new MemoryOutboxStore();
    const sqlite = await databaseStore(sqliteFile());
    try {
      let state = 42;
      const random = () => {
        state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
        return state / 2 ** 31;
      };
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
      const users = ['a', 'b', 'c', 'd'];
      const owners = ['w1', 'w2'];
      const ids: string[] = [];
      /** Leased by the claims so far, and by whom: most ends are of those, as the outbox's are. */
      const leased: [string, string][] = [];
      let now = T0;
      for (let step = 0; step < 600; step++) {
        now += Math.floor(random() * 3000);
        const [id, owner] =
          leased.length > 0 && random() < 0.7
            ? pick(leased)
            : [ids.length > 0 ? pick(ids) : 'none', pick(owners)];
        const op = pick([
          'append',
          'append',
          'claim',
          'claim',
          'complete',
          'retryLater',
          'dead',
          'drop',
          'retry',
          'release',
        ]);
        const both = async <T>(call: (s: OutboxStore) => Promise<T>): Promise<T> => {
          const [m, q] = [await call(memory), await call(sqlite)];
          expect(m, `step ${step}: ${op} ${id} ${owner}`).toEqual(q);
          return m;
        };
        switch (op) {
          case 'append': {
            const s = spec(pick(users));
            ids.push(s.id);
            await both((x) => x.append([s], now));
            break;
          }
          case 'claim':
            // Every due entry (no limit): the stores may order equally due entries differently.
            for (const claimed of await both(async (x) =>
              (await x.claim(owner, 1000, now, LEASE)).map((e) => e.spec.id).sort(),
            ))
              leased.push([claimed, owner]);
            break;
          case 'complete':
            await both((x) => x.complete(id, owner, now));
            break;
          case 'retryLater': {
            const counted = random() < 0.5;
            await both((x) => x.retryLater(id, owner, now + 2000, 'RG_ERR_UPSTREAM_TIMEOUT', counted, now));
            break;
          }
          case 'dead':
            await both((x) => x.deadLetter(id, owner, 'RG_ERR_UPSTREAM_NOT_FOUND', now));
            break;
          case 'drop':
            await both((x) => x.drop(id, 'dropped_by_operator', now));
            break;
          case 'retry':
            await both((x) => x.retry(id, now));
            break;
          case 'release':
            await both((x) => x.releaseOwner(owner, now));
            break;
        }
        await both((x) => x.get(id));
      }
      expect(await memory.stats(now)).toEqual(await sqlite.stats(now));
      for (const id of ids) expect(await memory.get(id)).toEqual(await sqlite.get(id));
    } finally {
      await memory.close();
      await sqlite.close();
    }
  });
});
