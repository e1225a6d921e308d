import type { ActionOutcome } from '../actions/action-dispatcher.ts';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import { actionLine } from '../decision-log/decision-record.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';

/**
 * Where a decision's actions end: each final outcome (done or failed, from the outbox over
 * any store, or an operator's drop) becomes an `action` line in the decision log and a metric;
 * a failure is also a service-log warning.
 */
export function actionOutcomeWriter(o: {
  decisionLog: Pick<DecisionLog, 'write'>;
  metrics: Pick<RiskgateMetrics, 'recordActionOutcome'>;
  log: (line: Record<string, unknown>) => void;
}): (outcome: ActionOutcome) => void {
  return (outcome) => {
    o.decisionLog.write(actionLine(outcome));
    o.metrics.recordActionOutcome(outcome.type, outcome.status);
    if (outcome.status === 'failed') o.log({ level: 'warn', msg: 'action failed', ...outcome });
  };
}
