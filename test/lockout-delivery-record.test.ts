import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import type { ActionOutcome } from '../src/actions/action-dispatcher.ts';
import type { ActionAdmin, ActionSpec } from '../src/actions/admin-actions.ts';
import { type DatabaseTarget, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { LockoutRecorder } from '../src/lockouts/lockout-recorder.ts';
import { LockoutStore, lockoutView } from '../src/lockouts/lockout-store.ts';
import { lockoutMigrations } from '../src/lockouts/lockout-tables.ts';
import { DatabaseOutboxStore } from '../src/outbox/database-outbox-store.ts';
import { Outbox } from '../src/outbox/outbox.ts';
import { outboxMigrations } from '../src/outbox/outbox-tables.ts';
import { eventually } from './support/eventually.ts';
import { lockSpec, plannedLockout } from './support/lockout-fixtures.ts';
import { outboxSqliteFile } from './support/outbox-database.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { allowUpdate, refuseUpdate } from './support/refused-update.ts';

/**
 * Issue 32: a lock-out's `locked` is written in the transaction that completes its outbox entry
 * (the recorder's `delivery` companion), not in a transaction of its own after it. Whatever fails
 * between them, the record and the entry agree: `locked` exactly when the entry is `delivered`,
 * through a completion that fails and a restart that delivers the entry again. On the embedded
 * SQLite file and on a real PostgreSQL.
 */

const T0 = 1_800_000_000_000;
const LEASE = 10_000;

const planned = (id: string, userId: string, createdMs: number) => plannedLockout(id, userId, createdMs);

interface Opened {
  database: RiskgateDatabase;
  outboxStore: DatabaseOutboxStore;
  store: LockoutStore;
  recorder: LockoutRecorder;
}

async function open(target: DatabaseTarget): Promise<Opened> {
  const database = await openDatabase(target, { migrations: { ...lockoutMigrations, ...outboxMigrations } });
  const store = new LockoutStore(database);
  return {
    database,
    outboxStore: new DatabaseOutboxStore(database),
    store,
    recorder: new LockoutRecorder({
      store,
      events: { emit: async () => {}, wants: () => false },
      log: () => {},
      retryDelayMs: 10,
    }),
  };
}

async function close(o: Opened | undefined): Promise<void> {
  await o?.outboxStore.close();
  await o?.database.close();
}

/** The entry's status and its record's, read together. */
async function statusOf(o: Opened, spec: ActionSpec): Promise<{ entry?: string; record?: string }> {
  const entry = await o.outboxStore.get(spec.id);
  const record = await o.store.get(spec.decisionId);
  return { entry: entry?.status, record: record?.status };
}

/** `locked` exactly when the entry is delivered: the one thing a failure must never break. */
async function expectAgreeing(o: Opened, spec: ActionSpec): Promise<void> {
  const { entry, record } = await statusOf(o, spec);
  expect({ entry, record }).toEqual(
    entry === 'delivered' ? { entry, record: 'locked' } : { entry, record: 'queued' },
  );
}

/** A trigger refusing any lock-out record set `locked` (the write after the completion fails). */
const refuseLocked = (database: RiskgateDatabase) =>
  refuseUpdate(database, { name: 'refuse_locked', table: 'lockout', column: 'status', value: 'locked' });

const allowLocked = (database: RiskgateDatabase) => allowUpdate(database, 'refuse_locked', 'lockout');

/** A lease owner of this process, as the outbox names its own (a stopped one's lease is ended at the next start). */
const ownerName = (name: string) => `${hostname()}:${process.pid}:${name}`;

/** An Admin API that takes every call, counted. */
function countingAdmin(): { admin: ActionAdmin; calls: () => number } {
  let calls = 0;
  const admin = {
    updateUser: async () => {
      calls++;
      return { ok: true, value: {}, durationMs: 0 };
    },
  } as unknown as ActionAdmin;
  return { admin, calls: () => calls };
}

/** An outbox over `o` as riskgate wires it: the recorder's `delivery`, its outcomes to the recorder. */
function outboxOver(
  o: Opened,
  admin: ActionAdmin,
  owner: string,
): { outbox: Outbox; outcomes: Array<{ outcome: ActionOutcome; recorded: boolean }>; errors: unknown[] } {
  const outcomes: Array<{ outcome: ActionOutcome; recorded: boolean }> = [];
  const errors: unknown[] = [];
  const outbox = new Outbox({
    store: o.outboxStore,
    admin,
    owner,
    delivery: o.recorder.delivery,
    onOutcome: (outcome, recorded) => {
      outcomes.push({ outcome, recorded });
      o.recorder.outcome(outcome, recorded);
    },
    onError: (error) => errors.push(error),
    pollMs: 50,
  });
  return { outbox, outcomes, errors };
}

/**
 * The lock is delivered, and the write of its `locked` fails (the first completion's transaction
 * and its retry call by call). Then the process stops and another starts, the write possible again.
 */
async function agreesThroughAFailedCompletionAndARestart(target: DatabaseTarget, tag: string): Promise<void> {
  let o: Opened | undefined;
  let second: Outbox | undefined;
  try {
    o = await open(target);
    const spec = lockSpec(`d-${tag}`, `u-${tag}`);
    await o.outboxStore.append([spec], Date.now(), [
      o.recorder.companion([planned(spec.decisionId, spec.target, Date.now())]),
    ]);
    await refuseLocked(o.database);
    const admin = countingAdmin();
    const first = outboxOver(o, admin.admin, ownerName(`${tag}-first`));
    first.outbox.start();
    await eventually(() => admin.calls() === 1 && (first.errors.length > 0 || first.outcomes.length > 0), {
      what: 'the delivery, and its completion failed or told',
    });
    // Whatever came of it: never delivered and still queued, nor locked and not delivered.
    await expectAgreeing(o, spec);
    await o.recorder.flush(5000);
    await expectAgreeing(o, spec);
    expect((await statusOf(o, spec)).entry).toBe('pending');
    expect(first.outcomes).toEqual([]);
    await first.outbox.drain(0);

    // Restarted: the stopped outbox's lease is ended, the lock delivered again, and recorded with it.
    await allowLocked(o.database);
    const next = outboxOver(o, admin.admin, ownerName(`${tag}-second`));
    second = next.outbox;
    second.start();
    await eventually(() => next.outcomes.length === 1, { what: 'the lock delivered again' });
    expect(admin.calls()).toBe(2);
    expect(next.outcomes[0]).toMatchObject({ outcome: { key: spec.id, status: 'done' }, recorded: true });
    await expectAgreeing(o, spec);
    expect(await statusOf(o, spec)).toEqual({ entry: 'delivered', record: 'locked' });
    expect(lockoutView((await o.store.get(spec.decisionId))!)).toMatchObject({
      rule: 'short-lockout',
      accountId: `acct-u-${tag}`,
    });
  } finally {
    await second?.drain(0);
    if (o !== undefined) await allowLocked(o.database).catch(() => {});
    await close(o);
  }
}

/**
 * At the store: a completion whose lease was taken over (its entry not delivered by it) writes no
 * `locked`; one whose lock has no record (a former version's entry) makes the record, as the
 * outcome did; one of a record past `queued` leaves it.
 */
async function recordsOnlyWhatItDelivered(target: DatabaseTarget, tag: string): Promise<void> {
  let o: Opened | undefined;
  try {
    o = await open(target);
    const { outboxStore, recorder, store } = o;
    const taken = lockSpec(`d-${tag}-taken`, `u-${tag}-taken`);
    const bare = lockSpec(`d-${tag}-bare`, `u-${tag}-bare`);
    const unlocked = lockSpec(`d-${tag}-unlocked`, `u-${tag}-unlocked`);
    await outboxStore.append([taken, unlocked], T0, [
      recorder.companion([
        planned(taken.decisionId, taken.target, T0),
        planned(unlocked.decisionId, unlocked.target, T0),
      ]),
    ]);
    await outboxStore.append([bare], T0);
    const record = (spec: ActionSpec) => ({ spec, createdAtMs: T0, companion: recorder.delivery });
    expect((await outboxStore.claim('a', 10, T0, LEASE)).map((e) => e.spec.id).sort()).toEqual(
      [taken.id, bare.id, unlocked.id].sort(),
    );
    // `a`'s lease ran out and `b` took `taken` over: `a`'s late completion is refused, and records nothing.
    await outboxStore.retryLater(taken.id, 'a', T0, undefined, true, T0);
    expect(await outboxStore.claim('b', 1, T0 + 1, LEASE)).toHaveLength(1);
    expect(await outboxStore.complete(taken.id, 'a', T0 + 2, record(taken))).toBe(false);
    expect(await statusOf(o, taken)).toEqual({ entry: 'pending', record: 'queued' });
    // The same through a delivery turn (the SQLite file's one script).
    const turn = await outboxStore.settleAndClaim({
      owner: 'a',
      completed: [{ id: taken.id, nowMs: T0 + 3, record: record(taken) }],
      logged: [],
      limit: 0,
      nowMs: T0 + 3,
      leaseMs: LEASE,
    });
    expect(turn.completed).toEqual([false]);
    expect(await statusOf(o, taken)).toEqual({ entry: 'pending', record: 'queued' });
    expect(await outboxStore.complete(taken.id, 'b', T0 + 4, record(taken))).toBe(true);
    expect(await statusOf(o, taken)).toEqual({ entry: 'delivered', record: 'locked' });

    // No record (an entry from before the records were written with it): made from the lock.
    const row = (await store.get(unlocked.decisionId))!;
    expect(await store.beginUnlock(row, 'ana', 'called in', T0 + 5)).toBe(true);
    const settled = await outboxStore.settleAndClaim({
      owner: 'a',
      completed: [
        { id: bare.id, nowMs: T0 + 6, record: record(bare) },
        { id: unlocked.id, nowMs: T0 + 6, record: record(unlocked) },
      ],
      logged: [],
      limit: 1,
      nowMs: T0 + 6,
      leaseMs: LEASE,
    });
    expect(settled).toMatchObject({ completed: [true, true], errors: [] });
    expect(lockoutView((await store.get(bare.decisionId))!)).toMatchObject({
      userId: bare.target,
      rule: 'unknown',
      status: 'locked',
      createdAt: new Date(T0).toISOString(),
    });
    // An operator unlocked it before its lock was delivered: it stays unlocked.
    expect(lockoutView((await store.get(unlocked.decisionId))!)).toMatchObject({ status: 'unlocked' });
  } finally {
    await close(o);
  }
}

/** Both cases on the database `target` gives (called once the database is up). */
function onEngine(target: () => DatabaseTarget, tag: string): void {
  it('agrees with its entry through a completion that fails and a restart', async () => {
    await agreesThroughAFailedCompletionAndARestart(target(), tag);
  }, 30_000);

  it('is written only for what its completion delivered', async () => {
    await recordsOnlyWhatItDelivered(target(), tag);
  });
}

describe('a lock-out recorded with its delivery, on SQLite', () => {
  onEngine(() => outboxSqliteFile('rg-lock-delivery-'), 'sq');

  it('is written only for what its completion delivered, in a process-private database (no script)', async () => {
    await recordsOnlyWhatItDelivered({ kind: 'memory' }, 'mem');
  });
});

describeOnPostgres('a lock-out recorded with its delivery, on PostgreSQL', (pg) => {
  onEngine(() => ({ kind: 'postgres', url: pg.url }), 'pg');
});
