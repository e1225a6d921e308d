import { askUserMigrations } from '../ask-user/ask-user-store.ts';
import { auditMigrations } from '../audit/database-audit-trail.ts';
import type { FeatureMigrations } from '../database/database.ts';
import { rejectMigrations } from '../decision-store/decision-rejects.ts';
import { decisionMigrations } from '../decision-store/decision-tables.ts';
import { hourCountMigrations } from '../decision-store/hour-counts.ts';
import { ruleReportMigrations } from '../decision-store/rule-report-indexes.ts';
import { listMigrations } from '../lists/list-store.ts';
import { lockoutMigrations } from '../lockouts/lockout-tables.ts';
import { outboxMigrations } from '../outbox/outbox-tables.ts';
import { outcomeMigrations } from '../outcomes/outcome-tables.ts';
import { policyVersionMigrations } from '../policy-versions/policy-version-tables.ts';
import { reviewMigrations } from '../review-queue/review-store.ts';
import { snoozeMigrations } from '../snoozes/snooze-store.ts';

/**
 * Control state: the system of record (lists, rule snoozes, "was this you?" links, review cases, lock-outs, the outbox, the audit trail, policy versions). Transactional,
 * never lost in silence; unreadable means unavailable (docs/architecture.md, "Two kinds of state").
 * A feature that keeps control state adds its migrations here.
 */
export const CONTROL_MIGRATIONS: FeatureMigrations = {
  ...auditMigrations,
  ...askUserMigrations,
  ...listMigrations,
  ...lockoutMigrations,
  ...outboxMigrations,
  ...policyVersionMigrations,
  ...snoozeMigrations,
  ...reviewMigrations,
};

/** Observations: the decision store (best effort, bounded, may drop with an exact count). */
export const DECISION_MIGRATIONS: FeatureMigrations = {
  ...decisionMigrations,
  ...ruleReportMigrations,
  ...hourCountMigrations,
  ...rejectMigrations,
  ...outcomeMigrations,
};

/** Every feature's tables: one database holding both kinds (PostgreSQL, memory; tests). */
export const ALL_MIGRATIONS: FeatureMigrations = { ...DECISION_MIGRATIONS, ...CONTROL_MIGRATIONS };
