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

/** A read or write of `LockoutStore` that finds its rows through an index (by its method or filter). */
export type LockoutRead =
  | 'add'
  | 'get'
  | 'list'
  | 'list userId='
  | 'list accountId='
  | 'list status='
  | 'previousWithin'
  | 'extendedBy'
  | 'beginUnlock'
  | 'lockedAll'
  | 'applyOutcome'
  | 'makePermanent'
  | 'lockedStatement';

/**
 * Every index of `lockout` and the store's queries that need it (issue 32: each is a page written
 * per lock-out and per status change; test/control-indexes.test.ts checks them as it does
 * `OUTBOX_INDEXES`). Each secondary index is a console filter's page order (newest first under
 * that filter, `(created_ms, id)` the cursor): without one, that page reads every lock-out. Kept
 * whole by issue 32's cut: every one has its filter.
 */
export const LOCKOUT_INDEXES: ReadonlyArray<{
  index: string;
  columns: string;
  reads: readonly LockoutRead[];
}> = [
  {
    index: '(primary key)',
    columns: 'id',
    // `lockedStatement`: an upsert of its id, in the outbox's completion (on SQLite its delivered
    // check finds the entry by the outbox's unique id).
    reads: ['add', 'get', 'beginUnlock', 'lockedAll', 'applyOutcome', 'makePermanent', 'lockedStatement'],
  },
  { index: 'lockout_created', columns: 'created_ms, id', reads: ['list'] },
  {
    index: 'lockout_user_created',
    columns: 'user_id, created_ms, id',
    // The user's other lock-outs: escalation, the unlock's check, an unlock ending them all.
    reads: ['list userId=', 'previousWithin', 'extendedBy', 'beginUnlock', 'applyOutcome'],
  },
  { index: 'lockout_status_created', columns: 'status, created_ms, id', reads: ['list status='] },
  { index: 'lockout_account_created', columns: 'account_id, created_ms, id', reads: ['list accountId='] },
];

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
