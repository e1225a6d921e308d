import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Context } from 'hono';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { type DatabaseTarget, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { ErrorCode } from '../src/errors/riskgate-error.ts';
import { reviewOperations } from '../src/review-queue/review-operations.ts';
import { type NewReviewCase, ReviewStore } from '../src/review-queue/review-store.ts';
import { CONTROL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * The review queue's store (issue 34) on a SQLite file and on PostgreSQL: one case per decision;
 * claim-next hands concurrent analysts different cases and nothing once the queue is empty; a
 * disposition closes a case once; a release and a hand-over are conditional writes (one of two at
 * once wins); the queue's depth and age; a row riskgate did not write, or a
 * database that does not answer, is a clear error, never an empty queue.
 */

const T0 = Date.parse('2026-11-01T10:00:00.000Z');
const HOUR = 3_600_000;

function newCase(o: Partial<NewReviewCase> = {}): NewReviewCase {
  return {
    id: randomUUID(),
    decisionId: randomUUID(),
    reason: 'policy',
    detail: 'rules new-browser ask for review',
    verdict: 'challenge',
    userId: 'u1',
    openedMs: T0,
    openedBy: 'riskgate',
    dueMs: T0 + 24 * HOUR,
    ...o,
  };
}

async function errorOf(promise: Promise<unknown>): Promise<{ code?: string; message: string } | undefined> {
  try {
    await promise;
  } catch (error) {
    return error as { code?: string; message: string };
  }
  return undefined;
}

/** A request context of operator `name`, as the edge sets it (what the operations read of one). */
function asOperator(name: string): Context {
  const principal = {
    keyId: `key-${name}`,
    role: 'operator',
    operator: { name, role: 'analyst', keyId: `key-${name}` },
  };
  return { get: (k: string) => (k === 'principal' ? principal : undefined) } as unknown as Context;
}

async function behavesAsReviewQueue(database: RiskgateDatabase): Promise<void> {
  const store = new ReviewStore(database);
  expect(await store.claimNext('ana', T0)).toBeUndefined();
  expect(await store.stats(T0)).toEqual({ open: 0, claimed: 0, overdue: 0, oldestOpenMs: undefined });

  // One case per decision: opened again (by hand after its policy), it is the same case.
  const first = newCase({ dueMs: T0 + HOUR });
  expect((await store.open(first)).opened).toBe(true);
  const again = await store.open(newCase({ decisionId: first.decisionId, reason: 'manual' }));
  expect(again).toMatchObject({ opened: false, reviewCase: { id: first.id, reason: 'policy' } });

  const cases = [first];
  for (let i = 1; i < 8; i++) {
    const c = newCase({ openedMs: T0 + i, dueMs: T0 + 2 * HOUR + i });
    await store.open(c);
    cases.push(c);
  }
  // Eight analysts at once (PostgreSQL: eight connections of a pool of 4, queued): each gets a
  // case, none the same, the ones due first.
  const claims = await Promise.all(
    Array.from({ length: 8 }, (_, i) => store.claimNext(`analyst-${i}`, T0 + 10 * HOUR)),
  );
  const ids = claims.map((c) => c?.id);
  expect(ids.every((id) => id !== undefined)).toBe(true);
  expect(new Set(ids).size).toBe(8);
  expect(new Set(ids)).toEqual(new Set(cases.map((c) => c.id)));
  for (const [i, c] of claims.entries())
    expect(c).toMatchObject({ status: 'claimed', assignee: `analyst-${i}` });
  expect(await store.claimNext('late', T0 + 10 * HOUR)).toBeUndefined();

  const stats = await store.stats(T0 + 3 * HOUR);
  expect(stats).toEqual({ open: 0, claimed: 8, overdue: 8, oldestOpenMs: T0 });
  const mine = await store.list({ status: 'claimed', assignee: 'analyst-3', limit: 10 });
  expect(mine.map((c) => c.id)).toEqual([claims[3]!.id]);
  expect((await store.list({ overdueAtMs: T0 + 90 * 60_000, limit: 10 })).map((c) => c.id)).toEqual([
    first.id,
  ]);

  // A disposition closes once; notes are kept oldest first.
  expect(
    await store.addNote({
      id: randomUUID(),
      caseId: first.id,
      author: 'ana',
      atMs: T0 + 5,
      text: 'called the user',
    }),
  ).toBe(true);
  expect(
    await store.addNote({ id: randomUUID(), caseId: randomUUID(), author: 'ana', atMs: T0, text: 'x' }),
  ).toBe(false);
  const closed = await store.close(first.id, 'legit', 'ana', T0 + 6);
  expect(closed).toMatchObject({ status: 'closed', disposition: 'legit', closedBy: 'ana', closedMs: T0 + 6 });
  expect(await store.close(first.id, 'fraud', 'bob', T0 + 7)).toBeUndefined();
  const read = await store.get(first.id);
  expect(read?.reviewCase.disposition).toBe('legit');
  expect(read?.notes.map((n) => n.text)).toEqual(['called the user']);
  expect((await store.stats(T0 + 3 * HOUR)).claimed).toBe(7);

  // An open case closed without a claim is assigned to who closed it.
  const unclaimed = newCase();
  await store.open(unclaimed);
  expect(await store.close(unclaimed.id, 'unsure', 'bob', T0 + 8)).toMatchObject({
    assignee: 'bob',
    claimedMs: T0 + 8,
  });

  // Release and hand-over are conditional writes: a release and a hand-over of one claim at once,
  // one of them wins; a holder who is not the assignee, or a case claimed meanwhile, changes nothing.
  const held = claims[1]!;
  const [released, handed] = await Promise.all([
    store.release(held.id, 'analyst-1'),
    store.assign(held.id, 'analyst-1', 'zoe', T0 + 9),
  ]);
  expect([released, handed].filter((r) => r !== undefined)).toHaveLength(1);
  expect(await store.release(held.id, 'analyst-2')).toBeUndefined();
  if (released !== undefined) {
    expect(released).toMatchObject({ status: 'open', assignee: null, claimedMs: null });
    expect(await store.assign(held.id, 'analyst-1', 'zoe', T0 + 9)).toBeUndefined();
    // Open again, it is the next claim's.
    expect((await store.claimNext('analyst-1', T0 + 10))?.id).toBe(held.id);
  } else {
    expect(handed).toMatchObject({ status: 'claimed', assignee: 'zoe', claimedMs: T0 + 9 });
    expect(await store.assign(held.id, null, 'analyst-1', T0 + 10)).toBeUndefined();
    expect(await store.assign(held.id, 'zoe', 'analyst-1', T0 + 10)).toMatchObject({ assignee: 'analyst-1' });
  }
  expect(await store.release(closed!.id, 'ana')).toBeUndefined();
  expect(await store.assign(closed!.id, 'ana', 'zoe', T0 + 11)).toBeUndefined();

  // A row riskgate did not write: a clear error naming the column, never a case read as another.
  const bad = newCase();
  await store.open(bad);
  await sql`update review_case set status = ${'maybe'} where id = ${bad.id}`.execute(database.db);
  const refused = await errorOf(store.list({ limit: 100 }));
  expect(refused?.code).toBe(ErrorCode.DATABASE_UNAVAILABLE);
  expect(refused?.message).toMatch(/review queue holds a row riskgate cannot read \(status "maybe"\)/);
  const viaOperations = reviewOperations({
    store,
    slaMs: HOUR,
    label: async () => {},
    decision: async () => undefined,
  });
  expect((await errorOf(viaOperations.list(asOperator('ana'), 'open', 10)))?.code).toBe(
    ErrorCode.DATABASE_UNAVAILABLE,
  );
  await sql`delete from review_case where id = ${bad.id}`.execute(database.db);
  expect((await viaOperations.list(asOperator('analyst-3'), 'mine', 10)).items).toHaveLength(1);
}

/** The queue's store once its database stopped answering: a 503 problem, never an empty queue. */
async function unreadableIsAnError(database: RiskgateDatabase): Promise<void> {
  const store = new ReviewStore(database);
  await store.open(newCase());
  const operations = reviewOperations({
    store,
    slaMs: HOUR,
    label: async () => {},
    decision: async () => undefined,
  });
  expect((await operations.list(asOperator('ana'), 'open', 10)).items).toHaveLength(1);
  await database.close();
  const error = await errorOf(operations.list(asOperator('ana'), 'open', 10));
  expect(error?.code).toBe(ErrorCode.DATABASE_UNAVAILABLE);
  expect(error?.message).toMatch(/The review queue database did not answer/);
  expect((await errorOf(operations.get(randomUUID())))?.code).toBe(ErrorCode.DATABASE_UNAVAILABLE);
}

describe('the review queue on SQLite', () => {
  const dir = tempDirForBlock('rg-review-');

  it('claims distinct cases for concurrent analysts, closes each once, and refuses a bad row (SQLite file)', async () => {
    const target: DatabaseTarget = { kind: 'sqlite', path: join(dir, 'control.sqlite') };
    const database = await openDatabase(target, { migrations: CONTROL_MIGRATIONS });
    try {
      await behavesAsReviewQueue(database);
    } finally {
      await database.close();
    }
    // Reopened: the cases are still there (the system of record).
    const reopened = await openDatabase(target, { migrations: CONTROL_MIGRATIONS });
    try {
      expect((await new ReviewStore(reopened).stats(T0)).claimed).toBe(7);
    } finally {
      await reopened.close();
    }
  });

  it('says the queue is unavailable, not empty, once its database is closed (SQLite file)', async () => {
    const database = await openDatabase(
      { kind: 'sqlite', path: join(dir, 'closed.sqlite') },
      { migrations: CONTROL_MIGRATIONS },
    );
    await unreadableIsAnError(database);
  });

  it('refuses to open a corrupt control file rather than serve an empty queue (SQLite file)', async () => {
    const path = join(dir, 'corrupt.sqlite');
    writeFileSync(path, Buffer.alloc(8192, 0x5a));
    const error = await errorOf(openDatabase({ kind: 'sqlite', path }, { migrations: CONTROL_MIGRATIONS }));
    expect(error).toBeDefined();
  });
});

describeOnPostgres('the review queue on PostgreSQL', (pg) => {
  it('claims distinct cases for concurrent analysts (FOR UPDATE SKIP LOCKED), closes each once, and refuses a bad row (PostgreSQL)', async () => {
    const database = await openDatabase(
      { kind: 'postgres', url: pg.url },
      { migrations: CONTROL_MIGRATIONS },
    );
    try {
      await behavesAsReviewQueue(database);
    } finally {
      await database.close();
    }
  });

  it('says the queue is unavailable, not empty, once its database is closed (PostgreSQL)', async () => {
    const database = await openDatabase(
      { kind: 'postgres', url: pg.url },
      { migrations: CONTROL_MIGRATIONS },
    );
    await sql`delete from review_case`.execute(database.db);
    await sql`delete from review_note`.execute(database.db);
    await unreadableIsAnError(database);
  });
});
