import type { DecisionSpan } from '../observability/tracing.ts';
import type { DecideDeps } from './decide-deps.ts';
import type { DecideResponse } from './decide-response.ts';
import { emitDecisionEvent } from './decision-events.ts';
import { decisionLine, type ShadowOutcome } from './decision-line.ts';
import type { DecisionRun } from './run-decision.ts';

/**
 * A decision's work after its answer (run on the next turn, `setImmediate`): action and
 * feature-read metrics, velocity counts, rule hits and statistics, the shadow policy on the same
 * inputs, the decision log line, the deny or challenge event (webhooks), decision metrics, the
 * span's end.
 */
export function afterDecision(
  deps: DecideDeps,
  run: DecisionRun,
  response: DecideResponse,
  totalMs: number,
  span: DecisionSpan | undefined,
): void {
  const { decision, policy } = run;
  for (const action of response.actions) deps.metrics.recordActionAnswer(action.type, action.status);
  // The feature store's reads, beside the vendor's calls: latency, and failures by reason.
  for (const call of run.calls) {
    if (call.name === 'velocity' || call.name === 'history') {
      deps.metrics.recordUpstreamCall(
        'features',
        call.name,
        call.durationMs,
        call.outcome === 'ok' ? undefined : call.outcome,
      );
    }
  }
  // Counted once decided (the answer is out): a request never counts itself twice.
  if (run.counters !== undefined)
    deps.decide.features?.record(run.counters, response.verdict, run.receivedAt.getTime());
  deps.metrics.recordRuleHits('active', policy.revision, decision.matchedRules);
  deps.ruleStats?.record('active', decision.policy, policy.ruleIds ?? [], decision.matchedRules);
  let shadow: ShadowOutcome | undefined;
  if (run.shadow !== undefined) {
    // The candidate on the same inputs, after the answer; its actions are never taken.
    const s = run.shadow.policy.evaluate(run.shadow.input);
    deps.metrics.recordShadow(decision.verdict, s.verdict);
    deps.metrics.recordRuleHits('shadow', s.policy.revision, s.matchedRules);
    deps.ruleStats?.record('shadow', s.policy, run.shadow.policy.ruleIds ?? [], s.matchedRules);
    shadow = {
      policy: s.policy,
      verdict: s.verdict,
      score: s.score,
      rules: s.matchedRules.map((r) => r.id),
      ...(run.shadow.shadowOnly.length > 0 && {
        shadowOnlyInputs: run.shadow.shadowOnly.map((n) => `signals.${n}`),
      }),
    };
  }
  deps.decisionLog.write(decisionLine(run, response, totalMs, shadow));
  if (deps.events !== undefined) emitDecisionEvent(deps.events, run, response, deps.askUser);
  deps.metrics.recordDecision(response.verdict, response.degraded, totalMs);
  span?.end({ verdict: response.verdict, degraded: response.degraded, policyRevision: run.policy.revision });
}
