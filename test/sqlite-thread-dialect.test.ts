import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { Worker } from 'node:worker_threads';
import { Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { type DatabaseTarget, type FeatureMigrations, openDatabase } from '../src/database/database.ts';
import { runScript, SqliteThreadDialect } from '../src/database/sqlite-thread-dialect.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

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

const dir = tempDirForBlock('riskgate-sqlite-thread-');
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

/** What each request posted to the thread runs: its statement, after `begin` when it carries one. */
function whatRan(message: unknown): string {
  const m = message as { type: string; sql?: string; begin?: true; statements?: Array<{ sql: string }> };
  if (m.type === 'script') return `script: ${m.statements!.map((q) => q.sql).join('; ')}`;
  return m.begin === true ? `begin; ${m.sql}` : (m.sql ?? m.type);
}

/** A database on its thread whose every request is kept in `sent` (what it ran: `whatRan`). */
function countedDatabase(name: string) {
  const sent: string[] = [];
  // biome-ignore lint/complexity/noBannedTypes: any schema.
  const db = new Kysely<{}>({
    dialect: new SqliteThreadDialect({
      path: join(dir, name),
      onThreadStart: (w) => {
        const post = w.postMessage.bind(w);
        w.postMessage = ((message: unknown) => {
          sent.push(whatRan(message));
          post(message);
        }) as Worker['postMessage'];
      },
    }),
  });
  return { db, sent };
}

describe('the SQLite thread’s round trips (issue 32)', () => {
  it('serves a statement prepared once from its text, and fails it as a fresh prepare would once its table is gone', async () => {
    const { db } = countedDatabase('cached.sqlite');
    try {
      await sql`create table t (a integer)`.execute(db);
      await sql`insert into t values (1)`.execute(db);
      const read = () => sql`select * from t`.execute(db);
      expect((await read()).rows).toEqual([{ a: 1 }]);
      expect((await read()).rows).toEqual([{ a: 1 }]);
      await sql`drop table t`.execute(db);
      await expect(read()).rejects.toMatchObject({ message: expect.stringContaining('no such table: t') });
      // The same text over a new table of other columns reads the new one.
      await sql`create table t (b text, c integer)`.execute(db);
      await sql`insert into t values ('x', 2)`.execute(db);
      expect((await read()).rows).toEqual([{ b: 'x', c: 2 }]);
      await sql`alter table t add column d integer default 7`.execute(db);
      expect((await read()).rows).toEqual([{ b: 'x', c: 2, d: 7 }]);
    } finally {
      await db.destroy();
    }
  });

  it('sends a transaction’s begin with its first statement, and nothing for a transaction that ran none', async () => {
    const { db, sent } = countedDatabase('begin.sqlite');
    try {
      await sql`create table t (id integer primary key)`.execute(db);
      sent.length = 0;
      await db.transaction().execute(async (trx) => {
        await sql`insert into t values (1)`.execute(trx);
        await sql`insert into t values (2)`.execute(trx);
      });
      await db.transaction().execute(async () => {});
      expect(sent).toEqual(['begin; insert into t values (1)', 'insert into t values (2)', 'commit']);
      // A failing statement still rolls back what the transaction did before it.
      await expect(
        db.transaction().execute(async (trx) => {
          await sql`insert into t values (3)`.execute(trx);
          await sql`insert into t values (1)`.execute(trx);
        }),
      ).rejects.toMatchObject({ message: expect.stringContaining('UNIQUE constraint failed') });
      expect((await sql<{ id: number }>`select id from t order by id`.execute(db)).rows).toEqual([
        { id: 1 },
        { id: 2 },
      ]);
    } finally {
      await db.destroy();
    }
  });

  it('runs a script as one transaction in one message, and rolls all of it back when a statement in its middle fails', async () => {
    const { db, sent } = countedDatabase('script.sqlite');
    try {
      await sql`create table s (id text primary key)`.execute(db);
      await sql`insert into s values ('kept')`.execute(db);
      sent.length = 0;
      const results = await runScript(db, [
        sql`insert into s values (${'a'}) returning id`.compile(db),
        sql`insert into s values (${'b'})`.compile(db),
      ]);
      expect(results.map((r) => [r.rows, r.numAffectedRows])).toEqual([
        [[{ id: 'a' }], undefined],
        [[], 1n],
      ]);
      const error = await runScript(db, [
        sql`insert into s values (${'c'})`.compile(db),
        sql`insert into s values (${'kept'})`.compile(db),
        sql`insert into s values (${'d'})`.compile(db),
      ]).catch((e: unknown) => e);
      expect(error).toMatchObject({
        message: expect.stringContaining('UNIQUE constraint failed'),
        errcode: 1555,
        statement: 1,
      });
      expect(sent.map((m) => m.split(':')[0])).toEqual(['script', 'script']);
      // Nothing of the failed script, and no transaction left open: a new one begins and commits.
      await db.transaction().execute((trx) => sql`insert into s values (${'e'})`.execute(trx));
      expect((await sql<{ id: string }>`select id from s order by id`.execute(db)).rows).toEqual(
        ['a', 'b', 'e', 'kept'].map((id) => ({ id })),
      );
    } finally {
      await db.destroy();
    }
  });

  it('rolls a script back whole when the disk fills in its middle, leaves no transaction open, and runs it once space is back', async () => {
    const { db } = countedDatabase('full.sqlite');
    try {
      await sql`create table f (id text primary key, body text)`.execute(db);
      await sql`insert into f values ('kept', '')`.execute(db);
      // The file may not grow (max_page_count: the thread's one connection, so every script's):
      // a small row fits a page it has, a 200 kB one needs pages it cannot have.
      const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(db);
      await sql.raw(`pragma max_page_count = ${Number(rows[0]!.page_count)}`).execute(db);
      const script = () =>
        runScript(db, [
          sql`insert into f values (${'small'}, ${''})`.compile(db),
          sql`insert into f values (${'big'}, ${'x'.repeat(200_000)})`.compile(db),
          sql`insert into f values (${'after'}, ${''})`.compile(db),
        ]);
      const error = await script().catch((e: unknown) => e);
      expect(error).toMatchObject({
        message: expect.stringMatching(/database or disk is full/),
        errcode: 13,
        statement: 1,
      });
      const ids = async () => (await sql<{ id: string }>`select id from f order by id`.execute(db)).rows;
      // Nothing of it, the row before the failing one included; a new transaction begins and commits.
      expect(await ids()).toEqual([{ id: 'kept' }]);
      await db
        .transaction()
        .execute((trx) => sql`update f set body = ${'still'} where id = 'kept'`.execute(trx));
      // Space again: the same script, whole.
      await sql.raw('pragma max_page_count = 1073741823').execute(db);
      expect(await script()).toHaveLength(3);
      expect(await ids()).toEqual(['after', 'big', 'kept', 'small'].map((id) => ({ id })));
    } finally {
      await db.destroy();
    }
  });
});
