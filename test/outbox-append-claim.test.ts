import { describe, expect, it } from 'vitest';
import type { ActionOutcome } from '../src/actions/action-dispatcher.ts';
import type { ActionAdmin, ActionJob, ActionSpec } from '../src/actions/admin-actions.ts';
import { type DatabaseTarget, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { DatabaseOutboxStore } from '../src/outbox/database-outbox-store.ts';
import { Outbox } from '../src/outbox/outbox.ts';
import type { AppendClaim, OutboxEntry } from '../src/outbox/outbox-store.ts';
import { outboxMigrations } from '../src/outbox/outbox-tables.ts';
import { eventually } from './support/eventually.ts';
import { lockOutSpec, outboxSqliteFile } from './support/outbox-database.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { refuseUpdate } from './support/refused-update.ts';
import { postedDuring } from './support/thread-messages.ts';

/**
 * The claim an append makes in its own transaction (issue 32: the messages to the control
 * database's SQLite thread per deny): the process that queued a lock-out leases it as it writes
 * it, and the entry is then like any claimed one: counted, leased, taken over when its holder dies.
 */

let n = 0;
function spec(user: string): ActionSpec {
  n++;
  return lockOutSpec(n, user);
}

function jobOf(s: ActionSpec): ActionJob {
  return { key: s.id, decisionId: s.decisionId, type: s.type, target: s.target, spec: s };
}

const T0 = 1_800_000_000_000;
const LEASE = 10_000;

async function open(
  target: DatabaseTarget,
): Promise<{ store: DatabaseOutboxStore; database: RiskgateDatabase }> {
  const database = await openDatabase(target, { migrations: outboxMigrations });
  return { store: new DatabaseOutboxStore(database, { ownsDatabase: true }), database };
}

/** An `AppendClaim` asking for `limit` entries for `owner` at `nowMs`, noting what it is told. */
function claimFor(owner: string, nowMs = T0, limit = 10) {
  const told: { taken: number; landed: OutboxEntry[][]; failed: unknown[] } = {
    taken: 0,
    landed: [],
    failed: [],
  };
  const claim: AppendClaim = {
    take: () => {
      told.taken++;
      return { owner, limit, nowMs, leaseMs: LEASE };
    },
    landed: (claimed) => told.landed.push(claimed),
    failed: (error) => told.failed.push(error),
  };
  return { claim, told };
}

describe('a claim in the append’s transaction, on the SQLite file', () => {
  it('takes a lock-out from its answer to its completion in two messages to the database thread', async () => {
    const { store } = await open(outboxSqliteFile('outbox-append-claim-'));
    const outcomes: ActionOutcome[] = [];
    const admin = {
      updateUser: async () => ({ ok: true, value: {}, durationMs: 0 }),
    } as unknown as ActionAdmin;
    // No poll interval within the test: every message below is one a lock-out's delivery sends.
    const outbox = new Outbox({ store, admin, onOutcome: (o) => outcomes.push(o), pollMs: 600_000 });
    try {
      outbox.start();
      expect(await outbox.submit([jobOf(spec('warm'))])).toEqual(['queued']);
      await eventually(() => outcomes.length === 1, { what: 'the first lock-out done' });
      const users = ['c1', 'c2', 'c3', 'c4'];
      const { sent } = await postedDuring(async () => {
        for (const [i, user] of users.entries()) {
          expect(await outbox.submit([jobOf(spec(user))])).toEqual(['queued']);
          await eventually(() => outcomes.length === i + 2, { what: `${user}'s lock-out done` });
        }
      });
      expect(outcomes.map((o) => o.status)).toEqual(['done', 'done', 'done', 'done', 'done']);
      // The housekeeping reads (counts, untold lines, pruning) come once per poll interval, not per
      // lock-out: left out. What is left is the delivery: per lock-out its append with the claim that
      // leases it, then its completion with the next claim (and the lines told before it marked).
      // Before: the append, a claim of its own 10 ms later, the completion (3 each).
      const requests = sent.filter(
        (m) =>
          !(
            /^\s*(select|delete)\b/i.test((m as { sql?: string }).sql ?? '') &&
            (m as { type?: string }).type === 'query'
          ),
      );
      expect(requests).toHaveLength(2 * users.length);
    } finally {
      await outbox.drain(100);
      await store.close();
    }
  });

  it('leases what is due to the append’s claim; a holder that dies leaves it to be taken over when the lease runs out', async () => {
    const { store } = await open(outboxSqliteFile('outbox-append-lease-'));
    try {
      const [first, next] = [spec('ud'), spec('ud')];
      const { claim, told } = claimFor('w-dies');
      expect(await store.append([first, next], T0, [], claim)).toEqual([true, true]);
      // One user's actions in order: the first leased, the next waits behind it.
      expect(told.landed.map((c) => c.map((e) => e.spec.id))).toEqual([[first.id]]);
      expect(await store.get(first.id)).toMatchObject({ owner: 'w-dies', attempts: 1, status: 'pending' });
      // Its holder dies: nobody takes it over before the lease runs out, anybody after.
      expect(await store.claim('w-next', 10, T0 + LEASE - 1, LEASE)).toEqual([]);
      const taken = await store.claim('w-next', 10, T0 + LEASE, LEASE);
      expect(taken.map((e) => [e.spec.id, e.attempts])).toEqual([[first.id, 2]]);
    } finally {
      await store.close();
    }
  });

  it('writes the append without its claim when the claim fails in the transaction, and says so', async () => {
    const { store, database } = await open(outboxSqliteFile('outbox-append-claim-fails-'));
    try {
      await refuseUpdate(database, {
        name: 'refuse_leases',
        table: 'outbox_entry',
        column: 'lease_owner',
        value: 'w-refused',
      });
      const s = spec('ur');
      const { claim, told } = claimFor('w-refused');
      expect(await store.append([s], T0, [], claim)).toEqual([true]);
      expect(told.landed).toEqual([]);
      expect(told.failed).toEqual([
        expect.objectContaining({ message: expect.stringMatching(/refuse_leases/) }),
      ]);
      expect(await store.get(s.id)).toMatchObject({ status: 'pending', attempts: 0, owner: undefined });
      expect((await store.claim('w-other', 10, T0, LEASE)).map((e) => e.spec.id)).toEqual([s.id]);
    } finally {
      await store.close();
    }
  });

  it('tells every append of the group that a claim ran after its rows, and only the taker what it leased', async () => {
    const { store } = await open(outboxSqliteFile('outbox-append-group-'));
    try {
      const [a, b] = [spec('ga'), spec('gb')];
      const [first, second] = [claimFor('w-group'), claimFor('w-group')];
      expect(
        await Promise.all([store.append([a], T0, [], first.claim), store.append([b], T0, [], second.claim)]),
      ).toEqual([[true], [true]]);
      expect([first.told.taken, second.told.taken]).toEqual([1, 0]);
      expect(first.told.landed.map((c) => c.map((e) => e.spec.id).sort())).toEqual([[a.id, b.id].sort()]);
      expect(second.told.landed).toEqual([[]]);
    } finally {
      await store.close();
    }
  });
});

describeOnPostgres('on PostgreSQL', (pg) => {
  it('makes no claim at append: the entry waits for a poll’s claim, as before', async () => {
    const { store } = await open({ kind: 'postgres', url: pg.url });
    try {
      const s = spec('upg');
      const { claim, told } = claimFor('w-pg');
      expect(await store.append([s], T0, [], claim)).toEqual([true]);
      expect(told).toEqual({ taken: 0, landed: [], failed: [] });
      expect(await store.get(s.id)).toMatchObject({ status: 'pending', attempts: 0, owner: undefined });
    } finally {
      await store.close();
    }
  });
});
