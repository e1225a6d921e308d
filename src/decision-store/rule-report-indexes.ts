import { sql } from 'kysely';
import type { FeatureMigrations } from '../database/database.ts';

/**
 * The indexes the rule report reads through (src/decision-store/rule-report-query.ts): each of its
 * queries is a range scan of one index holding every column it reads, grouped in index order where
 * it groups, so a report over 1,000,000 decisions scans index entries, never table rows, and sorts
 * nothing big (bench/RESULTS.md, issue 25). The two label indexes are partial: only labelled
 * decisions, a few per cent, cost a write.
 */
export const ruleReportMigrations: FeatureMigrations = {
  'decisions-002-rule-report': {
    async up(db) {
      const indexes: [name: string, table: string, columns: string[], labelledOnly?: true][] = [
        // Decisions per window of the active and of the shadow revision.
        ['decision_revision_at', 'decision', ['policy_revision', 'at_ms']],
        ['decision_shadow_revision_at', 'decision', ['shadow_revision', 'at_ms']],
        // The agreement matrix: each (verdict, shadow verdict) cell's range in order.
        [
          'decision_agreement',
          'decision',
          ['policy_revision', 'shadow_revision', 'verdict', 'shadow_verdict', 'at_ms'],
        ],
        // Precision and recall: the labelled decisions of a revision.
        ['decision_revision_labelled', 'decision', ['policy_revision', 'label', 'at_ms'], true],
        ['decision_shadow_revision_labelled', 'decision', ['shadow_revision', 'label', 'at_ms'], true],
        // Fires: each rule's range of the revision, in rule order.
        ['decision_rule_revision', 'decision_rule', ['policy_revision', 'policy', 'rule_id', 'at_ms']],
      ];
      for (const [name, table, columns, labelledOnly] of indexes) {
        let index = db.schema.createIndex(name).ifNotExists().on(table).columns(columns);
        if (labelledOnly) index = index.where(sql<boolean>`label is not null`);
        await index.execute();
      }
    },
  },
  // Issue 33, the rule history (src/decision-store/rule-history-query.ts): a policy name's
  // revisions by a skip scan, each one's first and last decision by a seek.
  'decisions-005-rule-history': {
    async up(db) {
      await db.schema
        .createIndex('decision_name_revision_at')
        .ifNotExists()
        .on('decision')
        .columns(['policy_name', 'policy_revision', 'at_ms'])
        .execute();
    },
  },
};
