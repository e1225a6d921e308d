import { randomUUID } from 'node:crypto';
import type { Context } from 'hono';
import type { ShedReason } from '../admission/admission-control.ts';
import { DECISION_LOG_SCHEMA_VERSION } from '../decision-log/decision-record.ts';
import { createKeyVerifier, presentedKey } from '../edge/caller-auth.ts';
import type { DecideDeps } from './decide-deps.ts';
import { overloadResponse } from './decide-response.ts';

/**
 * A shed decision's answer when the active policy names an overload verdict (`overload` in the
 * policy): that verdict, degraded, reason `overloaded`, nothing fetched or evaluated, logged like
 * any decision; only for a valid caller key. Undefined (admission answers 503 with Retry-After)
 * when the policy names none, the key is not a caller's, or the decision log cannot record it under
 * RISKGATE_DECISION_LOG_ON_FAILURE=refuse (this answer comes before the audit gate, and a shed
 * decision is a decision all the same: none goes unaudited).
 */
export function overloadAnswer(deps: DecideDeps): (c: Context, reason: ShedReason) => Response | undefined {
  const verify = createKeyVerifier(deps.apiKeys);
  return (c, reason) => {
    const startedAt = performance.now();
    const policy = deps.decide.policies.current();
    const key = presentedKey(c.req.header('authorization'));
    if (policy.overloadVerdict === undefined || key === undefined || !verify(key)) return undefined;
    if (deps.auditRequired !== undefined && !deps.auditRequired()) return undefined;
    const response = overloadResponse(
      policy,
      policy.overloadVerdict,
      randomUUID(),
      performance.now() - startedAt,
    );
    deps.metrics.recordShed(reason, 'verdict');
    deps.decisionLog.write({
      kind: 'decision',
      schemaVersion: DECISION_LOG_SCHEMA_VERSION,
      decisionId: response.decisionId,
      at: new Date().toISOString(),
      policy: response.policy,
      outcome: { verdict: response.verdict, score: 0, decidedBy: 'overload', shed: reason },
      actions: [],
      degraded: true,
      reason: 'overloaded',
    });
    return c.json(response, 200);
  };
}
