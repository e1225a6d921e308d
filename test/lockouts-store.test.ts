import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ActionOutcome } from '../src/actions/action-dispatcher.ts';
import { type ActionSpec, actionId } from '../src/actions/admin-actions.ts';
import { type DatabaseTarget, openDatabase } from '../src/database/database.ts';
import { stateFiles } from '../src/database/state-files.ts';
import { emitCommitted } from '../src/events/emit-committed.ts';
import type { RiskgateEvent } from '../src/events/riskgate-event.ts';
import { LockoutRecorder, lockoutEvent } from '../src/lockouts/lockout-recorder.ts';
import { LockoutStore, lockoutView } from '../src/lockouts/lockout-store.ts';
import { lockoutMigrations } from '../src/lockouts/lockout-tables.ts';
import { unlockGate } from '../src/lockouts/unlock-gate.ts';
import { DatabaseOutboxStore } from '../src/outbox/database-outbox-store.ts';
import { outboxMigrations } from '../src/outbox/outbox-tables.ts';
import { lockSpec, plannedLockout } from './support/lockout-fixtures.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * The lock-out records' store and the gate of the unlock that ends a temporary lock-out (issue 26),
 * the same on SQLite and on PostgreSQL: whichever of a decision's record and its lock's outcome is
 * written first (two replicas, a full recorder queue, a crash after the answer), a temporary
 * lock-out ends on time; one that escalation made permanent does not.
 */

const T0 = Date.parse('2026-05-01T10:00:00.000Z');
const TEN_MINUTES_MS = 600_000;
const DAY_MS = 86_400_000;
// The lock's outbox entry was pruned: the gate goes by the records.
const outbox = { get: async () => undefined };

const planned = plannedLockout;

const lockDone = (id: string, userId: string): ActionOutcome => ({
  key: actionId(id, 'lock_out_user', userId),
  decisionId: id,
  type: 'lock_out_user',
  target: userId,
  status: 'done',
  attempts: 1,
  elapsedMs: 40,
});

const scheduledUnlock = (id: string, userId: string, lockedAtMs: number, escalateWithinMs?: number) =>
  ({
    id: actionId(id, 'unlock_user', userId),
    decisionId: id,
    type: 'unlock_user',
    target: userId,
    orderingKey: `${userId}:scheduled-unlock`,
    call: { method: 'updateUser', userId, update: { status: 'enabled' } },
    notBeforeMs: lockedAtMs + TEN_MINUTES_MS,
    scheduledUnlock: { lockedAtMs, ...(escalateWithinMs !== undefined && { escalateWithinMs }) },
  }) satisfies ActionSpec;

async function withStore(
  target: DatabaseTarget,
  work: (store: LockoutStore) => Promise<void>,
): Promise<void> {
  const database = await openDatabase(target, { migrations: lockoutMigrations });
  try {
    await work(new LockoutStore(database));
  } finally {
    await database.close();
  }
}

async function endsATemporaryLockoutWhicheverIsWrittenFirst(target: DatabaseTarget): Promise<void> {
  await withStore(target, async (store) => {
    const gate = unlockGate(store, { clock: { nowMs: () => T0 + TEN_MINUTES_MS } });
    const end = new Date(T0 + TEN_MINUTES_MS).toISOString();
    // The outcome first: the record, arriving late, fills in what the outcome did not know.
    await store.applyOutcome(lockDone('d-late', 'u-late'), T0 + 50);
    await store.add(planned('d-late', 'u-late', T0), T0 + 60);
    // The record first (the usual order).
    await store.add(planned('d-usual', 'u-usual', T0), T0 + 10);
    await store.applyOutcome(lockDone('d-usual', 'u-usual'), T0 + 50);
    for (const [id, userId] of [
      ['d-late', 'u-late'],
      ['d-usual', 'u-usual'],
    ] as const) {
      expect(lockoutView((await store.get(id))!)).toMatchObject({
        userId,
        accountId: `acct-${userId}`,
        rule: 'short-lockout',
        createdAt: new Date(T0).toISOString(),
        status: 'locked',
        until: end,
        escalated: false,
      });
      expect(await gate(scheduledUnlock(id, userId, T0), outbox)).toEqual({ run: true });
    }
    // A repeat of a known record changes nothing.
    await store.add(planned('d-usual', 'u-usual', T0 + 5, { rule: 'other', durationMs: 1 }), T0 + 70);
    expect((await store.get('d-usual'))?.rule).toBe('short-lockout');

    // Its record never written (a crash after the answer): the schedule proves it was temporary.
    await store.applyOutcome(lockDone('d-lost', 'u-lost'), T0 + 50);
    expect(lockoutView((await store.get('d-lost'))!)).toMatchObject({ rule: 'unknown', status: 'locked' });
    expect(await gate(scheduledUnlock('d-lost', 'u-lost', T0), outbox)).toEqual({ run: true });

    // The unlock done: the lock-out expired (its time read back as a number on either engine).
    await store.applyOutcome(
      {
        ...lockDone('d-late', 'u-late'),
        key: actionId('d-late', 'unlock_user', 'u-late'),
        type: 'unlock_user',
      },
      T0 + TEN_MINUTES_MS,
    );
    expect(lockoutView((await store.get('d-late'))!)).toMatchObject({
      status: 'expired',
      endedBy: 'schedule',
    });
  });
}

async function keepsAnEscalatedLockout(target: DatabaseTarget): Promise<void> {
  await withStore(target, async (store) => {
    const gate = unlockGate(store, { clock: { nowMs: () => T0 + DAY_MS } });
    // The user's first lock-out, then a second within the window, its record after its outcome.
    await store.add(planned('d-1', 'u-esc', T0 - DAY_MS / 2), T0 - DAY_MS / 2);
    await store.applyOutcome(lockDone('d-1', 'u-esc'), T0 - DAY_MS / 2 + 50);
    await store.applyOutcome(lockDone('d-2', 'u-esc'), T0 + 50);
    await store.add(planned('d-2', 'u-esc', T0, { escalateWithinMs: DAY_MS }), T0 + 60);
    const row = (await store.get('d-2'))!;
    expect(row.escalated).toBe(1);
    expect(lockoutView(row)).toMatchObject({ rule: 'short-lockout', status: 'locked', escalated: true });
    expect(lockoutView(row).until).toBeUndefined();
    expect(await gate(scheduledUnlock('d-2', 'u-esc', T0, DAY_MS), outbox)).toEqual({
      skip: 'lockout_made_permanent',
    });
  });
}

async function recordsOneOfTwoRacingUnlocks(target: DatabaseTarget): Promise<void> {
  await withStore(target, async (store) => {
    await store.add(planned('d-race', 'u-race', T0, { durationMs: undefined }), T0);
    await store.applyOutcome(lockDone('d-race', 'u-race'), T0 + 50);
    const row = (await store.get('d-race'))!;
    // Two admins (or replicas) read it locked and unlock it at once: one unlock is recorded.
    const won = await Promise.all([
      store.beginUnlock(row, 'ana', 'help desk vouched', T0 + 1000),
      store.beginUnlock(row, 'adam', 'called in', T0 + 1001),
    ]);
    expect(won.toSorted()).toEqual([false, true]);
    const winner = won[0] ? 'ana' : 'adam';
    expect(lockoutView((await store.get('d-race'))!)).toMatchObject({
      status: 'unlocked',
      endedBy: winner,
      reason: winner === 'ana' ? 'help desk vouched' : 'called in',
      unlockStatus: 'queued',
    });
  });
}

/**
 * A decision's records written with its outbox append (the recorder's companion): as statements
 * sent with the entries when none must read first (on the SQLite file, one script), through
 * `write` when one escalates; either way the records `add` writes.
 */
async function writesTheRecordsWithTheirAppend(target: DatabaseTarget): Promise<void> {
  const database = await openDatabase(target, { migrations: { ...lockoutMigrations, ...outboxMigrations } });
  const outboxStore = new DatabaseOutboxStore(database);
  const store = new LockoutStore(database);
  const recorder = new LockoutRecorder({
    store,
    events: { emit: async () => {}, wants: () => false },
    log: () => {},
  });
  try {
    await store.add(planned('d-w0', 'u-w', T0 - 1000), T0 - 1000);
    await store.applyOutcome(lockDone('d-w0', 'u-w'), T0 - 900);
    const plain = [planned('d-w1', 'u-w1', T0), planned('d-w2', 'u-w2', T0, { durationMs: undefined })];
    const escalating = [planned('d-w3', 'u-w', T0, { escalateWithinMs: DAY_MS })];
    expect(recorder.companion(plain).statements?.(database.db, T0)).toHaveLength(2);
    expect(recorder.companion(escalating).statements?.(database.db, T0)).toBeUndefined();
    // One group each: a group with a companion that must read first goes through `write` whole.
    await outboxStore.append([lockSpec('d-w1', 'u-w1'), lockSpec('d-w2', 'u-w2')], T0 + 1, [
      recorder.companion(plain),
    ]);
    await outboxStore.append([lockSpec('d-w3', 'u-w')], T0 + 1, [recorder.companion(escalating)]);
    const view = async (id: string) => lockoutView((await store.get(id))!);
    expect(await view('d-w1')).toMatchObject({
      userId: 'u-w1',
      accountId: 'acct-u-w1',
      rule: 'short-lockout',
      status: 'queued',
      until: new Date(T0 + TEN_MINUTES_MS).toISOString(),
      escalated: false,
    });
    expect((await view('d-w2')).until).toBeUndefined();
    expect(await view('d-w3')).toMatchObject({ status: 'queued', escalated: true });
    expect((await view('d-w3')).until).toBeUndefined();
    expect((await outboxStore.get(lockSpec('d-w1', 'u-w1').id))?.status).toBe('pending');
  } finally {
    await outboxStore.close();
    await database.close();
  }
}

/**
 * The lock outcomes told in one turn (a turn's completions) set their records together, and one
 * whose record is not there yet (or is past `queued`) is applied alone, as it always was.
 */
async function appliesATurnsLockOutcomes(target: DatabaseTarget): Promise<void> {
  await withStore(target, async (store) => {
    const recorder = new LockoutRecorder({
      store,
      events: { emit: async () => {}, wants: () => false },
      log: () => {},
    });
    await store.add(planned('d-t1', 'u-t1', T0), T0);
    await store.add(planned('d-t2', 'u-t2', T0), T0);
    await store.add(planned('d-t4', 'u-t4', T0, { status: 'withheld' }), T0);
    for (const id of ['d-t1', 'd-t2', 'd-t3', 'd-t4']) recorder.outcome(lockDone(id, `u-${id.slice(2)}`));
    await recorder.flush(10_000);
    expect(recorder.dropped).toBe(0);
    for (const id of ['d-t1', 'd-t2'])
      expect(lockoutView((await store.get(id))!)).toMatchObject({ status: 'locked' });
    // No record yet: made from the outcome, as one outcome alone makes it.
    expect(lockoutView((await store.get('d-t3'))!)).toMatchObject({ rule: 'unknown', status: 'locked' });
    // Not queued (withheld): the outcome leaves it as it is, as one outcome alone does.
    expect(lockoutView((await store.get('d-t4'))!)).toMatchObject({ status: 'withheld' });
  });
}

const dir = tempDirForBlock('riskgate-lockouts-');

describe('a committed unlock’s event', () => {
  it('is emitted again after a failed emit, with the same id, and reported lost after its tries', async () => {
    const seen: RiskgateEvent[] = [];
    let failuresLeft = 2;
    const flaky = {
      emit: async (e: RiskgateEvent) => {
        seen.push(e);
        if (failuresLeft-- > 0) throw new Error('outbox refused');
      },
      wants: () => true,
    };
    const event = lockoutEvent('lockout.ended', 'd-1', 'u-1', undefined, 'ana');
    expect(await emitCommitted(flaky, event, { initialMs: 1 })).toBe(true);
    expect(seen.map((e) => e.id)).toEqual(['lockout.ended:d-1', 'lockout.ended:d-1', 'lockout.ended:d-1']);
    failuresLeft = 10;
    seen.length = 0;
    expect(await emitCommitted(flaky, event, { initialMs: 1, tries: 3 })).toBe(false);
    expect(seen).toHaveLength(3);
  });
});

describe('the lock-out records', () => {
  it('end a temporary lock-out on time whichever of its record and its outcome comes first, on SQLite', async () => {
    await endsATemporaryLockoutWhicheverIsWrittenFirst({
      kind: 'sqlite',
      path: stateFiles(join(dir, 'a')).control,
    });
  });

  it('keep an escalated lock-out whose record came after its outcome, on SQLite', async () => {
    await keepsAnEscalatedLockout({ kind: 'sqlite', path: stateFiles(join(dir, 'b')).control });
  });

  it('record one of two unlocks racing for the same lock-out, on SQLite', async () => {
    await recordsOneOfTwoRacingUnlocks({ kind: 'sqlite', path: stateFiles(join(dir, 'c')).control });
  });

  it('take the lock outcomes of a turn together, on SQLite', async () => {
    await appliesATurnsLockOutcomes({ kind: 'sqlite', path: stateFiles(join(dir, 'e')).control });
  });

  it('are written with their outbox append, as statements or read first when escalating, on SQLite', async () => {
    await writesTheRecordsWithTheirAppend({ kind: 'sqlite', path: stateFiles(join(dir, 'd')).control });
  });

  describeOnPostgres('on PostgreSQL', (pg) => {
    it('end a temporary lock-out on time whichever of its record and its outcome comes first', async () => {
      await endsATemporaryLockoutWhicheverIsWrittenFirst({ kind: 'postgres', url: pg.url });
    });

    it('keep an escalated lock-out whose record came after its outcome', async () => {
      await keepsAnEscalatedLockout({ kind: 'postgres', url: pg.url });
    });

    it('record one of two unlocks racing for the same lock-out', async () => {
      await recordsOneOfTwoRacingUnlocks({ kind: 'postgres', url: pg.url });
    });

    it('take the lock outcomes of a turn together', async () => {
      await appliesATurnsLockOutcomes({ kind: 'postgres', url: pg.url });
    });

    it('are written with their outbox append, as statements or read first when escalating', async () => {
      await writesTheRecordsWithTheirAppend({ kind: 'postgres', url: pg.url });
    });
  });
});
