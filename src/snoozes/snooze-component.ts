import type { RiskgateDatabase } from '../database/database.ts';
import type { Component, LifecycleLog, MetricsRegistry } from '../lifecycle/component.ts';
import type { ListSyncOptions } from '../lists/list-sync.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { type SnoozeOperations, snoozeOperations, snoozeRoutes } from './snooze-routes.ts';
import { SnoozeStore } from './snooze-store.ts';
import { SnoozeSync } from './snooze-sync.ts';

/** What the rule snoozes give the rest of riskgate. */
export interface RuleSnoozes {
  /** The snapshot decisions read. */
  sync: SnoozeSync;
  /** The snoozes' reads and changes (the console's decision and rule pages). */
  operations: SnoozeOperations;
}

/**
 * Rule snoozes as a component: the first snapshot loaded at start (a database that does not
 * answer does not stop the start: decisions then see no snooze, and say so), kept current by
 * polling; the operator endpoints. Ended and expired snoozes stay in the table, for the record.
 */
export function snoozeComponent(o: {
  database: RiskgateDatabase;
  /** The active policy's rule ids. */
  ruleIds: () => readonly string[];
  /** Longest snooze, days (RISKGATE_MAX_SNOOZE_DAYS). */
  maxDays: number;
  log: LifecycleLog;
  /** Poll and staleness tuning (tests); the lists' by default. */
  sync?: Pick<ListSyncOptions, 'pollMs' | 'staleAfterMs' | 'poll'> | undefined;
  /** The service's clock. Default {@link systemClock}. */
  clock?: Clock | undefined;
}): Component<RuleSnoozes, MetricsRegistry> {
  return {
    name: 'snoozes',
    async start() {
      const store = new SnoozeStore(o.database);
      const clock = o.clock ?? systemClock;
      const sync = new SnoozeSync({ store, log: o.log, clock, ...o.sync });
      await sync.start();
      const deps = { store, sync, ruleIds: o.ruleIds, maxDays: o.maxDays, log: o.log, clock };
      const operations = snoozeOperations(deps);
      return {
        handle: { sync, operations },
        routes: [snoozeRoutes(deps, operations)],
        health: () => ({
          snoozes: {
            snapshotAgeMs: Math.round(sync.ageMs()),
            stale: !sync.read(clock.nowMs()).ok,
            active: sync.snapshot()?.size ?? 0,
          },
        }),
        observe(registry) {
          registry.observeGauge(
            'riskgate_snoozes_snapshot_age_seconds',
            "How long ago this process's rule snoozes were last confirmed current (stale past 10 s: decisions see no snooze, and say so)",
            () => sync.ageMs() / 1000,
          );
          registry.observeGauge(
            'riskgate_snoozes_active',
            "Rule snoozes in this process's snapshot",
            () => sync.snapshot()?.size ?? 0,
          );
          registry.observeGauge(
            'riskgate_snoozes_unreadable_rows',
            'Rule snoozes left out of the snapshot because their stored value cannot be read (hand-edited rows): the rule fires',
            () => sync.unreadableRows(),
          );
          registry.observeCounter(
            'riskgate_snoozes_refresh_failures_total',
            'Refreshes of the rule snoozes that failed (the database did not answer)',
            () => sync.failures,
          );
        },
        stop: () => sync.stop(),
      };
    },
  };
}
