import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { Worker } from 'node:worker_threads';
import { Kysely, sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { type DatabaseTarget, type FeatureMigrations, openDatabase } from '../src/database/database.ts';
import { SqliteThreadDialect } from '../src/database/sqlite-thread-dialect.ts';

/**
 * The embedded SQLite file's queries run on a worker thread (src/database/sqlite-thread-dialect.ts):
 * the event loop goes on while one runs, a transaction has the connection to itself, and a thread
 * that dies or does not answer fails its queries instead of leaving them hanging.
 */

type NoteTables = { note: { id: string } };

const migrations: FeatureMigrations = {
  'test-001-note': {
    async up(db) {
      await db.schema
        .createTable('note')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .execute();
    },
  },
};

const dir = mkdtempSync(join(tmpdir(), 'riskgate-sqlite-thread-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const fileTarget = (): DatabaseTarget => ({ kind: 'sqlite', path: join(dir, `db-${files++}.sqlite`) });

/** A query that keeps SQLite busy for a while (counting to `n` in a recursive CTE). */
// biome-ignore lint/complexity/noBannedTypes: any schema.
const slowCount = (db: Kysely<{}>, n: number) =>
  sql<{
    n: number;
  }>`with recursive c(i) as (select 1 union all select i + 1 from c where i < ${n}) select count(*) as n from c`.execute(
    db,
  );

/** Whether `work` is still unsettled once a timer has fired (a turn of the event loop has run). */
async function pendingAfterATimer(work: Promise<unknown>): Promise<boolean> {
  let settled = false;
  work.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  await new Promise((resolve) => setTimeout(resolve, 0));
  return !settled;
}

describe('the embedded SQLite file off the event loop', () => {
  it('lets timers fire while a slow query runs, then answers it', async () => {
    const database = await openDatabase(fileTarget(), { migrations });
    try {
      // On the main thread (kysely's own SqliteDialect) the query runs to its end before any timer.
      const counting = slowCount(database.db, 3_000_000);
      expect(await pendingAfterATimer(counting)).toBe(true);
      expect(Number((await counting).rows[0]!.n)).toBe(3_000_000);
    } finally {
      await database.close();
    }
  });

  it('keeps a write made during another caller transaction out of that transaction', async () => {
    const database = await openDatabase(fileTarget(), { migrations });
    const db = database.db.withTables<NoteTables>();
    try {
      let outside: Promise<unknown> | undefined;
      await db
        .transaction()
        .execute(async (trx) => {
          await trx.insertInto('note').values({ id: 'in-transaction' }).execute();
          outside = db.insertInto('note').values({ id: 'outside' }).execute();
          // Turns of the loop in which a shared connection would have run the outside insert.
          for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
          throw new Error('roll back');
        })
        .catch(() => {});
      await outside;
      const rows = await db.selectFrom('note').select('id').execute();
      // Interleaved, the outside insert would have been rolled back with the transaction.
      expect(rows.map((r) => r.id)).toEqual(['outside']);
    } finally {
      await database.close();
    }
  });

  it('passes SQLite errors on with their message and code', async () => {
    const database = await openDatabase(fileTarget(), { migrations });
    const db = database.db.withTables<NoteTables>();
    try {
      await db.insertInto('note').values({ id: 'a' }).execute();
      const error = await db
        .insertInto('note')
        .values({ id: 'a' })
        .execute()
        .catch((e: unknown) => e);
      expect(error).toMatchObject({
        message: expect.stringContaining('UNIQUE constraint failed'),
        errcode: 1555,
      });
      // The connection is still usable after an error.
      expect(await db.selectFrom('note').select('id').execute()).toEqual([{ id: 'a' }]);
    } finally {
      await database.close();
    }
  });

  it('fails the query a dead thread was running, logs it, and runs the next on a new thread', async () => {
    const threads: Worker[] = [];
    const logged: Record<string, unknown>[] = [];
    // biome-ignore lint/complexity/noBannedTypes: any schema.
    const db = new Kysely<{}>({
      dialect: new SqliteThreadDialect({
        path: join(dir, 'dies.sqlite'),
        log: (line) => logged.push(line),
        onThreadStart: (w) => threads.push(w),
      }),
    });
    try {
      await sql`select 1`.execute(db);
      const counting = slowCount(db, 50_000_000);
      const queued = sql<{ v: number }>`select 2 as v`.execute(db);
      await threads[0]!.terminate();
      await expect(counting).rejects.toMatchObject({ code: 'RG_ERR_DATABASE_UNAVAILABLE' });
      // It waited for the connection, not on the dead thread: it runs on the next one.
      expect((await queued).rows).toEqual([{ v: 2 }]);
      expect(logged).toEqual([
        expect.objectContaining({ level: 'error', msg: expect.stringContaining('exited') }),
      ]);
      expect(threads).toHaveLength(2);
    } finally {
      await db.destroy();
    }
  });

  it('gives up on a write that waits on a lock longer than its timeout', async () => {
    const path = join(dir, 'locked.sqlite');
    // biome-ignore lint/complexity/noBannedTypes: any schema.
    const db = new Kysely<{}>({
      dialect: new SqliteThreadDialect({ path, timeoutMs: 1000, busyTimeoutMs: 60_000 }),
    });
    await sql`create table t (v integer)`.execute(db);
    // Another connection (as the decision store's writer thread is) holds the write lock.
    const other = new DatabaseSync(path);
    other.exec('begin immediate');
    try {
      await expect(sql`insert into t values (1)`.execute(db)).rejects.toMatchObject({
        code: 'RG_ERR_DATABASE_UNAVAILABLE',
        message: expect.stringContaining('query took longer'),
      });
    } finally {
      other.exec('rollback');
      other.close();
      await db.destroy();
    }
  });

  it('gives up waiting for the connection while a transaction holds it longer than the timeout', async () => {
    // biome-ignore lint/complexity/noBannedTypes: any schema.
    const db = new Kysely<{}>({
      dialect: new SqliteThreadDialect({ path: join(dir, 'held.sqlite'), timeoutMs: 1000 }),
    });
    let finish: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let begun: () => void = () => {};
    const inTransaction = new Promise<void>((resolve) => {
      begun = resolve;
    });
    try {
      const transaction = db.transaction().execute(async (trx) => {
        await sql`select 1`.execute(trx);
        begun();
        await held;
      });
      await inTransaction;
      await expect(sql`select 2`.execute(db)).rejects.toMatchObject({
        code: 'RG_ERR_DATABASE_UNAVAILABLE',
        message: expect.stringContaining('connection stayed busy'),
      });
      finish();
      await transaction;
      // The lock was handed on, not lost: the next query gets the connection.
      expect((await sql<{ v: number }>`select 3 as v`.execute(db)).rows).toEqual([{ v: 3 }]);
    } finally {
      finish();
      await db.destroy();
    }
  });
});
