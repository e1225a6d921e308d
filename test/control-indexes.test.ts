import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompiledQuery, Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { type DatabaseEngine, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { openNodeSqlite } from '../src/database/node-sqlite-database.ts';
import type { PlannedLockout } from '../src/lockouts/lockout-record.ts';
import { LockoutRecorder } from '../src/lockouts/lockout-recorder.ts';
import { LockoutStore } from '../src/lockouts/lockout-store.ts';
import { LOCKOUT_INDEXES, type LockoutRead } from '../src/lockouts/lockout-tables.ts';
import { DatabaseOutboxStore } from '../src/outbox/database-outbox-store.ts';
import { OUTBOX_INDEXES, type OutboxRead } from '../src/outbox/outbox-tables.ts';
import { CONTROL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { doneOutcome, lockOutSpec } from './support/outbox-database.ts';
import { describeOnPostgres } from './support/postgres-server.ts';

/**
 * Every index of the control state's `outbox_entry` and `lockout` earns its place (issue 32: each
 * is a page written per deny): a freshly migrated database holds exactly the indexes
 * `OUTBOX_INDEXES` and `LOCKOUT_INDEXES` list, each listed read of the store (run here, its
 * queries caught as kysely sends them) uses the index it is listed under, and none reads its table
 * whole. SQLite: `EXPLAIN QUERY PLAN`; PostgreSQL: `EXPLAIN` with sequential scans disabled (a
 * few rows would make one cheaper), so a query that has no index still shows a `Seq Scan`.
 */

const T0 = 1_800_000_000_000;
const LEASE = 10_000;

let n = 0;
const spec = (user: string) => lockOutSpec(++n, user);

const planned = (decisionId: string, userId: string): PlannedLockout => ({
  decisionId,
  userId,
  accountId: `acct-${userId}`,
  rule: 'new-device',
  createdMs: T0,
  status: 'queued',
  durationMs: 60_000,
});

/** A migrated database with kysely's every statement caught (`queries`), and how to plan one. */
interface Caught {
  database: RiskgateDatabase;
  queries: CompiledQuery[];
  plan(query: CompiledQuery): Promise<string[]>;
  indexes(table: string): Promise<string[]>;
  /** PostgreSQL: a table of a day's rows, its statistics taken (autovacuum's), so the planner chooses as it would. */
  grow?(table: 'outbox_entry' | 'lockout'): Promise<void>;
}

async function caughtSqlite(dir: string): Promise<Caught> {
  const path = join(dir, 'control.sqlite');
  await (await openDatabase({ kind: 'sqlite', path }, { migrations: CONTROL_MIGRATIONS })).close();
  const queries: CompiledQuery[] = [];
  // biome-ignore lint/complexity/noBannedTypes: kysely's empty schema.
  const db = new Kysely<{}>({
    dialect: new SqliteDialect({ database: openNodeSqlite(path) }),
    log: (event) => void (event.level === 'query' && queries.push(event.query)),
  });
  return {
    database: { db, engine: 'sqlite', close: () => db.destroy() },
    queries,
    plan: async (q) =>
      (
        await db.executeQuery<{ detail: string }>(
          CompiledQuery.raw(`EXPLAIN QUERY PLAN ${q.sql}`, [...q.parameters]),
        )
      ).rows.map((r) => r.detail),
    indexes: async (table) =>
      (
        await sql<{
          name: string;
        }>`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ${table}
          AND name NOT LIKE 'sqlite_autoindex_%'`.execute(db)
      ).rows.map((r) => r.name),
  };
}

async function caughtPostgres(url: string): Promise<Caught> {
  await (await openDatabase({ kind: 'postgres', url }, { migrations: CONTROL_MIGRATIONS })).close();
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  // The server stopping under an idle client: not this test's failure.
  pool.on('error', () => {});
  const queries: CompiledQuery[] = [];
  // biome-ignore lint/complexity/noBannedTypes: kysely's empty schema.
  const db = new Kysely<{}>({
    dialect: new PostgresDialect({ pool }),
    log: (event) => void (event.level === 'query' && queries.push(event.query)),
  });
  // One connection: the setting holds for every plan.
  await sql`SET enable_seqscan = off`.execute(db);
  return {
    database: { db, engine: 'postgres', close: () => db.destroy() },
    queries,
    plan: async (q) =>
      (
        await db.executeQuery<{ 'QUERY PLAN': string }>(
          CompiledQuery.raw(`EXPLAIN ${q.sql}`, [...q.parameters]),
        )
      ).rows.map((r) => r['QUERY PLAN']),
    indexes: async (table) =>
      (
        await sql<{ indexname: string }>`SELECT indexname FROM pg_indexes
          WHERE schemaname = current_schema() AND tablename = ${table}
            AND indexname NOT IN (${`${table}_pkey`}, ${`${table}_id_key`})`.execute(db)
      ).rows.map((r) => r.indexname),
    grow: async (table) => {
      // 20,000 rows of 2,000 users: a tenth pending, the rest delivered (the outbox); a hundredth failed, a tenth queued, the rest locked.
      if (table === 'outbox_entry')
        await sql`INSERT INTO outbox_entry (id, ordering_key, action_type, spec, status, created_at,
            horizon_start, next_attempt_at, updated_at)
          SELECT 'bulk-' || i, 'bulk-user-' || (i % 2000), 'lock_out_user', '{}',
            CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'delivered' END, ${T0}::bigint - i, ${T0}::bigint - i, ${T0}::bigint + 1000, ${T0}::bigint
          FROM generate_series(1, 20000) AS i`.execute(db);
      else
        await sql`INSERT INTO lockout (id, user_id, account_id, decision_id, rule, created_ms, status, updated_ms)
          SELECT 'bulk-' || i, 'bulk-user-' || (i % 2000), 'bulk-acct-' || (i % 2000), 'bulk-' || i, 'r',
            ${T0}::bigint - i, CASE WHEN i % 100 = 0 THEN 'failed' WHEN i % 10 = 0 THEN 'queued' ELSE 'locked' END, ${T0}::bigint
          FROM generate_series(1, 20000) AS i`.execute(db);
      await sql`ANALYZE ${sql.table(table)}`.execute(db);
    },
  };
}

/** Each outbox read, run once (the rows `seedOutbox` left in every status). */
const OUTBOX_READS: Record<OutboxRead, (s: DatabaseOutboxStore, ids: string[]) => Promise<unknown>> = {
  append: (s) => s.append([spec('u-new')], T0),
  claim: (s) => s.claim('w2', 10, T0 + 1, LEASE),
  complete: (s, ids) => s.complete(ids[0]!, 'w1', T0),
  markLogged: (s, ids) => s.markLogged([ids[0]!]),
  retryLater: (s, ids) => s.retryLater(ids[1]!, 'w1', T0, 'e', true, T0),
  deadLetter: (s, ids) => s.deadLetter(ids[1]!, 'w1', 'r', T0),
  unlogged: (s) => s.unlogged(10),
  leaseOwners: (s) => s.leaseOwners(T0),
  releaseOwner: (s) => s.releaseOwner('w1', T0),
  list: (s) => s.list({ limit: 10 }),
  'list status=': (s) => s.list({ status: 'dead', limit: 10 }),
  get: (s, ids) => s.get(ids[2]!),
  stats: (s) => s.stats(T0),
  retry: (s, ids) => s.retry(ids[2]!, T0),
  drop: (s, ids) => s.drop(ids[3]!, 'r', T0),
  prune: (s) => s.prune(T0 + 1),
};

/** Entries in every status: delivered (told and not), dead, dropped, pending (leased and not). */
async function seedOutbox(s: DatabaseOutboxStore): Promise<string[]> {
  const specs = ['u1', 'u2', 'u3', 'u4', 'u5', 'u1'].map(spec);
  await s.append(specs, T0);
  await s.claim('w1', 5, T0, LEASE);
  await s.complete(specs[0]!.id, 'w1', T0);
  await s.complete(specs[1]!.id, 'w1', T0);
  await s.markLogged([specs[1]!.id]);
  await s.deadLetter(specs[2]!.id, 'w1', 'r', T0);
  await s.drop(specs[3]!.id, 'r', T0);
  return specs.map((x) => x.id);
}

/** A lock-out read, run once; `database` for one run with the outbox (`lockedStatement`). */
type LockoutReadRun = (s: LockoutStore, database: RiskgateDatabase) => Promise<unknown>;

const LOCKOUT_READS: Record<LockoutRead, LockoutReadRun> = {
  add: (s) => s.add(planned('d-new', 'u9'), T0),
  get: (s) => s.get('d1'),
  list: (s) => s.list({}),
  'list userId=': (s) => s.list({ userId: 'u1' }),
  'list accountId=': (s) => s.list({ accountId: 'acct-u1' }),
  // A rare status (the filter an index is for: a common one is found walking the newest).
  'list status=': (s) => s.list({ status: 'failed' }),
  previousWithin: (s) => s.previousWithin('u1', 'd2', T0, 60_000),
  extendedBy: (s) => s.extendedBy('u1', 'd1', T0),
  beginUnlock: async (s) => s.beginUnlock((await s.get('d1'))!, 'op', 'r', T0),
  lockedAll: (s) => s.lockedAll([doneOutcome(lockOutSpec(2, 'u1'))], T0),
  // A scheduled unlock done: the record read by id, the user's lock-outs in force expired.
  applyOutcome: (s) =>
    s.applyOutcome(
      doneOutcome({ id: 'd3:unlock_user:u2', decisionId: 'd3', type: 'unlock_user', target: 'u2' }),
      T0,
    ),
  makePermanent: (s) => s.makePermanent('d1', T0),
  // d5's lock delivered, its `locked` written by the statement the outbox's completion runs
  // (`DeliveryCompanion`; here in a transaction, on the SQLite file a script line, on PostgreSQL
  // a part of the completion's WITH statement). d5 has no record yet: the statement makes it.
  lockedStatement: async (s, database) => {
    const outbox = new DatabaseOutboxStore(database);
    const entry = lockOutSpec(5, 'u5');
    await outbox.append([entry], T0);
    expect(await outbox.claim('w-lock', 1, T0, LEASE)).toHaveLength(1);
    const { delivery } = new LockoutRecorder({
      store: s,
      events: { emit: async () => {}, wants: () => false },
      log: () => {},
    });
    expect(
      await outbox.complete(entry.id, 'w-lock', T0, { spec: entry, createdAtMs: T0, companion: delivery }),
    ).toBe(true);
  },
};

async function seedLockouts(s: LockoutStore): Promise<void> {
  for (const [id, user] of [
    ['d1', 'u1'],
    ['d2', 'u1'],
    ['d3', 'u2'],
  ] as const)
    await s.add(planned(id, user), T0);
}

/**
 * Whether a plan line reads `table` (or an alias of it) whole. On SQLite an index walked for its
 * order (a page, newest first) is `SCAN … USING INDEX`; one walked whole for its keys alone (an
 * `EXISTS` whose condition no index answers) is `SCAN … USING COVERING INDEX`: a scan.
 */
const fullScan = (engine: DatabaseEngine, line: string) =>
  engine === 'sqlite'
    ? /^SCAN (?!CONSTANT)/.test(line) &&
      (!line.includes(' USING ') || line.includes(' USING COVERING INDEX '))
    : /Seq Scan on (outbox_entry|lockout)\b/.test(line);

/** Whether a plan line reads index `name`. */
const usesIndex = (engine: DatabaseEngine, line: string, name: string) =>
  engine === 'sqlite' ? line.includes(` INDEX ${name}`) : new RegExp(`(using|on) ${name}\\b`).test(line);

interface Listed<R extends string> {
  index: string;
  reads: readonly R[];
}

/** Each read's queries of `table` and their plans. */
async function plansOf<S, R extends string>(
  c: Caught,
  store: S,
  table: RegExp,
  reads: Record<R, (s: S) => Promise<unknown>>,
): Promise<Map<R, string[][]>> {
  const plans = new Map<R, string[][]>();
  for (const read of Object.keys(reads) as R[]) {
    c.queries.length = 0;
    await reads[read](store);
    const queries = c.queries.filter((q) => table.test(q.sql));
    expect(queries.length, `${read}: no query of its table caught`).toBeGreaterThan(0);
    plans.set(read, await Promise.all(queries.map((q) => c.plan(q))));
  }
  return plans;
}

/** The checks: the indexes as listed, each listed read using its index, no read of the table whole. */
async function expectEarned<R extends string>(
  c: Caught,
  table: string,
  listed: ReadonlyArray<Listed<R>>,
  plans: Map<R, string[][]>,
  keyIsOrder = false,
): Promise<void> {
  const named = listed.map((l) => l.index).filter((name) => !name.startsWith('('));
  expect((await c.indexes(table)).sort()).toEqual([...named].sort());
  const engine = c.database.engine;
  for (const { index, reads } of listed)
    for (const read of reads) {
      const lines = plans.get(read)!.flat();
      if (!index.startsWith('('))
        expect(
          lines.some((line) => usesIndex(engine, line, index)),
          `${read} uses ${index}: ${lines.join(' | ')}`,
        ).toBe(true);
    }
  // With `keyIsOrder` (the outbox's seq, its append order; not a lock-out's decision id), the
  // primary key's reads may walk `table` in key order (newest first, a page's worth): that table
  // alone, so another one walked whole in such a read (a delivery companion's condition) fails.
  const inKeyOrder = new Set(
    keyIsOrder ? (listed.find((l) => l.index === '(primary key)')?.reads ?? []) : [],
  );
  for (const [read, queries] of plans)
    for (const lines of queries) {
      const scans = lines.filter((line) => fullScan(engine, line));
      const allowed =
        engine === 'sqlite' &&
        inKeyOrder.has(read) &&
        scans.every((line) => line === `SCAN ${table}`) &&
        !lines.some((l) => /TEMP B-TREE/.test(l));
      expect(allowed ? [] : scans, `${read} reads a table whole: ${lines.join(' | ')}`).toEqual([]);
    }
}

function everyEngine(open: () => Promise<Caught>) {
  it('outbox_entry: the indexes OUTBOX_INDEXES lists, each used by its reads, no read without one', async () => {
    const c = await open();
    try {
      const store = new DatabaseOutboxStore(c.database);
      const ids = await seedOutbox(store);
      await c.grow?.('outbox_entry');
      const plans = await plansOf(
        c,
        store,
        /\boutbox_entry\b/,
        Object.fromEntries(
          Object.entries(OUTBOX_READS).map(([read, run]) => [read, (s: DatabaseOutboxStore) => run(s, ids)]),
        ) as Record<OutboxRead, (s: DatabaseOutboxStore) => Promise<unknown>>,
      );
      await expectEarned(c, 'outbox_entry', OUTBOX_INDEXES, plans, true);
    } finally {
      await c.database.close();
    }
  });

  it('lockout: the indexes LOCKOUT_INDEXES lists (a console filter each), each used by its reads', async () => {
    const c = await open();
    try {
      const store = new LockoutStore(c.database);
      await seedLockouts(store);
      await c.grow?.('lockout');
      const plans = await plansOf(
        c,
        store,
        /"lockout"/,
        Object.fromEntries(
          Object.entries(LOCKOUT_READS).map(([read, run]) => [read, (s: LockoutStore) => run(s, c.database)]),
        ) as Record<LockoutRead, (s: LockoutStore) => Promise<unknown>>,
      );
      // The delivery's statement ran, and wrote.
      expect((await store.get('d5'))?.status).toBe('locked');
      await expectEarned(c, 'lockout', LOCKOUT_INDEXES, plans);
    } finally {
      await c.database.close();
    }
  });
}

it('every read of the two stores is listed under an index', () => {
  const listedOutbox = new Set(OUTBOX_INDEXES.flatMap((l) => l.reads));
  expect(Object.keys(OUTBOX_READS).filter((r) => !listedOutbox.has(r as OutboxRead))).toEqual([]);
  const listedLockout = new Set(LOCKOUT_INDEXES.flatMap((l) => l.reads));
  expect(Object.keys(LOCKOUT_READS).filter((r) => !listedLockout.has(r as LockoutRead))).toEqual([]);
});

describe('the control indexes (SQLite)', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  everyEngine(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-control-indexes-'));
    dirs.push(dir);
    return caughtSqlite(dir);
  });
});

describeOnPostgres('the control indexes (PostgreSQL)', (pg) => {
  let databases = 0;
  everyEngine(async () => caughtPostgres(await pg.createDatabase(`control_indexes_${++databases}`)));
});
