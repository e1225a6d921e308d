import type { RiskgateConfig } from '../config/riskgate-config.ts';
import {
  type Component,
  type LifecycleLog,
  type MetricsRegistry,
  stopWaitMs,
} from '../lifecycle/component.ts';
import { DECISION_LOG_CLOSE_TIMEOUT_MS, type DecisionLog, openDecisionLog } from './decision-log.ts';
import { createRedactor } from './log-redaction.ts';

/**
 * The decision log: opened from `config.decisionLog` unless `given` (tests collect lines), closed
 * (flushed, bounded by DECISION_LOG_CLOSE_TIMEOUT_MS) on stop either way. Its health shows in
 * `/healthz`; with RISKGATE_DECISION_LOG_ON_FAILURE=refuse, `/readyz` is not ready while it fails.
 */
export function decisionLogComponent(o: {
  config: Pick<
    RiskgateConfig,
    'decisionLog' | 'decisionLogOnFailure' | 'decisionLogRedaction' | 'decisionLogHashKey'
  >;
  given?: DecisionLog | undefined;
  log: LifecycleLog;
}): Component<DecisionLog, MetricsRegistry> {
  const { config, log } = o;
  return {
    name: 'decision log',
    start() {
      const decisionLog =
        o.given ??
        openDecisionLog(config.decisionLog, {
          onError: (e) => log({ level: 'error', msg: 'decision log write failed', error: e.message }),
          onHealthChange: (ok) =>
            log(
              ok
                ? { level: 'info', msg: 'decision log writing again' }
                : {
                    level: 'error',
                    msg: 'decision log failing: decisions are not being recorded',
                    onFailure: config.decisionLogOnFailure,
                  },
            ),
          redact: createRedactor(config.decisionLogRedaction, config.decisionLogHashKey),
        });
      const writing = () => decisionLog.health?.().ok ?? true;
      return {
        handle: decisionLog,
        // Bounded: a stuck destination cannot hold the exit.
        stop: (deadlineAtMs) => decisionLog.close(stopWaitMs(deadlineAtMs, DECISION_LOG_CLOSE_TIMEOUT_MS)),
        ...(decisionLog.health !== undefined && { health: () => ({ decisionLog: decisionLog.health!() }) }),
        ...(config.decisionLogOnFailure === 'refuse' && {
          ready: (): Record<string, boolean> => (writing() ? {} : { decisionLog: false }),
        }),
        observe(metrics) {
          metrics.observeCounter(
            'riskgate_decision_log_dropped_records',
            'Decision log records dropped under sustained backpressure',
            () => decisionLog.dropped,
          );
          metrics.observeGauge(
            'riskgate_decision_log_healthy',
            '1 while decision log records reach their destination, 0 while it fails (decisions go unrecorded)',
            () => (writing() ? 1 : 0),
          );
        },
      };
    },
  };
}
