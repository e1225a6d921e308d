import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { sql } from 'kysely';
import pgClient from 'pg';
import { describe, expect, it } from 'vitest';
import { type DatabaseTarget, type FeatureMigrations, openDatabase } from '../src/database/database.ts';
import { stateFiles } from '../src/database/state-files.ts';
import { eventually } from './support/eventually.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

// A type, not an interface: kysely's withTables wants an index signature.
type NoteTables = {
  note: { id: string; at_ms: number; flagged: number; body: string };
};

const migrations: FeatureMigrations = {
  'test-001-note': {
    async up(db) {
      await db.schema
        .createTable('note')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('at_ms', 'bigint', (c) => c.notNull())
        .addColumn('flagged', 'integer', (c) => c.notNull())
        .addColumn('body', 'text', (c) => c.notNull())
        .execute();
    },
  },
};

async function roundTrip(target: DatabaseTarget): Promise<void> {
  const opened = await openDatabase(target, { migrations });
  try {
    const db = opened.db.withTables<NoteTables>();
    const at = Date.now();
    await db.insertInto('note').values({ id: 'a', at_ms: at, flagged: 1, body: '{"x":1}' }).execute();
    const row = await db.selectFrom('note').selectAll().where('id', '=', 'a').executeTakeFirstOrThrow();
    expect(Number(row.at_ms)).toBe(at);
    expect(row.flagged).toBe(1);
    expect(JSON.parse(row.body)).toEqual({ x: 1 });
  } finally {
    await opened.close();
  }
  // Opening again finds the migration applied and the row kept (not for a process-private memory db).
  if (target.kind === 'memory') return;
  const again = await openDatabase(target, { migrations });
  try {
    const rows = await again.db.withTables<NoteTables>().selectFrom('note').select('id').execute();
    expect(rows.map((r) => r.id)).toEqual(['a']);
    const applied = await sql<{ n: number }>`select count(*) as n from riskgate_migration`.execute(again.db);
    expect(Number(applied.rows[0]!.n)).toBe(1);
  } finally {
    await again.close();
  }
}

/**
 * Several processes starting on one fresh database at once (the workers of one host, replicas):
 * each opens it on a connection of its own and migrates. Every open succeeds and each migration is
 * applied once. Many small migrations widen the window a race needs.
 */
async function openTogether(target: () => DatabaseTarget, count: number): Promise<void> {
  const many: FeatureMigrations = { ...migrations };
  for (let i = 2; i <= 12; i++) {
    many[`test-${String(i).padStart(3, '0')}-index`] = {
      async up(db) {
        await db.schema.createIndex(`note_at_${i}`).on('note').column('at_ms').execute();
      },
    };
  }
  const opened = await Promise.allSettled(
    Array.from({ length: count }, () => openDatabase(target(), { migrations: many })),
  );
  try {
    expect(opened.filter((o) => o.status === 'rejected').map((o) => String(o.reason))).toEqual([]);
    const first = (opened[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof openDatabase>>>).value;
    const applied = await sql<{ name: string }>`select name from riskgate_migration order by name`.execute(
      first.db,
    );
    expect(applied.rows.map((r) => r.name)).toEqual(Object.keys(many).sort());
  } finally {
    for (const o of opened) if (o.status === 'fulfilled') await o.value.close();
  }
}

const dir = tempDirForBlock('riskgate-db-');

describe('the database serves the same kysely queries on both engines', () => {
  it('keeps rows and migrations in the embedded SQLite file', async () => {
    await roundTrip({ kind: 'sqlite', path: stateFiles(join(dir, 'state')).control });
  });

  it('waits for another connection’s write lock on its thread, never on the event loop', async () => {
    const path = stateFiles(join(dir, 'locked')).control;
    const database = await openDatabase({ kind: 'sqlite', path }, { migrations });
    // The decision store's writer thread, mid-transaction.
    const writer = new DatabaseSync(path);
    writer.exec('BEGIN IMMEDIATE');
    try {
      const insert = database.db
        .withTables<NoteTables>()
        .insertInto('note')
        .values({ id: 'n', at_ms: 1, flagged: 0, body: 'b' })
        .execute();
      // While the write waits for the lock, timers fire: the event loop is free.
      let ticks = 0;
      let inserted = false;
      insert.then(
        () => {
          inserted = true;
        },
        () => {},
      );
      const ticker = setInterval(() => ticks++, 10);
      await eventually(() => ticks > 3, { what: 'timers firing while the write waits' });
      clearInterval(ticker);
      expect(inserted).toBe(false); // still waiting for the lock
      writer.exec('COMMIT');
      await insert;
      const rows = await database.db.withTables<NoteTables>().selectFrom('note').select('id').execute();
      expect(rows.map((r) => r.id)).toEqual(['n']);
    } finally {
      if (writer.isTransaction) writer.exec('ROLLBACK');
      writer.close();
      await database.close();
    }
  });

  it('migrates once when several connections open one fresh file at the same time', async () => {
    // Each open has its own thread and connection, as each worker process has.
    for (let round = 0; round < 5; round++) {
      await openTogether(
        () => ({ kind: 'sqlite', path: stateFiles(join(dir, `together-${round}`)).control }),
        4,
      );
    }
  });

  it('runs on a process-private in-memory SQLite', async () => {
    await roundTrip({ kind: 'memory' });
  });

  describeOnPostgres('on PostgreSQL', (pg) => {
    it('keeps rows and migrations in PostgreSQL', async () => {
      await roundTrip({ kind: 'postgres', url: pg.url });
    });

    it('migrates once when several replicas open one fresh database at the same time', async () => {
      const url = await pg.createDatabase('together');
      await openTogether(() => ({ kind: 'postgres', url }), 4);
    });

    it('survives its server ending a connection that a transaction holds between two statements', async () => {
      // pg-pool hears a client's errors only while it is idle: before the fix this was an uncaught
      // exception (CI saw it when a test stopped PostgreSQL under a running riskgate).
      const uncaught: unknown[] = [];
      const record = (error: unknown) => uncaught.push(error);
      process.on('uncaughtException', record);
      const opened = await openDatabase({ kind: 'postgres', url: pg.url }, { migrations });
      const admin = new pgClient.Client({ connectionString: pg.url });
      await admin.connect();
      try {
        const failed = await opened.db.connection().execute(async (conn) => {
          const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(conn);
          const pid = rows[0]?.pid;
          await admin.query('select pg_terminate_backend($1)', [pid]);
          // The next statement on the held connection fails: the server is gone from under it.
          return sql`select 1`.execute(conn).then(
            () => false,
            () => true,
          );
        });
        expect(failed).toBe(true);
        // The pool drops the dead client once its end is read (a statement sent before that fails
        // on its own): queries go on without a restart.
        const one = await eventually(
          () =>
            sql<{ one: number }>`select 1 as one`.execute(opened.db).then(
              (r) => r.rows,
              () => undefined,
            ),
          { timeoutMs: 10_000, intervalMs: 50, what: 'a query on a fresh connection' },
        );
        expect(one).toEqual([{ one: 1 }]);
        expect(uncaught).toEqual([]);
      } finally {
        process.off('uncaughtException', record);
        await admin.end();
        await opened.close();
      }
    });

    it('refuses an unreachable server naming the failure, never the URL', async () => {
      const url = 'postgres://admin:s3cret-password@127.0.0.1:1/x';
      const error = await openDatabase(
        { kind: 'postgres', url },
        { migrations, connectTimeoutMs: 2000 },
      ).catch((e: Error) => e);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(/^RISKGATE_DATABASE: cannot reach PostgreSQL/);
      expect((error as Error).message).not.toContain('s3cret');
    });
  });
});
