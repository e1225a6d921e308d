import type { EventSink, RiskgateEvent } from '../events/riskgate-event.ts';
import type { AskUserLinks, AskUserQuestion } from './decide-ports.ts';
import type { DecideResponse } from './decide-response.ts';
import type { DecisionRun } from './run-decision.ts';

/**
 * A deny or a challenge told to the receivers that asked for it (RISKGATE_WEBHOOK_EVENTS:
 * `decision.denied`, `decision.challenged`). After the answer, never before: a webhook is not
 * promised to the caller, so an event the outbox did not hold is counted by the sink (and lost),
 * never an error of the decision.
 */
export function emitDecisionEvent(
  events: EventSink,
  run: DecisionRun,
  response: DecideResponse,
  askUser?: AskUserLinks | undefined,
): void {
  // Built only for a receiver that asked for it: a flood of denies allocates nothing for none.
  if (response.verdict === 'allow' || !events.wants(eventTypeOf(response.verdict))) return;
  const event = decisionEvent(run, response);
  if (event === undefined) return;
  const emit = (e: RiskgateEvent) => void events.emit(e).catch(() => {});
  const question = askUser === undefined ? undefined : askUserQuestion(run, response);
  if (question === undefined) {
    emit(event);
    return;
  }
  // A link the control database did not take is not sent: the event goes out without one
  // (counted by the links' component).
  askUser?.ask(question).then(
    (link) => emit({ ...event, data: { ...event.data, askUser: link } }),
    () => emit(event),
  );
}

/**
 * The "was this you?" question of a decision, when its policy asks (a matched rule with
 * `askUser: true`) about a known user; else undefined.
 */
export function askUserQuestion(run: DecisionRun, response: DecideResponse): AskUserQuestion | undefined {
  const ask = run.policy.askUser;
  const { userId } = run.request;
  if (ask === undefined || userId === undefined || response.verdict === 'allow') return undefined;
  if (!run.decision.matchedRules.some((r) => ask.ruleIds.has(r.id))) return undefined;
  return {
    decisionId: response.decisionId,
    accountId: run.request.accountId,
    userId,
    verdict: response.verdict,
    onNo: ask.onNo,
  };
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
