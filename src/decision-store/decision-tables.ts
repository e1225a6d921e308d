import { sql } from 'kysely';
import type { FeatureMigrations } from '../database/database.ts';

/**
 * The decision store's tables. Times are epoch milliseconds (`bigint` on PostgreSQL: read with
 * `Number()`), booleans 0/1, JSON as text (src/database/database.ts says why).
 *
 * - `decision`: one row per decision, the filterable columns and the logged line whole (`line`).
 * - `decision_rule`: one row per rule a decision matched (active and shadow policies), for the
 *   rule filter and the rules report.
 * - `decision_label`: every label given, oldest first; the current one is also on `decision`.
 * - `decision_action`: each action's latest outcome.
 * - `decision_outcome`: what the login backend reported of the login (`POST
 *   /decisions/{id}/outcome`), each kind and value once; its table and the decision's
 *   `outcome_label` column are src/outcomes/outcome-tables.ts's migration.
 */

// Types, not interfaces: kysely's withTables wants an index signature.
export type DecisionTables = {
  decision: {
    decision_id: string;
    at_ms: number;
    verdict: string;
    score: number;
    degraded: number;
    policy_name: string;
    policy_revision: string;
    account_id: string | null;
    user_id: string | null;
    ip: string | null;
    unit_id: string | null;
    shadow_verdict: string | null;
    shadow_revision: string | null;
    /** 1 when a shadow ran and its verdict differs from the active one. */
    shadow_disagrees: number;
    /** The newest analyst label, else the label the outcomes point to (src/outcomes/outcome-labels.ts). */
    label: string | null;
    /** The label the decision's outcomes point to, analyst labels aside. */
    outcome_label: string | null;
    total_ms: number;
    line: string;
    /** Bytes of `line`, for retention by size. */
    line_bytes: number;
  };
  decision_rule: {
    decision_id: string;
    policy: string;
    policy_revision: string;
    rule_id: string;
    at_ms: number;
  };
  decision_label: {
    decision_id: string;
    label: string;
    labelled_by: string;
    note: string | null;
    at_ms: number;
  };
  decision_outcome: {
    decision_id: string;
    /** `step_up` or `account_event`. */
    type: string;
    /** The step-up's result or the account event. */
    value: string;
    /** The id of the key that reported it. */
    reported_by: string;
    at_ms: number;
  };
  decision_action: {
    action_id: string;
    decision_id: string;
    type: string;
    target: string;
    status: string;
    detail: string;
    at_ms: number;
  };
};

export const decisionMigrations: FeatureMigrations = {
  'decisions-001-tables': {
    async up(db) {
      await db.schema
        .createTable('decision')
        .ifNotExists()
        .addColumn('decision_id', 'text', (c) => c.primaryKey())
        .addColumn('at_ms', 'bigint', (c) => c.notNull())
        .addColumn('verdict', 'text', (c) => c.notNull())
        .addColumn('score', 'double precision', (c) => c.notNull())
        .addColumn('degraded', 'integer', (c) => c.notNull())
        .addColumn('policy_name', 'text', (c) => c.notNull())
        .addColumn('policy_revision', 'text', (c) => c.notNull())
        .addColumn('account_id', 'text')
        .addColumn('user_id', 'text')
        .addColumn('ip', 'text')
        .addColumn('unit_id', 'text')
        .addColumn('shadow_verdict', 'text')
        .addColumn('shadow_revision', 'text')
        .addColumn('shadow_disagrees', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('label', 'text')
        .addColumn('total_ms', 'double precision', (c) => c.notNull())
        .addColumn('line', 'text', (c) => c.notNull())
        .addColumn('line_bytes', 'integer', (c) => c.notNull())
        .execute();
      // Newest first under every filter: each index ends in (at_ms, decision_id), the page order.
      for (const [name, columns] of [
        ['decision_at', ['at_ms', 'decision_id']],
        ['decision_verdict_at', ['verdict', 'at_ms', 'decision_id']],
        ['decision_account_at', ['account_id', 'at_ms', 'decision_id']],
        ['decision_user_at', ['user_id', 'at_ms', 'decision_id']],
        ['decision_ip_at', ['ip', 'at_ms', 'decision_id']],
        ['decision_unit_at', ['unit_id', 'at_ms', 'decision_id']],
      ] as const) {
        await db.schema
          .createIndex(name)
          .ifNotExists()
          .on('decision')
          .columns([...columns])
          .execute();
      }
      await db.schema
        .createTable('decision_rule')
        .ifNotExists()
        .addColumn('decision_id', 'text', (c) => c.notNull())
        .addColumn('policy', 'text', (c) => c.notNull())
        .addColumn('policy_revision', 'text', (c) => c.notNull())
        .addColumn('rule_id', 'text', (c) => c.notNull())
        .addColumn('at_ms', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('decision_rule_pk', ['decision_id', 'policy', 'rule_id'])
        .execute();
      await db.schema
        .createIndex('decision_rule_rule_at')
        .ifNotExists()
        .on('decision_rule')
        .columns(['rule_id', 'at_ms', 'decision_id'])
        .execute();
      await db.schema
        .createTable('decision_label')
        .ifNotExists()
        .addColumn('decision_id', 'text', (c) => c.notNull())
        .addColumn('label', 'text', (c) => c.notNull())
        .addColumn('labelled_by', 'text', (c) => c.notNull())
        .addColumn('note', 'text')
        .addColumn('at_ms', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('decision_label_decision')
        .ifNotExists()
        .on('decision_label')
        .columns(['decision_id', 'at_ms'])
        .execute();
      await db.schema
        .createTable('decision_action')
        .ifNotExists()
        .addColumn('action_id', 'text', (c) => c.primaryKey())
        .addColumn('decision_id', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('target', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('detail', 'text', (c) => c.notNull())
        .addColumn('at_ms', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('decision_action_decision')
        .ifNotExists()
        .on('decision_action')
        .column('decision_id')
        .execute();
    },
  },
  // The writer retries a batch whose deadline passed (it may have landed after all): a label is
  // then the same row again, kept once. Retention by size sums line_bytes from an index, not the
  // table (whose rows carry whole lines). Listing by rule reads the rule's own index in page order.
  'decisions-002-store-indexes': {
    async up(db) {
      await db.schema
        .createIndex('decision_label_once')
        .ifNotExists()
        .unique()
        .on('decision_label')
        .columns(['decision_id', 'at_ms', 'labelled_by', 'label'])
        .execute();
      await db.schema
        .createIndex('decision_at_bytes')
        .ifNotExists()
        .on('decision')
        .columns(['at_ms', 'line_bytes'])
        .execute();
    },
  },
  // Measured over 1,000,000 decisions (bench/RESULTS.md, issue 25): a rule filter read every match
  // of the rule before paging (1.2 s for a common rule); the rule's page now walks this index in
  // page order. The rare flags (labelled, degraded, shadow disagreeing) get partial indexes, which
  // cost an insert nothing unless the flag is set.
  'decisions-003-filter-indexes': {
    async up(db) {
      await db.schema
        .createIndex('decision_rule_policy_rule_at')
        .ifNotExists()
        .on('decision_rule')
        .columns(['rule_id', 'policy', 'at_ms', 'decision_id'])
        .execute();
      await db.schema
        .createIndex('decision_label_at')
        .ifNotExists()
        .on('decision')
        .columns(['label', 'at_ms', 'decision_id'])
        .where(sql.ref('label'), 'is not', null)
        .execute();
      await db.schema
        .createIndex('decision_degraded_at')
        .ifNotExists()
        .on('decision')
        .columns(['at_ms', 'decision_id'])
        .where(sql.ref('degraded'), '=', sql.lit(1))
        .execute();
      await db.schema
        .createIndex('decision_shadow_disagrees_at')
        .ifNotExists()
        .on('decision')
        .columns(['at_ms', 'decision_id'])
        .where(sql.ref('shadow_disagrees'), '=', sql.lit(1))
        .execute();
    },
  },
  // Issue 32: every index is paid by each row written. bench/decision-store.ts (`--indexes`) lists
  // each with the query it serves; these two serve none: every rule query names its policy
  // (decision_rule_policy_rule_at), and a decision's labels are read by decision_label_once's prefix.
  'decisions-008-unread-indexes': {
    async up(db) {
      for (const name of ['decision_rule_rule_at', 'decision_label_decision'])
        await db.schema.dropIndex(name).ifExists().execute();
    },
  },
};
