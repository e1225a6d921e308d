import type { RiskgateConfig } from '../config/riskgate-config.ts';
import type { Component, LifecycleLog, MetricsRegistry } from '../lifecycle/component.ts';
import { createFeatureReader, type FeatureReader } from './feature-reader.ts';
import type { FeatureStore } from './feature-store.ts';
import { openFeatureStore } from './open-feature-store.ts';

/** A failing store's warning is logged at most once per this long, milliseconds. */
const RECORD_ERROR_LOG_EVERY_MS = 10_000;

/**
 * The feature store (velocity counters, history) and the per-decision reader over it: opened from
 * `config.featureStore` unless `given` (a cluster worker passes the primary's over IPC), closed on
 * stop either way.
 */
export function featureComponent(o: {
  config: RiskgateConfig;
  given?: FeatureStore | undefined;
  /** Whether the Log API feeds the history (without it nothing does). */
  historyConfigured: boolean;
  /** Whether the active policy reads history (a warning when nothing feeds it). */
  policyReadsHistory: () => boolean;
  log: LifecycleLog;
}): Component<{ store: FeatureStore; reader: FeatureReader }, MetricsRegistry> {
  const { log } = o;
  return {
    name: 'feature store',
    async start() {
      const store = o.given ?? (await openFeatureStore(o.config));
      let recordErrors = 0;
      let errorLoggedAt = 0;
      // Without the Log API nothing feeds the history: said once here, not as a degradation per decision.
      if (!o.historyConfigured && o.policyReadsHistory())
        log({
          level: 'warn',
          msg: 'the policy reads history but the Log API is not configured (RISKGATE_LOGS_URL, RISKGATE_LOG_API_KEY): history is not_configured in every decision and its rules are skipped',
        });
      const reader = createFeatureReader({
        store,
        historyConfigured: o.historyConfigured,
        onRecordError: (error) => {
          recordErrors++;
          // A store that is down fails every decision's count.
          if (Date.now() - errorLoggedAt < RECORD_ERROR_LOG_EVERY_MS) return;
          errorLoggedAt = Date.now();
          log({
            level: 'warn',
            msg: 'velocity counts not recorded: feature store failing',
            error: error.message,
          });
        },
      });
      return {
        handle: { store, reader },
        stop: () => store.close(),
        observe(metrics) {
          metrics.observeCounter(
            'riskgate_feature_store_record_errors',
            'Decisions whose velocity counts the feature store did not take (it was down or slow)',
            () => recordErrors,
          );
        },
      };
    },
  };
}
