import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  type CompiledQuery,
  Kysely,
  PostgresDialect,
  type QueryResult,
  SqliteAdapter,
  SqliteDialect,
  sql,
} from 'kysely';
import { type Migration, type MigrationProvider, Migrator } from 'kysely/migration';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { LifecycleLog } from '../lifecycle/component.ts';
import { type DatabaseGate, GatedDialect } from './gated-dialect.ts';
import { openNodeSqlite } from './node-sqlite-database.ts';
import { type PostgresConnection, pgClientConfig } from './postgres-connection.ts';
import { runScript, SqliteThreadDialect } from './sqlite-thread-dialect.ts';
import { ownerOnly } from './state-files.ts';

/**
 * The database behind what people query (decisions, audit trail, lists, lock-outs): embedded SQLite
 * under RISKGATE_STATE_DIR (one host), or PostgreSQL (every replica writes to one store). One query
 * layer, kysely, serves both engines: a feature writes its queries once, in kysely's builder, and
 * declares its tables as migrations (`FeatureMigrations`), which run at start, in name order, once
 * however many processes start together (`migrate`).
 *
 * The SQLite file's queries run on a worker thread that owns the connection (node:sqlite is
 * synchronous: sqlite-thread-dialect.ts), so no query holds the event loop; `memory` (a
 * process-private database: tests) stays on the main thread, its queries a test's few rows.
 *
 * Engine differences a feature must respect (kysely does not paper over them): booleans are stored
 * as integers 0/1 (SQLite has no boolean; node:sqlite binds none), timestamps as epoch
 * milliseconds in `bigint`-free integer columns (`integer` on SQLite, `bigint` on PostgreSQL: the pg
 * driver returns bigint columns as strings, so read them with `Number()`), JSON as text.
 */

/** Where the database is (RISKGATE_DATABASE). */
export type DatabaseTarget =
  | {
      kind: 'sqlite';
      path: string;
      /** Page size of the file when this open creates it, bytes. Default SQLite's (4096). */
      pageSize?: number;
    }
  | { kind: 'memory' }
  | { kind: 'postgres'; url: string };

/** Which engine a database runs on: queries that differ (upserts, JSON) branch on it. */
export type DatabaseEngine = 'sqlite' | 'postgres';

/** An open database: the kysely handle (untyped: each feature adds its tables with `withTables`). */
export interface RiskgateDatabase {
  // biome-ignore lint/complexity/noBannedTypes: kysely's empty schema; features add theirs with withTables<T>().
  db: Kysely<{}>;
  engine: DatabaseEngine;
  /**
   * PostgreSQL: how its pool connects (URL and timeouts), for a connection of one's own on another
   * thread (the decision store's writer: src/decision-store/pg-thread-sink.ts). Holds the URL,
   * which may carry a password: never logged.
   */
  postgres?: PostgresConnection;
  /**
   * The SQLite file, when it is one: whether it changed can be seen from its `stat` without a
   * query (src/database/marker-poll.ts).
   */
  file?: string;
  /**
   * The SQLite file only: runs `statements` as one transaction in one message to its thread (see
   * `scriptQuery` in sqlite-thread-dialect.ts), each one's result in order; a statement that fails
   * rolls all of them back. For a caller holding every statement of a transaction up front and
   * needing no answer between them. Absent elsewhere: such a caller uses `db.transaction()`.
   */
  script?: (statements: readonly CompiledQuery[]) => Promise<QueryResult<unknown>[]>;
  /** Closes the pool or the file. */
  close(): Promise<void>;
}

/** A feature's migrations, by name; names are prefixed by the feature (`decisions-001-...`). */
export type FeatureMigrations = Record<string, Migration>;

export interface OpenDatabaseOptions {
  /** Every feature's migrations, run at open. */
  migrations: FeatureMigrations;
  /** PostgreSQL pool size. Default 4. */
  poolSize?: number;
  /** PostgreSQL: a statement (and a wait for a pooled connection) gives up after this long, ms. Default 5000. */
  statementTimeoutMs?: number;
  /** PostgreSQL: connecting gives up after this long, milliseconds. Default 5000. */
  connectTimeoutMs?: number;
  /** SQLite file: a query (or a wait for the connection) gives up after this long, ms. Default 30000. */
  sqliteTimeoutMs?: number;
  /** Where the SQLite thread's death is reported. Default: not reported. */
  log?: LifecycleLog;
  /**
   * SQLite file: its queries pass `gate` (src/database/gated-dialect.ts: refused once it trips,
   * reopened on demand); `onError` is told of each failed query. Default: none.
   */
  gate?: { gate: DatabaseGate; onError?: (error: unknown) => void };
}

/**
 * Opens `target` and runs `options.migrations` on it. A PostgreSQL URL may carry a password: an
 * error names the failure, never the URL.
 */
export async function openDatabase(
  target: DatabaseTarget,
  options: OpenDatabaseOptions,
): Promise<RiskgateDatabase> {
  const opened = await openEngine(target, options);
  try {
    await migrate(opened.db, options.migrations);
  } catch (error) {
    await opened.close().catch(() => {});
    throw new RiskgateError(
      ErrorCode.INVALID_CONFIG,
      `RISKGATE_DATABASE: migrating the ${opened.engine} database failed: ${(error as Error).message}`,
    );
  }
  return opened;
}

async function openEngine(target: DatabaseTarget, options: OpenDatabaseOptions): Promise<RiskgateDatabase> {
  if (target.kind === 'memory') {
    // A process-private database (tests) stays on the main thread: nothing else shares its lock,
    // and its queries are a test's few rows, so a thread would only add a start-up to every test.
    // biome-ignore lint/complexity/noBannedTypes: kysely's empty schema.
    const db = new Kysely<{}>({ dialect: new SqliteDialect({ database: openNodeSqlite(':memory:') }) });
    return { db, engine: 'sqlite', close: () => db.destroy() };
  }
  if (target.kind === 'sqlite') {
    // Owner only (docs/operations.md, "State files"): the directory 0700 when made here, the file
    // 0600 before SQLite opens it (its -wal and -shm take the file's mode).
    mkdirSync(join(target.path, '..'), { recursive: true, mode: 0o700 });
    ownerOnly(target.path);
    // The file's queries run on a thread of their own (sqlite-thread-dialect.ts): never on the event loop.
    const threaded = new SqliteThreadDialect({
      path: target.path,
      ...(target.pageSize !== undefined && { pageSize: target.pageSize }),
      timeoutMs: options.sqliteTimeoutMs,
      log: options.log,
    });
    const g = options.gate;
    const dialect = g === undefined ? threaded : new GatedDialect(threaded, g.gate, g.onError);
    // biome-ignore lint/complexity/noBannedTypes: kysely's empty schema.
    const db = new Kysely<{}>({ dialect });
    return {
      db,
      engine: 'sqlite',
      file: target.path,
      script: (statements) => runScript(db, statements),
      close: () => db.destroy(),
    };
  }
  // Loaded only when configured: the embedded default never loads the PostgreSQL client.
  const { default: pg } = await import('pg');
  const postgres: PostgresConnection = {
    url: target.url,
    statementTimeoutMs: options.statementTimeoutMs ?? 5000,
    connectTimeoutMs: options.connectTimeoutMs ?? 5000,
  };
  const pool = new pg.Pool({
    ...pgClientConfig(postgres),
    max: options.poolSize ?? 4,
    idleTimeoutMillis: 30_000,
  });
  // An idle client's error (the server restarted) must not crash the process: the pool replaces it.
  pool.on('error', () => {});
  // pg-pool listens for a client's errors only while it is idle. A connection that ends while
  // checked out between two statements (kysely holds it for a transaction) would emit an 'error'
  // nobody hears: an uncaught exception that takes the process down with the database. The
  // statement in flight, or the next one, fails on its own and the pool drops the dead client.
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  // biome-ignore lint/complexity/noBannedTypes: kysely's empty schema.
  const db = new Kysely<{}>({ dialect: new PostgresDialect({ pool }) });
  try {
    await pool.query('select 1');
  } catch (error) {
    await db.destroy().catch(() => {});
    throw new RiskgateError(
      ErrorCode.INVALID_CONFIG,
      `RISKGATE_DATABASE: cannot reach PostgreSQL: ${(error as Error).message}`,
    );
  }
  return { db, engine: 'postgres', postgres, close: () => db.destroy() };
}

/** kysely's record of the migrations applied: a database without it was never riskgate's. */
export const MIGRATION_TABLE = 'riskgate_migration';

/** How long a start waits for another process's migrations on the same SQLite file, ms. */
const SQLITE_MIGRATION_WAIT_MS = 60_000;

/**
 * Runs every pending migration, once however many processes start together. On PostgreSQL kysely's
 * migration lock is an advisory lock: replicas wait for each other. On SQLite kysely's lock is a
 * no-op (it assumes one connection), but each worker of a host has a connection of its own to the
 * file, and two of them applied the same migration at once ("UNIQUE constraint failed:
 * riskgate_migration.name", a worker lost in one start of five): here the whole run, kysely's
 * bookkeeping tables included, is one `BEGIN IMMEDIATE` transaction, which holds the file's write
 * lock from its first statement. The second process waits for it, then finds every migration
 * applied; a run that fails rolls back whole (SQLite's DDL is transactional).
 */
// biome-ignore lint/complexity/noBannedTypes: kysely's empty schema.
async function migrate(db: Kysely<{}>, migrations: FeatureMigrations): Promise<void> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return migrateToLatest(db, migrations);
  await db.connection().execute(async (connection) => {
    await beginImmediate(connection);
    try {
      await migrateToLatest(connection, migrations);
      await sql`commit`.execute(connection);
    } catch (error) {
      await sql`rollback`.execute(connection).catch(() => {});
      throw error;
    }
  });
}

/**
 * Takes SQLite's write lock. Each attempt waits the connection's busy timeout (5 s) and fails
 * with SQLITE_BUSY while another process holds the lock; a long migration (an index over a month
 * of decisions) is waited for up to `SQLITE_MIGRATION_WAIT_MS`.
 */
// biome-ignore lint/complexity/noBannedTypes: kysely's empty schema.
async function beginImmediate(connection: Kysely<{}>): Promise<void> {
  const until = performance.now() + SQLITE_MIGRATION_WAIT_MS;
  for (;;) {
    try {
      await sql`begin immediate`.execute(connection);
      return;
    } catch (error) {
      if (
        !/database is locked|SQLITE_BUSY/i.test(String((error as Error).message)) ||
        performance.now() > until
      )
        throw error;
    }
  }
}

// biome-ignore lint/complexity/noBannedTypes: kysely's empty schema.
async function migrateToLatest(db: Kysely<{}>, migrations: FeatureMigrations): Promise<void> {
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  const migrator = new Migrator({
    db,
    provider,
    migrationTableName: MIGRATION_TABLE,
    migrationLockTableName: 'riskgate_migration_lock',
    // Features add migrations independently; a name sorting before an applied one still runs.
    allowUnorderedMigrations: true,
  });
  const { error } = await migrator.migrateToLatest();
  if (error !== undefined) throw error instanceof Error ? error : new Error(String(error));
}
