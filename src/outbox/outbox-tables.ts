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

export const outboxMigrations: FeatureMigrations = {
  'outbox-001-entries': {
    // biome-ignore lint/suspicious/noExplicitAny: a migration sees the database before its tables exist.
    async up(db: Kysely<any>) {
      const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
      await db.schema
        .createTable('outbox_entry')
        .ifNotExists()
        // The append order. SQLite: AUTOINCREMENT never reuses a pruned row's number.
        .addColumn('seq', postgres ? 'bigserial' : 'integer', (c) =>
          postgres ? c.primaryKey() : c.primaryKey().autoIncrement(),
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
        .addColumn('logged', 'integer', (c) => c.notNull().defaultTo(1))
        .execute();
      // The claim: due pending rows; the order rule: a user's pending rows by seq.
      for (const [name, columns] of [
        ['outbox_entry_due', ['status', 'next_attempt_at']],
        ['outbox_entry_ordering', ['ordering_key', 'status', 'seq']],
        ['outbox_entry_unlogged', ['logged', 'updated_at']],
        ['outbox_entry_status_seq', ['status', 'seq']],
      ] as const) {
        await db.schema
          .createIndex(name)
          .ifNotExists()
          .on('outbox_entry')
          .columns([...columns])
          .execute();
      }
      // Only pending rows are ever claimed: a partial index keeps the claim's scan to them.
      await sql`CREATE INDEX IF NOT EXISTS outbox_entry_pending ON outbox_entry (seq) WHERE status = 'pending'`.execute(
        db,
      );
    },
  },
};
