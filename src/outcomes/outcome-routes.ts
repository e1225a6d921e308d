import { z } from 'zod';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import { DECISION_LOG_SCHEMA_VERSION } from '../decision-log/decision-record.ts';
import { AUDITED_CHANGE, declareRoute } from '../edge/route-declaration.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { DecisionMemory } from '../feedback/decision-memory.ts';
import type { FeedbackRateLimit } from '../feedback/feedback-rate-limit.ts';
import { feedbackRateLimited } from '../feedback/feedback-routes.ts';
import { assertLabelsKept } from '../feedback/record-label.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import {
  MAX_OUTCOME_BODY_BYTES,
  type OutcomeRequest,
  type OutcomeResponse,
  outcomeRequestSchema,
  outcomeValue,
} from './outcome-request.ts';

/**
 * `POST /decisions/{decisionId}/outcome` on the caller surface: the login backend tells riskgate
 * what became of a login (the step-up's result, a later account event). Authorised as
 * `POST /feedback` is: the caller key that was answered the decision (the recent decisions,
 * src/feedback/), or an operator with the `analyst` role (audited) for a decision in the store. Kept
 * as an `outcome` line of the decision log, which feeds the decision store; answered once the store
 * has it (or `settle` gave up) and the rule report was told, so the Rules page shows it at once.
 */
export interface OutcomeRoutesOptions {
  decisions: DecisionMemory;
  /** Where outcomes are kept (the decision log, teed into the decision store). */
  decisionLog: DecisionLog;
  operatorKeys: readonly string[];
  rateLimit: FeedbackRateLimit;
  /** Whether the decision store holds `decisionId` (an operator's report: any decision it has). */
  stored(decisionId: string): Promise<boolean>;
  /** Waits (bounded) for the store to hold what was just written, and drops cached reports of it. */
  settle(): Promise<void>;
}

/** `POST /decisions/{decisionId}/outcome`, declared once. */
export const OUTCOME_ROUTE = declareRoute({
  method: 'post',
  path: '/decisions/{decisionId}/outcome',
  surface: 'caller',
  operationId: 'reportOutcome',
  summary: 'Report what became of a login: the step-up result or a later account event',
  description:
    'With the caller key that asked for the decision, or an operator key with the analyst role (for a decision in the decision store, recorded in the audit trail first). Kept with the decision; a failed step-up after a challenge and a user-reported fraud point to fraud, a passed step-up after a challenge to legit, below any analyst label (README, "Outcomes from the login backend"). Answered once the decision store has it: the rule report counts it at once.',
  security: [{ callerKey: [] }, { opsKey: [] }],
  params: z.object({ decisionId: z.uuid().describe('The `decisionId` of a /decide answer (a UUID).') }),
  body: {
    schema: { component: 'OutcomeRequest', schema: outcomeRequestSchema },
    maxBytes: MAX_OUTCOME_BODY_BYTES,
  },
  responses: {
    202: {
      description:
        'Recorded in the decision log as an `outcome` line and in the decision store; the same outcome again is kept once.',
      schema: 'OutcomeResponse',
    },
  },
  problems: {
    [ErrorCode.INVALID_INPUT]:
      'Invalid JSON, a decisionId that is not a UUID, an unknown type, result or event, or an `at` that is not RFC 3339; `field` names it.',
    [ErrorCode.UNAUTHENTICATED]: 'Missing or unknown key (a caller key, or an operator key).',
    [ErrorCode.FORBIDDEN]: 'An operator whose role is below analyst (the detail names both roles).',
    ...AUDITED_CHANGE,
    [ErrorCode.NOT_FOUND]:
      'No decision with this id made with this caller key that this riskgate remembers (an operator key: none in the decision store).',
    [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_OUTCOME_BODY_BYTES} bytes.`,
    [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'Content type other than application/json.',
    [ErrorCode.RATE_LIMITED]:
      'This key reports past its rate (RISKGATE_FEEDBACK_RATE, RISKGATE_FEEDBACK_BURST, a bucket of its own).',
    [ErrorCode.OVERLOADED]: 'Shed by admission control, like a decision.',
    [ErrorCode.DECISION_LOG_UNAVAILABLE]:
      'RISKGATE_DECISION_LOG is off (the outcome would be lost), or failing with RISKGATE_DECISION_LOG_ON_FAILURE=refuse.',
    [ErrorCode.FEEDBACK_UNAVAILABLE]:
      'With RISKGATE_WORKERS > 1: the primary, which keeps the recent decisions, did not answer in time.',
  },
});

export function outcomeRoutes(o: OutcomeRoutesOptions): RouteMount {
  return {
    surface: 'caller',
    routes: [OUTCOME_ROUTE],
    mount(app, edge) {
      OUTCOME_ROUTE.mount(
        app,
        // Inside admission like /decide and /feedback: it shares the decisions' CPU.
        edge.admit(),
        edge.keyAuth({ caller: edge.apiKeys, operator: o.operatorKeys }),
        edge.requireRole('analyst', { orCaller: true }),
        feedbackRateLimited(o.rateLimit),
        edge.audited,
        async (c) => {
          const { decisionId } = OUTCOME_ROUTE.pathOf(c);
          const outcome = await OUTCOME_ROUTE.bodyOf(c);
          const principal = c.get('principal');
          assertLabelsKept(o.decisionLog);
          const operator = principal.role === 'operator';
          const known = operator
            ? await o.stored(decisionId)
            : await o.decisions.answered(decisionId, principal.keyId);
          if (!known) {
            throw new RiskgateError(
              ErrorCode.NOT_FOUND,
              `No recent decision ${decisionId} made with this key (an outcome takes the key that asked for the decision, or an operator key for a decision in the store).`,
            );
          }
          if (operator) {
            await edge.recordChange(c, {
              action: 'decision.outcome',
              target: decisionId,
              detail: { type: outcome.type, value: outcomeValue(outcome) },
            });
          }
          const answer = writeOutcome(o.decisionLog, decisionId, outcome, {
            keyId: principal.keyId,
            as: principal.role,
            operatorName: principal.operator?.name,
          });
          await o.settle();
          return c.json(answer, 202);
        },
      );
    },
  };
}

/** Writes the `outcome` line of the decision log; returns the answer. */
function writeOutcome(
  decisionLog: DecisionLog,
  decisionId: string,
  outcome: OutcomeRequest,
  by: { keyId: string; as: 'caller' | 'operator'; operatorName?: string | undefined },
): OutcomeResponse {
  const recordedAt = new Date().toISOString();
  const at = outcome.at === undefined ? recordedAt : new Date(outcome.at).toISOString();
  const value = outcomeValue(outcome);
  decisionLog.write({
    kind: 'outcome',
    schemaVersion: DECISION_LOG_SCHEMA_VERSION,
    at: recordedAt,
    decisionId,
    type: outcome.type,
    value,
    occurredAt: at,
    reportedBy: by.keyId,
    reportedAs: by.as,
    ...(by.operatorName !== undefined && { operator: by.operatorName }),
  });
  return {
    decisionId,
    type: outcome.type,
    value,
    at,
    recordedAt,
    reportedBy: by.keyId,
  };
}
