import type { Component, LifecycleLog, MetricsRegistry } from '../lifecycle/component.ts';
import type { FeatureMigrations, RiskgateDatabase } from './database.ts';
import { openStateDatabases, type StateDatabases, type StateTarget, sharedState } from './state-databases.ts';

/**
 * The state (RISKGATE_DATABASE) as a component: both kinds opened and migrated at start, closed on
 * stop (src/database/state-databases.ts). Its `control` handle goes to the features that keep the
 * system of record (audit trail, lists, lock-outs, outbox), its `decisions` handle to the decision
 * store and what reads it (the rule report, the console). A start that cannot reach PostgreSQL
 * fails, naming the failure; an embedded file never stops a start: a damaged control file starts
 * riskgate degraded (an alarm on /healthz, `riskgate_control_state_unavailable 1`), a damaged
 * decisions file is set aside.
 */
export function databaseComponent(o: {
  target: StateTarget;
  /** The control state's tables (src/service/database-migrations.ts). */
  controlMigrations: FeatureMigrations;
  /** The decision store's tables. */
  decisionMigrations: FeatureMigrations;
  /** An open database for both kinds instead (tests). Not closed on stop. */
  given?: RiskgateDatabase | undefined;
  log: LifecycleLog;
}): Component<StateDatabases, MetricsRegistry> {
  return {
    name: 'database',
    async start() {
      const state: StateDatabases =
        o.given === undefined
          ? await openStateDatabases(o.target, {
              controlMigrations: o.controlMigrations,
              decisionMigrations: o.decisionMigrations,
              log: o.log,
            })
          : sharedState(o.given, { closes: false });
      const engine = state.control.engine;
      const dir = o.given === undefined && o.target.kind === 'sqlite' ? o.target.dir : undefined;
      o.log({ level: 'info', msg: 'database open', engine, ...(dir !== undefined && { dir }) });
      return {
        handle: state,
        health: () => {
          const alarms = state.alarms();
          return {
            database: { engine },
            state: state.status(),
            ...(alarms.length > 0 && { alarms }),
          };
        },
        observe(metrics) {
          metrics.observeGauge(
            'riskgate_control_state_unavailable',
            '1 while control state (lists, lock-outs, outbox, audit trail) cannot be read or written: a damaged, missing, deleted or replaced control file; lists are unavailable to decisions, operator changes answer 503',
            () => (state.status().control.available ? 0 : 1),
          );
          metrics.observeCounter(
            'riskgate_decisions_file_set_aside',
            'Decisions files moved aside (decisions.sqlite.corrupt-<ts>) because they could not be opened or were damaged',
            () => state.status().decisions.setAside,
          );
          metrics.observeCounter(
            'riskgate_decisions_file_recreated',
            'Fresh decisions files made where one had been (missing at start, set aside, deleted or replaced while running): the decisions it held are not in the store',
            () => state.status().decisions.recreated,
          );
        },
        stop: () => state.close(),
      };
    },
  };
}
