import type { MiddlewareHandler } from 'hono';
import type { DecisionLog } from '../decision-log/decision-log.ts';
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

/** `POST /feedback`: an analyst's label on a decision, kept in the decision log for `riskgate replay --labels`. */
export function feedbackRoutes(o: FeedbackRoutesOptions): RouteMount {
  const recent = o.decisions;
  const limiter = o.rateLimit ?? new FeedbackRateLimit();
  return {
    surface: 'caller',
    mount(app, edge) {
      // Inside admission like /decide: it shares the decisions' CPU (503 when shed, never a verdict).
      app.on('POST', '/feedback', edge.admit());
      app.post(
        '/feedback',
        edge.keyAuth({ caller: edge.apiKeys, operator: o.operatorKeys }),
        // An operator labels with the analyst role; a caller key labels its own decisions, as before.
        edge.requireRole('analyst', { orCaller: true }),
        feedbackRateLimited(limiter),
        edge.audited,
        edge.limitBody(MAX_FEEDBACK_BODY_BYTES),
        async (c) => {
          const feedback = await edge.readJsonBody(c, feedbackRequestSchema);
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
