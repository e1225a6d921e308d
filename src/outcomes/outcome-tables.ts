import type { FeatureMigrations } from '../database/database.ts';

/**
 * The outcomes' part of the decision store (its types are in src/decision-store/decision-tables.ts):
 * `decision_outcome`, one row per (decision, type, value), so a repeated report is kept once (its
 * first `at`); and `decision.outcome_label`, the label the outcomes point to, beside the current
 * label (which is an analyst's when there is one). The outcomes of an account's recent decisions
 * (the `outcomes` input) are read from the account's decisions (decision_account_at) into this
 * table's primary key.
 */
export const outcomeMigrations: FeatureMigrations = {
  'outcomes-001-table': {
    async up(db) {
      await db.schema
        .createTable('decision_outcome')
        .ifNotExists()
        .addColumn('decision_id', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('value', 'text', (c) => c.notNull())
        .addColumn('reported_by', 'text', (c) => c.notNull())
        .addColumn('at_ms', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('decision_outcome_pk', ['decision_id', 'type', 'value'])
        .execute();
      await db.schema.alterTable('decision').addColumn('outcome_label', 'text').execute();
    },
  },
};
