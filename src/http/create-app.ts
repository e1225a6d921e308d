import type { IncomingMessage } from 'node:http';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import type { AdmissionControl } from '../admission/admission-control.ts';
import { admit } from '../admission/admit.ts';
import { changeAudit } from '../audit/record-change.ts';
import type { DecideInputs } from '../decide/decide-deps.ts';
import type { AskUserLinks, ReviewSink } from '../decide/decide-ports.ts';
import { DECIDE_ROUTE, decideRoutes } from '../decide/decide-route.ts';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import {
  callerAuth,
  createOperatorResolver,
  keyAuth,
  operatorAuth,
  requireRole,
  type TrustedProxy,
} from '../edge/caller-auth.ts';
import { clientAddressOf } from '../edge/client-address.ts';
import { PASS_THROUGH, withDirectGuard } from '../edge/direct-form.ts';
import { clientAbortOf, inputErrorOf, limitBody, readJsonBody } from '../edge/json-body.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { EventSink } from '../events/riskgate-event.ts';
import type { DecisionMemory } from '../feedback/decision-memory.ts';
import { RecentDecisions } from '../feedback/recent-decisions.ts';
import type { RouteEdge, RouteMount, RouteSurface } from '../lifecycle/component.ts';
import type { LockoutSink } from '../lockouts/lockout-record.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import type { DecisionTracing } from '../observability/tracing.ts';
import type { AuditTrail } from '../operators/audit-trail.ts';
import type { RuleStats } from '../policy/rule-stats.ts';
import { refusalClosesConnection } from '../problem/early-refusal.ts';
import {
  problemAnswer,
  problemCodeOf,
  problemOf,
  problemResponse,
  toProblem,
} from '../problem/problem-details.ts';
import { allowedMethods } from './allowed-methods.ts';
import { serveDirectly } from './direct-route.ts';

/**
 * riskgate's HTTP surface. `createApp` only wires: it opens nothing, reads no environment and
 * starts no timer, so tests build it around real clients and a real policy store.
 */

/** One structured service-log line (callbacks, unexpected errors). Never a secret. */
export type ServiceLog = (line: Record<string, unknown>) => void;

export interface AppDeps {
  /** What a decision reads (src/decide/): clients, policies, deadline. */
  decide: DecideInputs;
  /** Caller keys for `Authorization: Bearer`. */
  apiKeys: readonly string[];
  /** The recent decisions: /decide remembers each one's caller key (`POST /feedback` reads them). */
  feedback?: { decisions?: DecisionMemory };
  actions: ActionDispatcher;
  /** Where events go (signed webhooks): decisions emit `decision.denied`/`decision.challenged`. */
  events?: EventSink | undefined;
  /** Makes the "was this you?" links a policy asks for (src/ask-user/); none: no link. */
  askUser?: AskUserLinks | undefined;
  /** Where /decide tells the lock-outs it drove or withheld (src/lockouts/). Default: nowhere. */
  lockouts?: LockoutSink | undefined;
  /** Where /decide hands each decision for the review queue (src/review-queue/). Default: nowhere. */
  review?: ReviewSink | undefined;
  decisionLog: DecisionLog;
  metrics: RiskgateMetrics;
  /**
   * With RISKGATE_DECISION_LOG_ON_FAILURE=refuse: whether the decision log is writing. While it is
   * not, /decide and /feedback answer 503: no decision goes unaudited.
   */
  auditRequired?: (() => boolean) | undefined;
  /** True once shutdown began: every answer closes its connection. */
  isDraining?: () => boolean;
  tracing?: DecisionTracing | undefined;
  log: ServiceLog;
  /** Sheds decisions under overload (src/admission/); without it every decision is started. */
  admission?: AdmissionControl | undefined;
  /**
   * The operator endpoints (routes mounted on the `operator` surface): `keys` (operator keys,
   * never the caller keys; none: every request refused 403) guard them; `elsewhere` leaves them
   * out (they are on the ops port). Default: keys, none. `every` routes (liveness, readiness) are
   * open on each surface.
   */
  ops?: { access: 'keys'; keys: readonly string[] } | { access: 'elsewhere' };
  /**
   * An authenticating proxy (RISKGATE_TRUSTED_PROXIES, RISKGATE_TRUSTED_IDENTITY_HEADER): its
   * X-Forwarded-For is the client's address, its identity header an operator. Default none.
   */
  trustedProxy?: TrustedProxy | undefined;
  /** Where operators' changes are recorded before they are made; without it every change is refused (503). */
  audit?: AuditTrail | undefined;
  /** Rule hit counts (active and shadow), recorded after each answer. */
  ruleStats?: RuleStats | undefined;
  /** What the components mount (src/lifecycle/component.ts): each on the surfaces it names. */
  routes?: readonly RouteMount[];
  /** `service` (default): /decide and the rest; `ops`: only health and the operator endpoints. */
  surface?: 'service' | 'ops';
}

export function createApp(deps: AppDeps): Hono {
  const app = new Hono();
  const auth = callerAuth(deps.apiKeys);

  // Whether an answer of `status` to a request with these headers closes its connection.
  const closes = (status: number, contentLength: string | undefined, transferEncoding: string | undefined) =>
    // Every refusal that may close is a 4xx or 5xx: an answered request reads no header here.
    (status >= 400 && refusalClosesConnection(status, contentLength, transferEncoding)) ||
    // Shutting down: the client opens its next request elsewhere, never on a closing connection.
    deps.isDraining?.() === true;
  const finished = (c: Context): void => {
    const status = c.res.status;
    deps.metrics.requestFinished(status, problemCodeOf(c.res));
    if (closes(status, c.req.header('content-length'), c.req.header('transfer-encoding'))) {
      c.res.headers.set('connection', 'close');
    }
  };
  // Every request, answered or refused: in-flight count and 4xx/5xx by code (riskgate_http_*).
  // Not async: the count rides on `next()`'s own promise (an async layer is a promise, an await and
  // a resume more on every request; issue 32).
  const requestMetrics: MiddlewareHandler = (c, next) => {
    deps.metrics.requestStarted();
    return next().then(
      () => finished(c),
      (error: unknown) => {
        finished(c);
        throw error;
      },
    );
  };
  app.use(requestMetrics);
  withDirectGuard(requestMetrics, {
    check: () => true,
    enter: () => deps.metrics.requestStarted(),
    leave: (req, _vars, answer) => {
      deps.metrics.requestFinished(answer.status, answer.code);
      if (closes(answer.status, req.headers['content-length'], req.headers['transfer-encoding'])) {
        // Names in order, as hono's answer has them once `finished` set the header in its Headers.
        const headers: Record<string, string> = { ...answer.headers, connection: 'close' };
        answer.headers = {};
        for (const name of Object.keys(headers).sort()) answer.headers[name] = headers[name]!;
      }
    },
  });

  // The one error handler, for a request through hono and one served straight from node:http.
  const problemOfError = (error: unknown, incoming: IncomingMessage | undefined, path: string) => {
    const problem = toProblem(clientAbortOf(incoming) ?? error);
    if (problem.code === ErrorCode.INTERNAL) {
      deps.log({ level: 'error', msg: 'unhandled error', path, error: String(error) });
    }
    return problem;
  };
  app.onError((error, c) =>
    problemResponse(
      problemOfError(error, (c.env as { incoming?: IncomingMessage } | undefined)?.incoming, c.req.path),
    ),
  );
  let allowed: ((path: string) => string | undefined) | undefined;
  app.notFound((c) => {
    allowed ??= allowedMethods(app);
    const allow = allowed(c.req.path);
    if (allow !== undefined) {
      return problemResponse(
        problemOf(ErrorCode.METHOD_NOT_ALLOWED, `${c.req.path} takes ${allow}, not ${c.req.method}.`),
        { allow },
      );
    }
    return problemResponse(problemOf(ErrorCode.NOT_FOUND, `No route for ${c.req.method} ${c.req.path}.`));
  });

  const service = (deps.surface ?? 'service') === 'service';
  const recent = deps.feedback?.decisions ?? new RecentDecisions();
  // Without the audit gate, no layer for it: each layer is hono's dispatch (an async function) more
  // on every decision (issue 32).
  const decideGuards = deps.auditRequired === undefined ? [auth] : [auth, audited(deps)];
  if (service) {
    app.route('/', decideRoutes(deps, { guards: decideGuards, recent }));
    // Straight from node:http too: through the same middlewares, each in its direct form.
    serveDirectly(app, DECIDE_ROUTE.method, DECIDE_ROUTE.path, (error, req, path) =>
      problemAnswer(problemOfError(error, req, path)),
    );
  }

  const ops = deps.ops ?? { access: 'keys', keys: [] };
  const opsKeys = ops.access === 'keys' ? ops.keys : [];
  const trusted = deps.trustedProxy;
  const operators = createOperatorResolver(opsKeys, trusted);
  const clientAddress = (c: Context) => clientAddressOf(c, trusted?.proxies ?? []);
  const changes = changeAudit({ audit: deps.audit, clientAddress, log: deps.log });
  // Every route that records a change gets its outcome written once it is answered.
  app.use(changes.settleChanges);
  const edge: RouteEdge = {
    apiKeys: deps.apiKeys,
    operatorAuth: operatorAuth(opsKeys, trusted),
    // Keys only: a proxy's identity header is believed on the operator surface alone (a proxy
    // trusted for X-Forwarded-For in front of the service port must not vouch for operators there).
    keyAuth: (keys) => keyAuth(keys),
    requireRole,
    resolveOperator: operators.resolve,
    operatorOfKey: operators.ofKey,
    stillOperates: operators.stillOperates,
    vouchedIdentity: operators.vouched,
    clientAddress,
    recordChange: changes.recordChange,
    changeOutcome: changes.changeOutcome,
    // A route's admission (the /decide room answers its own shed with the overload verdict).
    admit: () => admit({ admission: deps.admission, metrics: deps.metrics }),
    audited: audited(deps),
    limitBody,
    readJsonBody,
    inputError: inputErrorOf,
  };
  const mounted = new Set<RouteSurface>(['every']);
  if (service) mounted.add('caller');
  if (ops.access === 'keys') mounted.add('operator');
  for (const routes of deps.routes ?? []) if (mounted.has(routes.surface)) routes.mount(app, edge);

  return app;
}

/** RISKGATE_DECISION_LOG_ON_FAILURE=refuse: no decision while the decision log cannot record it. */
function audited(deps: AppDeps): MiddlewareHandler {
  const required = deps.auditRequired;
  if (required === undefined) return withDirectGuard((_c, next) => next(), PASS_THROUGH);
  const gate: MiddlewareHandler = (_c, next) => {
    if (!required()) {
      return Promise.resolve(
        problemResponse(
          problemOf(
            ErrorCode.DECISION_LOG_UNAVAILABLE,
            'The decision log cannot record decisions, and this riskgate refuses to decide unaudited.',
          ),
          { 'retry-after': '5' },
        ),
      );
    }
    return next();
  };
  // Directly: while the decision log is writing (a refusal is hono's).
  return withDirectGuard(gate, { check: () => required() });
}
