import type { FeatureMigrations } from '../database/database.ts';

/**
 * The lock-out records' table (src/database/database.ts: times are epoch milliseconds, `bigint`
 * on PostgreSQL, read with `Number()`; booleans 0/1).
 *
 * `lockout`: one row per lock-out riskgate drove (or withheld), keyed by its decision's id (a
 * decision locks one user out at most). `status` is where it stands: `queued` (promised, not yet
 * applied), `locked` (the Admin API applied it), `failed` (never applied), `withheld` (the policy
 * asked for it and the first factor had not passed), `unlocked` (an operator ended it; the unlock
 * itself is `unlock_status`), `expired` (a temporary one ended on time). `until_ms` is a temporary
 * lock-out's end, null when permanent.
 */

// A type, not an interface: kysely's withTables wants an index signature.
export type LockoutTables = {
  lockout: {
    id: string;
    user_id: string;
    account_id: string | null;
    decision_id: string;
    rule: string | null;
    created_ms: number;
    status: string;
    until_ms: number | null;
    /** 1 when escalation (`escalateWithin`) made a temporary lock-out permanent. */
    escalated: number;
    ended_ms: number | null;
    /** `schedule` (a temporary one ran out), or the operator's name. */
    ended_by: string | null;
    /** Why: withheld or failed (a reason code), an operator's unlock reason, a skipped unlock's. */
    reason: string | null;
    /** An operator's unlock through the outbox: `queued`, `done` or `failed`. */
    unlock_status: string | null;
    updated_ms: number;
  };
};

export const lockoutMigrations: FeatureMigrations = {
  'lockouts-001-table': {
    async up(db) {
      await db.schema
        .createTable('lockout')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('user_id', 'text', (c) => c.notNull())
        .addColumn('account_id', 'text')
        .addColumn('decision_id', 'text', (c) => c.notNull())
        .addColumn('rule', 'text')
        .addColumn('created_ms', 'bigint', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('until_ms', 'bigint')
        .addColumn('escalated', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('ended_ms', 'bigint')
        .addColumn('ended_by', 'text')
        .addColumn('reason', 'text')
        .addColumn('unlock_status', 'text')
        .addColumn('updated_ms', 'bigint', (c) => c.notNull())
        .execute();
      // Newest first under each filter: every index ends in (created_ms, id), the page order.
      for (const [name, columns] of [
        ['lockout_created', ['created_ms', 'id']],
        ['lockout_user_created', ['user_id', 'created_ms', 'id']],
        ['lockout_status_created', ['status', 'created_ms', 'id']],
      ] as const) {
        await db.schema
          .createIndex(name)
          .ifNotExists()
          .on('lockout')
          .columns([...columns])
          .execute();
      }
    },
  },
  // An analyst looks a lock-out up by the login backend's account (the name they know) as well
  // as by the Admin user id: the same page order under that filter.
  'lockouts-002-account-index': {
    async up(db) {
      await db.schema
        .createIndex('lockout_account_created')
        .ifNotExists()
        .on('lockout')
        .columns(['account_id', 'created_ms', 'id'])
        .execute();
    },
  },
};
