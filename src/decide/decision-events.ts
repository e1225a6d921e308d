import type { EventSink, RiskgateEvent } from '../events/riskgate-event.ts';
import type { DecideResponse } from './decide-response.ts';
import type { DecisionRun } from './run-decision.ts';

/**
 * A deny or a challenge told to the receivers that asked for it (RISKGATE_WEBHOOK_EVENTS:
 * `decision.denied`, `decision.challenged`). After the answer, never before: a webhook is not
 * promised to the caller, so an event the outbox did not hold is counted by the sink (and lost),
 * never an error of the decision.
 */
export function emitDecisionEvent(events: EventSink, run: DecisionRun, response: DecideResponse): void {
  // Built only for a receiver that asked for it: a flood of denies allocates nothing for none.
  if (response.verdict === 'allow' || !events.wants(eventTypeOf(response.verdict))) return;
  const event = decisionEvent(run, response);
  if (event !== undefined) events.emit(event).catch(() => {});
}

const eventTypeOf = (verdict: 'challenge' | 'deny') =>
  verdict === 'deny' ? ('decision.denied' as const) : ('decision.challenged' as const);

/** The event of a deny or a challenge (ids and rules only: no IP, no signal values); none for an allow. */
export function decisionEvent(run: DecisionRun, response: DecideResponse): RiskgateEvent | undefined {
  if (response.verdict === 'allow') return undefined;
  const type = eventTypeOf(response.verdict);
  const { request } = run;
  return {
    id: `${response.decisionId}:${type}`,
    type,
    at: run.receivedAt.toISOString(),
    data: {
      decisionId: response.decisionId,
      verdict: response.verdict,
      accountId: request.accountId,
      ...(request.userId !== undefined && { userId: request.userId }),
      rules: response.reasons.map((r) => r.id),
      degraded: response.degraded,
      policyRevision: response.policy.revision,
    },
  };
}
