import type { MiddlewareHandler } from 'hono';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import { AUDITED_CHANGE, declareRoute } from '../edge/route-declaration.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { Component, RouteMount } from '../lifecycle/component.ts';
import { problemOf, problemResponse } from '../problem/problem-details.ts';
import type { DecisionMemory } from './decision-memory.ts';
import { FeedbackRateLimit } from './feedback-rate-limit.ts';
import { feedbackRequestSchema, MAX_FEEDBACK_BODY_BYTES } from './feedback-request.ts';
import { RecentDecisions } from './recent-decisions.ts';
import { assertLabelsKept, recordLabel } from './record-label.ts';

export interface FeedbackRoutesOptions {
  /**
   * The recent decisions and the key each was answered to (the /decide handler remembers them):
   * this process's, or the cluster primary's over IPC.
   */
  decisions: DecisionMemory;
  /** Per-key rate limit. Default the `FeedbackRateLimit` defaults. */
  rateLimit?: FeedbackRateLimit | undefined;
  /** Operator keys: they may label any decision. */
  operatorKeys: readonly string[];
  /** Where feedback is kept. */
  decisionLog: DecisionLog;
}

/**
 * Per-key token bucket in front of /feedback (and an outcome's report, src/outcomes/): 429 with
 * Retry-After (seconds) past the key's rate.
 */
export function feedbackRateLimited(limiter: FeedbackRateLimit): MiddlewareHandler {
  return async (c, next) => {
    const waitMs = limiter.take(c.get('principal').keyId, performance.now());
    if (waitMs !== undefined) {
      return problemResponse(
        problemOf(
          ErrorCode.RATE_LIMITED,
          'This key sends feedback faster than its rate (RISKGATE_FEEDBACK_RATE).',
        ),
        { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) },
      );
    }
    await next();
  };
}

/** `POST /feedback`, declared once. */
export const FEEDBACK_ROUTE = declareRoute({
  method: 'post',
  path: '/feedback',
  surface: 'caller',
  operationId: 'feedback',
  summary: 'Label a decision fraud or legit (for replay --labels)',
  description:
    'With the caller key that asked for the decision, or an operator key with the analyst role (which labels any decision, recorded in the audit trail first).',
  security: [{ callerKey: [] }, { opsKey: [] }],
  body: {
    schema: { component: 'FeedbackRequest', schema: feedbackRequestSchema },
    maxBytes: MAX_FEEDBACK_BODY_BYTES,
  },
  responses: {
    202: {
      description: 'Recorded in the decision log as a `feedback` line, with the id of the key that sent it.',
      schema: 'FeedbackResponse',
    },
  },
  problems: {
    [ErrorCode.INVALID_INPUT]:
      'Invalid JSON, a decisionId that is not a UUID, or a label other than fraud or legit; `field` names it.',
    [ErrorCode.UNAUTHENTICATED]: 'Missing or unknown key (a caller key, or an operator key).',
    [ErrorCode.FORBIDDEN]: 'An operator whose role is below analyst (the detail names both roles).',
    ...AUDITED_CHANGE,
    [ErrorCode.NOT_FOUND]:
      'No decision with this id made with this caller key that this riskgate remembers (an operator key labels any).',
    [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_FEEDBACK_BODY_BYTES} bytes.`,
    [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'Content type other than application/json.',
    [ErrorCode.RATE_LIMITED]:
      'This key sends feedback past its rate (RISKGATE_FEEDBACK_RATE, RISKGATE_FEEDBACK_BURST).',
    [ErrorCode.OVERLOADED]: 'Shed by admission control, like a decision.',
    [ErrorCode.DECISION_LOG_UNAVAILABLE]:
      'RISKGATE_DECISION_LOG is off (the label would be lost), or failing with RISKGATE_DECISION_LOG_ON_FAILURE=refuse.',
    [ErrorCode.FEEDBACK_UNAVAILABLE]:
      'With RISKGATE_WORKERS > 1: the primary, which keeps the recent decisions, did not answer in time.',
  },
});

/** `POST /feedback`: an analyst's label on a decision, kept in the decision log for `riskgate replay --labels`. */
export function feedbackRoutes(o: FeedbackRoutesOptions): RouteMount {
  const recent = o.decisions;
  const limiter = o.rateLimit ?? new FeedbackRateLimit();
  return {
    surface: 'caller',
    routes: [FEEDBACK_ROUTE],
    mount(app, edge) {
      FEEDBACK_ROUTE.mount(
        app,
        // Inside admission like /decide: it shares the decisions' CPU (503 when shed, never a verdict).
        edge.admit(),
        edge.keyAuth({ caller: edge.apiKeys, operator: o.operatorKeys }),
        // An operator labels with the analyst role; a caller key labels its own decisions, as before.
        edge.requireRole('analyst', { orCaller: true }),
        feedbackRateLimited(limiter),
        edge.audited,
        async (c) => {
          const feedback = await FEEDBACK_ROUTE.bodyOf(c);
          const principal = c.get('principal');
          // An operator's label is a change: audited before it is made (refused when it cannot be).
          assertLabelsKept(o.decisionLog);
          if (principal.role === 'operator') {
            await edge.recordChange(c, {
              action: 'decision.label',
              target: feedback.decisionId,
              detail: { label: feedback.label, ...(feedback.note !== undefined && { note: feedback.note }) },
            });
          }
          const recorded = await recordLabel(
            { decisions: recent, decisionLog: o.decisionLog },
            {
              ...feedback,
              keyId: principal.keyId,
              as: principal.role,
              operatorName: principal.operator?.name,
            },
          );
          return c.json(recorded, 202);
        },
      );
    },
  };
}

/**
 * Feedback as a component: the recent decisions (its handle, which the /decide handler fills;
 * `given` by a cluster worker: the primary's over IPC) and `POST /feedback` on the caller surface.
 */
export function feedbackComponent(o: {
  given?: DecisionMemory | undefined;
  maxDecisions: number;
  ratePerSecond: number;
  burst: number;
  operatorKeys: readonly string[];
  decisionLog: DecisionLog;
}): Component<DecisionMemory> {
  return {
    name: 'feedback',
    start() {
      const decisions = o.given ?? new RecentDecisions({ maxDecisions: o.maxDecisions });
      const rateLimit = new FeedbackRateLimit({ ratePerSecond: o.ratePerSecond, burst: o.burst });
      return {
        handle: decisions,
        routes: [
          feedbackRoutes({ decisions, rateLimit, operatorKeys: o.operatorKeys, decisionLog: o.decisionLog }),
        ],
      };
    },
  };
}
