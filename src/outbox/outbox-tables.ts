import { type Generated, type Kysely, PostgresAdapter, sql } from 'kysely';
import type { FeatureMigrations } from '../database/database.ts';

/**
 * The outbox's table in the database (src/database/database.ts: times are epoch milliseconds,
 * `bigint` on PostgreSQL, read with `Number()`; JSON as text).
 *
 * `outbox_entry`: one row per promised action, in append order (`seq`: one user's actions go in
 * that order). `status` is `pending` until `delivered`, `dead` (failed for good, or out of
 * horizon) or `dropped` (an operator). A claim leases a pending row to a process (`lease_owner`
 * until `lease_until`); a lease that ran out (its process died) is taken over. `logged` is 0 while
 * a final row's outcome line is not confirmed written. `action_type` is the spec's `type`, so a
 * claim passing over webhook deliveries reads no JSON.
 */

// A type, not an interface: kysely's withTables wants an index signature.
export type OutboxTables = {
  outbox_entry: {
    seq: Generated<number>;
    id: string;
    ordering_key: string;
    action_type: string;
    spec: string;
    status: Generated<string>;
    attempts: Generated<number>;
    created_at: number;
    horizon_start: number;
    next_attempt_at: number;
    updated_at: number;
    lease_owner: Generated<string | null>;
    lease_until: Generated<number>;
    last_error: Generated<string | null>;
    reason: Generated<string | null>;
    logged: Generated<number>;
  };
};

/** A read or write of `DatabaseOutboxStore` that finds its rows through an index (by its method). */
export type OutboxRead =
  | 'append'
  | 'claim'
  | 'complete'
  | 'markLogged'
  | 'retryLater'
  | 'deadLetter'
  | 'unlogged'
  | 'leaseOwners'
  | 'releaseOwner'
  | 'list'
  | 'list status='
  | 'get'
  | 'stats'
  | 'retry'
  | 'drop'
  | 'prune';

/**
 * Every index of `outbox_entry` and the store's queries that need it (issue 32: each index is a
 * page written per append, claim or completion: one no query reads goes). test/control-indexes.test.ts
 * checks a freshly migrated database against it on both engines: an index not listed, a listed one
 * missing, a read listed under an index its plan does not use, or a read of the store listed under
 * none, fails. The constraints (`(...)`) are each also their write's conflict target.
 *
 * Dropped by 002: `outbox_entry_due` (status, next_attempt_at) and `outbox_entry_pending` (seq,
 * pending only): the claim wants the pending rows in seq order, which `outbox_entry_status_seq`
 * gives, so does every other pending read; `outbox_entry_unlogged` (logged, updated_at): every
 * row had an entry, moved by each append, claim and completion, where `outbox_entry_untold` holds
 * only the rows whose outcome line is due (from their end to the line's confirmation).
 *
 * And SQLite's AUTOINCREMENT on `seq` (one `sqlite_sequence` page per append): without it a new
 * row takes the largest seq + 1, so a seq is reused only after the row holding the largest one is
 * deleted: `prune` deleting the newest entry (delivered or dropped, past the retention, nothing
 * appended since). No row can then be older than the new one with a larger seq: the new row still
 * sorts after every row there, which is all the claim's order (a user's pending rows by seq) and
 * the listing's (newest first) read. Nothing keeps a seq outside the table (no cursor, no API
 * field, no log line), so a pruned row's number coming back is never seen. PostgreSQL's sequence
 * is unchanged.
 */
export const OUTBOX_INDEXES: ReadonlyArray<{ index: string; columns: string; reads: readonly OutboxRead[] }> =
  [
    { index: '(primary key)', columns: 'seq', reads: ['list'] },
    {
      index: '(unique id)',
      columns: 'id',
      // And, on SQLite, the condition of `complete`'s delivery records (`delivered`, in the
      // lock-out's `lockedStatement`: run by the test with LOCKOUT_INDEXES' reads).
      reads: ['append', 'complete', 'markLogged', 'retryLater', 'deadLetter', 'get', 'retry', 'drop'],
    },
    {
      index: 'outbox_entry_status_seq',
      columns: 'status, seq',
      reads: ['claim', 'leaseOwners', 'releaseOwner', 'list status=', 'stats', 'prune'],
    },
    // The claim's order rule: no earlier pending entry of the user, none of theirs leased.
    { index: 'outbox_entry_ordering', columns: 'ordering_key, status, seq', reads: ['claim'] },
    { index: 'outbox_entry_untold', columns: 'updated_at (logged = 0 only)', reads: ['unlogged'] },
  ];

/**
 * The columns of `outbox_entry` (001's table; 002 makes it again without AUTOINCREMENT), as `name`.
 * `seq` is the append order: SQLite's rowid, PostgreSQL's bigserial.
 */
// biome-ignore lint/suspicious/noExplicitAny: a migration sees the database before its tables exist.
function entryTable(db: Kysely<any>, name: string, seq: 'autoincrement' | 'rowid') {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  return db.schema
    .createTable(name)
    .ifNotExists()
    .addColumn('seq', postgres ? 'bigserial' : 'integer', (c) =>
      postgres || seq === 'rowid' ? c.primaryKey() : c.primaryKey().autoIncrement(),
    )
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('ordering_key', 'text', (c) => c.notNull())
    .addColumn('action_type', 'text', (c) => c.notNull())
    .addColumn('spec', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('pending'))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('horizon_start', 'bigint', (c) => c.notNull())
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('lease_owner', 'text')
    .addColumn('lease_until', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('last_error', 'text')
    .addColumn('reason', 'text')
    .addColumn('logged', 'integer', (c) => c.notNull().defaultTo(1));
}

/** Plain indexes of `outbox_entry`, each `[name, columns]`. */
// biome-ignore lint/suspicious/noExplicitAny: a migration sees the database before its tables exist.
async function createIndexes(db: Kysely<any>, indexes: ReadonlyArray<readonly [string, readonly string[]]>) {
  for (const [name, columns] of indexes)
    await db.schema
      .createIndex(name)
      .ifNotExists()
      .on('outbox_entry')
      .columns([...columns])
      .execute();
}

/** Indexes 002 keeps or makes (`OUTBOX_INDEXES` says which query needs each). */
// biome-ignore lint/suspicious/noExplicitAny: a migration sees the database before its tables exist.
async function createEntryIndexes(db: Kysely<any>): Promise<void> {
  await createIndexes(db, [
    ['outbox_entry_ordering', ['ordering_key', 'status', 'seq']],
    ['outbox_entry_status_seq', ['status', 'seq']],
  ]);
  await sql`CREATE INDEX IF NOT EXISTS outbox_entry_untold ON outbox_entry (updated_at) WHERE logged = 0`.execute(
    db,
  );
}

/**
 * SQLite: `outbox_entry` made again with `seq` a plain rowid (no AUTOINCREMENT, so no
 * `sqlite_sequence` row to write on each append), its rows and their `seq` kept. Only when the
 * table still has AUTOINCREMENT: a re-run finds it done.
 */
// biome-ignore lint/suspicious/noExplicitAny: a migration sees the database before its tables exist.
async function dropAutoincrement(db: Kysely<any>): Promise<void> {
  const { rows } = await sql<{ sql: string }>`SELECT sql FROM sqlite_master
    WHERE type = 'table' AND name = 'outbox_entry'`.execute(db);
  if (!/autoincrement/i.test(rows[0]?.sql ?? '')) return;
  const { rows: columns } = await sql<{ name: string }>`PRAGMA table_info(outbox_entry)`.execute(db);
  const names = sql.join(columns.map((c) => sql.ref(c.name)));
  await sql`DROP TABLE IF EXISTS outbox_entry_rebuilt`.execute(db);
  await entryTable(db, 'outbox_entry_rebuilt', 'rowid').execute();
  await sql`INSERT INTO outbox_entry_rebuilt (${names}) SELECT ${names} FROM outbox_entry`.execute(db);
  // The table's indexes go with it; createEntryIndexes makes those that stay.
  await sql`DROP TABLE outbox_entry`.execute(db);
  await sql`ALTER TABLE outbox_entry_rebuilt RENAME TO outbox_entry`.execute(db);
  await sql`DELETE FROM sqlite_sequence WHERE name = 'outbox_entry'`.execute(db);
}

export const outboxMigrations: FeatureMigrations = {
  'outbox-001-entries': {
    // biome-ignore lint/suspicious/noExplicitAny: a migration sees the database before its tables exist.
    async up(db: Kysely<any>) {
      // The append order. SQLite: AUTOINCREMENT never reuses a pruned row's number (002 drops it).
      await entryTable(db, 'outbox_entry', 'autoincrement').execute();
      // The claim: due pending rows; the order rule: a user's pending rows by seq.
      await createIndexes(db, [
        ['outbox_entry_due', ['status', 'next_attempt_at']],
        ['outbox_entry_ordering', ['ordering_key', 'status', 'seq']],
        ['outbox_entry_unlogged', ['logged', 'updated_at']],
        ['outbox_entry_status_seq', ['status', 'seq']],
      ]);
      // Only pending rows are ever claimed: a partial index keeps the claim's scan to them.
      await sql`CREATE INDEX IF NOT EXISTS outbox_entry_pending ON outbox_entry (seq) WHERE status = 'pending'`.execute(
        db,
      );
    },
  },
  // Issue 32: each index is a B-tree page written per append, claim or completion. Gone: `due` and
  // `pending` (the claim reads `status_seq`: the pending rows in seq order), `unlogged` (every
  // append and claim moved its entry; `untold` holds only the rows whose line is due), and on
  // SQLite the AUTOINCREMENT (`OUTBOX_INDEXES` says why nothing needs it).
  'outbox-002-indexes-that-earn-their-place': {
    // biome-ignore lint/suspicious/noExplicitAny: a migration sees the database before its tables exist.
    async up(db: Kysely<any>) {
      if (!(db.getExecutor().adapter instanceof PostgresAdapter)) await dropAutoincrement(db);
      for (const name of ['outbox_entry_due', 'outbox_entry_pending', 'outbox_entry_unlogged'])
        await db.schema.dropIndex(name).ifExists().execute();
      await createEntryIndexes(db);
    },
  },
};
