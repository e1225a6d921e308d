import { auditMigrations } from '../audit/database-audit-trail.ts';
import type { FeatureMigrations } from '../database/database.ts';
import { decisionMigrations } from '../decision-store/decision-tables.ts';
import { ruleReportMigrations } from '../decision-store/rule-report-indexes.ts';
import { listMigrations } from '../lists/list-store.ts';
import { lockoutMigrations } from '../lockouts/lockout-tables.ts';

/** Every feature's tables: run at start by the database component. A feature adds its own here. */
export const ALL_MIGRATIONS: FeatureMigrations = {
  ...decisionMigrations,
  ...auditMigrations,
  ...listMigrations,
  ...lockoutMigrations,
  ...ruleReportMigrations,
};
