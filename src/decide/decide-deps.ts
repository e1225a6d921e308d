import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import type { AdmissionControl } from '../admission/admission-control.ts';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import type { EventSink } from '../events/riskgate-event.ts';
import type { LockoutSink } from '../lockouts/lockout-record.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import type { DecisionTracing } from '../observability/tracing.ts';
import type { RuleStats } from '../policy/rule-stats.ts';
import type { AskUserLinks, PolicySource, SignalsPort } from './decide-ports.ts';
import type { RunDecisionDeps } from './run-decision.ts';

/** What the /decide room is built from (src/decide/decide-route.ts): components, no behaviour. */

/** What a decision reads: the clients, the policies, the deadline (`RunDecisionDeps`). */
export interface DecideInputs extends Omit<RunDecisionDeps, 'signals' | 'policies'> {
  /** The Trust Signals client. */
  signals: SignalsPort;
  /** The active policy; `status()` also serves `GET /policies`. */
  policies: PolicySource & { status(): object };
}

export interface DecideDeps {
  decide: DecideInputs;
  /** Caller keys: only a caller's key is answered the policy's overload verdict. */
  apiKeys: readonly string[];
  /** Sheds decisions under overload (src/admission/); without it every decision is started. */
  admission?: AdmissionControl | undefined;
  actions: ActionDispatcher;
  /** Where a deny or a challenge is told (signed webhooks, when configured); off the answer's path. */
  events?: EventSink | undefined;
  /** Makes the "was this you?" links a policy asks for, carried by the decision's event (src/ask-user/). */
  askUser?: AskUserLinks | undefined;
  /** Told the lock-outs each decision drove or withheld, after its answer (never waited for). */
  lockouts?: LockoutSink | undefined;
  decisionLog: DecisionLog;
  metrics: RiskgateMetrics;
  /** Rule hit counts for `GET /policies/stats` (active and shadow). */
  ruleStats?: RuleStats | undefined;
  tracing?: DecisionTracing | undefined;
  /**
   * With RISKGATE_DECISION_LOG_ON_FAILURE=refuse: whether the decision log is writing. The app's
   * audit gate refuses decisions while it is not; the overload verdict, answered before that gate,
   * asks it too.
   */
  auditRequired?: (() => boolean) | undefined;
  /** One structured service-log line. Never a secret. */
  log: (line: Record<string, unknown>) => void;
}
