import { Hono, type MiddlewareHandler } from 'hono';
import { admit } from '../admission/admit.ts';
import { limitBody, readJsonBody } from '../edge/json-body.ts';
import { InputError } from '../errors/riskgate-error.ts';
import { mismatchMessage } from '../subject/subject-binding.ts';
import { afterDecision } from './after-decision.ts';
import { startActions } from './decide-actions.ts';
import type { DecideDeps } from './decide-deps.ts';
import { signalFetcher } from './decide-ports.ts';
import { decideRequestSchema, MAX_DECIDE_BODY_BYTES } from './decide-request.ts';
import { buildDecideResponse, serverTiming } from './decide-response.ts';
import { overloadAnswer } from './overload-answer.ts';
import { type RunDecisionDeps, runDecision } from './run-decision.ts';

/**
 * `POST /decide`, the whole room: admission (and the overload answer), the edge's guards, the body,
 * the decision (`runDecision`), the subject check, the actions (`startActions`), the answer with
 * `Server-Timing`, and the work after it (`afterDecision`). The app mounts it with `app.route()`.
 */

export interface DecideEdge {
  /**
   * The app's guards between admission and the body, in order (the caller key, the audit gate):
   * the same as its other caller endpoints'.
   */
  guards: readonly MiddlewareHandler[];
  /** Told each answered decision and the key it answered, before the answer leaves (feedback). */
  recent: { remember(decisionId: string, keyId: string): void };
}

/** The sub-app serving `POST /decide`. */
export function decideRoutes(deps: DecideDeps, edge: DecideEdge): Hono {
  const runDeps: RunDecisionDeps = { ...deps.decide, signals: signalFetcher(deps.decide.signals) };
  const app = new Hono();
  app.post(
    '/decide',
    admit({ admission: deps.admission, metrics: deps.metrics, answerShed: overloadAnswer(deps) }),
    ...edge.guards,
    limitBody(MAX_DECIDE_BODY_BYTES),
    async (c) => {
      const startedAt = performance.now();
      const request = await readJsonBody(c, decideRequestSchema);
      const span = deps.tracing?.startDecision(c.req.header('traceparent'), c.req.header('tracestate'), {
        method: 'POST',
        url: c.req.url,
        route: '/decide',
        userAgent: c.req.header('user-agent'),
      });
      const { arrivedAtMs } = c.get('admission');
      // A caller that hangs up ends the fan-out: its upstream calls free their sockets for others.
      const run = await runDecision(runDeps, request, span?.traceparent, c.req.raw.signal, arrivedAtMs);
      if (run.subject.status === 'mismatch') {
        // A caller naming someone else's Admin ids: refused, logged, nothing done to anyone.
        const field = run.subject.field;
        deps.log({
          level: 'warn',
          msg: 'decision refused: subject mismatch',
          decisionId: run.decisionId,
          field,
        });
        span?.end({ verdict: 'refused', degraded: false, policyRevision: run.policy.revision, status: 400 });
        throw new InputError(mismatchMessage(field), [{ field, message: mismatchMessage(field) }]);
      }
      const response = buildDecideResponse(run, await startActions(deps, run, span?.traceparent));
      const totalMs = performance.now() - startedAt;
      setImmediate(afterDecision, deps, run, response, totalMs, span);
      // queue: from reading the request to its handler (the loop, authentication), out of the deadline.
      const queueMs = startedAt - arrivedAtMs;
      // Before the answer leaves: feedback on it may follow at once, from its key alone.
      edge.recent.remember(run.decisionId, c.get('principal').keyId);
      return c.json(response, 200, { 'server-timing': serverTiming(run, totalMs, queueMs) });
    },
  );
  return app;
}
