import type { Component, LifecycleLog } from '../lifecycle/component.ts';
import {
  type DatabaseTarget,
  type FeatureMigrations,
  openDatabase,
  type RiskgateDatabase,
} from './database.ts';

/**
 * The database (RISKGATE_DATABASE) as a component: opened and migrated at start (a start that
 * cannot reach PostgreSQL fails, naming the failure), closed on stop. Its handle goes to the
 * features that keep tables in it (decisions, audit trail, lists, lock-outs).
 */
export function databaseComponent(o: {
  target: DatabaseTarget;
  /** Every feature's tables (src/service/database-migrations.ts). */
  migrations: FeatureMigrations;
  /** An open database instead (tests). Not closed on stop. */
  given?: RiskgateDatabase | undefined;
  log: LifecycleLog;
}): Component<RiskgateDatabase> {
  return {
    name: 'database',
    async start() {
      if (o.given !== undefined) return { handle: o.given };
      const database = await openDatabase(o.target, { migrations: o.migrations, log: o.log });
      o.log({ level: 'info', msg: 'database open', engine: database.engine });
      return {
        handle: database,
        health: () => ({ database: { engine: database.engine } }),
        stop: () => database.close(),
      };
    },
  };
}
