import { z } from 'zod';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import { DECISION_LOG_SCHEMA_VERSION } from '../decision-log/decision-record.ts';
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

const decisionIdSchema = z.uuid();

export function outcomeRoutes(o: OutcomeRoutesOptions): RouteMount {
  return {
    surface: 'caller',
    mount(app, edge) {
      app.on('POST', '/decisions/:decisionId/outcome', edge.admit());
      app.post(
        '/decisions/:decisionId/outcome',
        edge.keyAuth({ caller: edge.apiKeys, operator: o.operatorKeys }),
        edge.requireRole('analyst', { orCaller: true }),
        feedbackRateLimited(o.rateLimit),
        edge.audited,
        edge.limitBody(MAX_OUTCOME_BODY_BYTES),
        async (c) => {
          const id = decisionIdSchema.safeParse(c.req.param('decisionId'));
          if (!id.success) throw edge.inputError(pathError(id.error), 'The path');
          const decisionId = id.data;
          const outcome = await edge.readJsonBody(c, outcomeRequestSchema);
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

/** A bad decision id as the issue naming `decisionId`. */
function pathError(error: z.ZodError): z.ZodError {
  return new z.ZodError(error.issues.map((issue) => ({ ...issue, path: ['decisionId'] })));
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
