import { Hono, type MiddlewareHandler } from 'hono';
import { admit } from '../admission/admit.ts';
import { type DirectAnswer, withDirectHandler } from '../edge/direct-form.ts';
import { declareRoute } from '../edge/route-declaration.ts';
import { ErrorCode, InputError } from '../errors/riskgate-error.ts';
import { mismatchMessage } from '../subject/subject-binding.ts';
import { afterDecision } from './after-decision.ts';
import { startActions } from './decide-actions.ts';
import type { DecideDeps } from './decide-deps.ts';
import { signalFetcher } from './decide-ports.ts';
import {
  acceptDecideRequest,
  type DecideRequest,
  decideRequestSchema,
  MAX_DECIDE_BODY_BYTES,
} from './decide-request.ts';
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

/** `POST /decide`, declared once: the handler below and the OpenAPI document read it. */
export const DECIDE_ROUTE = declareRoute({
  method: 'post',
  path: '/decide',
  surface: 'caller',
  operationId: 'decide',
  summary: 'Decide on one login attempt',
  body: {
    schema: { component: 'DecideRequest', schema: decideRequestSchema, accept: acceptDecideRequest },
    maxBytes: MAX_DECIDE_BODY_BYTES,
  },
  responses: {
    200: {
      description:
        'The decision. Upstream failures never fail it: they mark it `degraded`. Under overload, a policy with an `overload` verdict answers it here (`reason: overloaded`).',
      headers: {
        'Server-Timing': {
          description:
            'total, each upstream call, policy evaluation and queue, in milliseconds (absent on an overload verdict).',
          schema: { type: 'string' },
        },
      },
      schema: 'DecideResponse',
    },
  },
  problems: {
    [ErrorCode.INVALID_INPUT]:
      'Invalid JSON, a field breaking its rule (`field` names it), or userId/deviceId naming Admin records of another account.',
    [ErrorCode.UNAUTHENTICATED]: 'Missing or unknown caller key.',
    [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_DECIDE_BODY_BYTES} bytes.`,
    [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'Content type other than application/json.',
    [ErrorCode.OVERLOADED]:
      'Shed by admission control (RISKGATE_MAX_IN_FLIGHT, RISKGATE_MAX_EVENT_LOOP_DELAY_MS), before any work; `Retry-After` says when to try again.',
    [ErrorCode.DECISION_LOG_UNAVAILABLE]:
      'The decision log is failing and RISKGATE_DECISION_LOG_ON_FAILURE=refuse: no decision goes unaudited.',
  },
});

/** The sub-app serving `POST /decide`. */
export function decideRoutes(deps: DecideDeps, edge: DecideEdge): Hono {
  const runDeps: RunDecisionDeps = { ...deps.decide, signals: signalFetcher(deps.decide.signals) };
  const app = new Hono();

  // The decision and its answer, whichever way the request came (hono, or straight from
  // node:http: src/edge/direct-form.ts): `header` reads the request's.
  const decide = async (
    body: Promise<DecideRequest>,
    header: (name: string) => string | undefined,
    url: string,
    arrivedAtMs: number,
    callerGone: AbortSignal,
    keyId: string,
  ): Promise<DirectAnswer> => {
    const startedAt = performance.now();
    const request = await body;
    const span = deps.tracing?.startDecision(header('traceparent'), header('tracestate'), {
      method: 'POST',
      url,
      route: '/decide',
      userAgent: header('user-agent'),
    });
    // A caller that hangs up ends the fan-out: its upstream calls free their sockets for others.
    const run = await runDecision(runDeps, request, span?.traceparent, callerGone, arrivedAtMs);
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
    // Awaited only when something was submitted: most decisions have nothing to wait for.
    const started = startActions(deps, run, span?.traceparent);
    const response = buildDecideResponse(run, Array.isArray(started) ? started : await started);
    const totalMs = performance.now() - startedAt;
    setImmediate(afterDecision, deps, run, response, totalMs, span);
    // queue: from reading the request to its handler (the loop, authentication), out of the deadline.
    const queueMs = startedAt - arrivedAtMs;
    // Before the answer leaves: feedback on it may follow at once, from its key alone.
    edge.recent.remember(run.decisionId, keyId);
    return {
      status: 200,
      headers: { 'content-type': 'application/json', 'server-timing': serverTiming(run, totalMs, queueMs) },
      body: JSON.stringify(response),
    };
  };
  DECIDE_ROUTE.mount(
    app,
    admit({ admission: deps.admission, metrics: deps.metrics, answerShed: overloadAnswer(deps) }),
    ...edge.guards,
    withDirectHandler(
      (c) =>
        decide(
          DECIDE_ROUTE.bodyOf(c),
          (name) => c.req.header(name),
          c.req.url,
          c.get('admission').arrivedAtMs,
          c.req.raw.signal,
          c.get('principal').keyId,
          // The body and plain headers straight into a Response: @hono/node-server writes that one
          // through without a Headers object (c.json builds one for two headers, then converts it back).
        ).then((answer) => new Response(answer.body, { status: answer.status, headers: answer.headers })),
      // Straight from node:http: the same, with the guards' variables and node's headers.
      (r) =>
        decide(
          DECIDE_ROUTE.directBodyOf(r),
          (name) => r.req.headers[name] as string | undefined,
          r.url,
          r.vars.admission!.arrivedAtMs,
          r.signal,
          r.vars.principal!.keyId,
        ),
    ),
  );
  return app;
}
