import { Hono, type MiddlewareHandler } from 'hono';
import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import type { AdmissionControl } from '../admission/admission-control.ts';
import { admit } from '../admission/admit.ts';
import { CallbackReplayGuard } from '../callbacks/callback-replay-guard.ts';
import { MAX_CALLBACK_BODY_BYTES, verifyCallbackSignature } from '../callbacks/jws-signature.ts';
import type { DecideInputs } from '../decide/decide-deps.ts';
import { decideRoutes } from '../decide/decide-route.ts';
import { type DecisionLog, DISCARD_DECISION_LOG } from '../decision-log/decision-log.ts';
import { DECISION_LOG_SCHEMA_VERSION } from '../decision-log/decision-record.ts';
import { callerAuth, keyAuth, operatorAuth } from '../edge/caller-auth.ts';
import { clientAbortOf, inputErrorOf, limitBody, readJsonBody } from '../edge/json-body.ts';
import { ErrorCode, InputError, RiskgateError } from '../errors/riskgate-error.ts';
import { FeedbackRateLimit } from '../feedback/feedback-rate-limit.ts';
import { feedbackRequestSchema, MAX_FEEDBACK_BODY_BYTES } from '../feedback/feedback-request.ts';
import { RecentDecisions } from '../feedback/recent-decisions.ts';
import { PROMETHEUS_CONTENT_TYPE, type RiskgateMetrics } from '../observability/metrics.ts';
import type { DecisionTracing } from '../observability/tracing.ts';
import { buildOpenApiDocument } from '../openapi/openapi-document.ts';
import type { OutboxEntry, OutboxStore } from '../outbox/outbox-store.ts';
import { actionsQuerySchema, fromOutboxStore, outboxEntryView } from '../outbox/outbox-view.ts';
import type { RuleStats } from '../policy/rule-stats.ts';
import { refusalClosesConnection } from '../problem/early-refusal.ts';
import { problemCodeOf, problemOf, problemResponse, toProblem } from '../problem/problem-details.ts';

/**
 * riskgate's HTTP surface. `createApp` only wires: it opens nothing, reads no environment and
 * starts no timer, so tests build it around real clients and a real policy store.
 */

/** One structured service-log line (callbacks, unexpected errors). Never a secret. */
export type ServiceLog = (line: Record<string, unknown>) => void;

export interface AppDeps {
  /** What a decision reads (src/decide/): clients, policies, deadline. `policies` also serves `GET /policies`. */
  decide: DecideInputs;
  /** Caller keys for `Authorization: Bearer`. */
  apiKeys: readonly string[];
  /**
   * `POST /feedback`: the recent decisions (whose caller key may label each), the per-key rate
   * limit, and the operator keys (which may label any decision). Defaults: `RecentDecisions` and
   * `FeedbackRateLimit` defaults, and the `ops` keys.
   */
  feedback?: {
    decisions?: RecentDecisions;
    rateLimit?: FeedbackRateLimit;
    operatorKeys?: readonly string[];
  };
  actions: ActionDispatcher;
  decisionLog: DecisionLog;
  metrics: RiskgateMetrics;
  /**
   * Vendor health for `GET /healthz` (token, breakers): details for people and dashboards. It never
   * decides readiness: a degraded answer is still an answer (docs/operations.md, "Readiness").
   */
  health?: () => Record<string, unknown>;
  /**
   * With RISKGATE_DECISION_LOG_ON_FAILURE=refuse: whether the decision log is writing. While it is
   * not, /decide answers 503 and /readyz is not ready: no decision goes unaudited.
   */
  auditRequired?: (() => boolean) | undefined;
  /** True once shutdown began: `/readyz` answers 503 so load balancers stop sending. */
  isDraining?: () => boolean;
  /** Without it, `POST /callbacks/admin` is not served. */
  callbackSignatureKey?: string | undefined;
  /** Remembers verified callback signatures to refuse replays. Default: 24 h, 100,000 entries. */
  callbackReplayGuard?: CallbackReplayGuard;
  tracing?: DecisionTracing | undefined;
  log: ServiceLog;
  /** riskgate's version, for /openapi.json. */
  version: string;
  /** What `GET /metrics` serves. Default `metrics.render` (a cluster worker gathers every worker's). */
  renderMetrics?: (() => Promise<string>) | undefined;
  /** Sheds decisions under overload (src/admission/); without it every decision is started. */
  admission?: AdmissionControl | undefined;
  /**
   * The operator endpoints (/metrics, /policies, /openapi.json, /actions): `keys` (operator keys,
   * never the caller keys; none: every request refused 403) guard them; `elsewhere` leaves them
   * out (they are on the ops port). Default: keys, none. Liveness and readiness are open on every
   * surface.
   */
  ops?: { access: 'keys'; keys: readonly string[] } | { access: 'elsewhere' };
  /** The durable outbox's store, for GET /actions and its retry and drop (operator endpoints). */
  outboxStore?: OutboxStore | undefined;
  /** Told when an operator drops an action over HTTP: its final `action` line. */
  onActionDropped?: ((entry: OutboxEntry) => void) | undefined;
  /** Told when an operator retries a dead action over HTTP (the outbox delivers it now). */
  onActionRetried?: (() => void) | undefined;
  /** Rule hit counts for `GET /policies/stats` (active and shadow). */
  ruleStats?: RuleStats | undefined;
  /** The shadow policy store's status for `GET /policies` (RISKGATE_SHADOW_POLICY_PATH). */
  shadowStatus?: (() => object) | undefined;
  /** `service` (default): /decide and the rest; `ops`: only health and the operator endpoints. */
  surface?: 'service' | 'ops';
}

export function createApp(deps: AppDeps): Hono {
  const app = new Hono();
  const auth = callerAuth(deps.apiKeys);
  let openApi: string | undefined;

  // Every request, answered or refused: in-flight count and 4xx/5xx by code (riskgate_http_*).
  app.use(async (c, next) => {
    deps.metrics.requestStarted();
    try {
      await next();
    } finally {
      deps.metrics.requestFinished(c.res.status, problemCodeOf(c.res));
      if (
        refusalClosesConnection(
          c.res.status,
          c.req.header('content-length'),
          c.req.header('transfer-encoding'),
        )
      ) {
        c.res.headers.set('connection', 'close');
      }
      // Shutting down: the client opens its next request elsewhere, never on a closing connection.
      if (deps.isDraining?.()) c.res.headers.set('connection', 'close');
    }
  });

  app.onError((error, c) => {
    const problem = toProblem(clientAbortOf(c) ?? error);
    if (problem.code === ErrorCode.INTERNAL) {
      deps.log({ level: 'error', msg: 'unhandled error', path: c.req.path, error: String(error) });
    }
    return problemResponse(problem);
  });
  let allowed: Map<string, string> | undefined;
  app.notFound((c) => {
    allowed ??= allowedMethods(app);
    const allow = allowed.get(c.req.path);
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
  if (service) app.route('/', decideRoutes(deps, { guards: [auth, audited(deps)], recent }));

  // Analyst feedback on a decision, kept in the decision log for `riskgate replay --labels`.
  if (service) {
    // Inside admission like /decide: it shares the decisions' CPU (503 when shed, never a verdict).
    app.on('POST', '/feedback', admit({ admission: deps.admission, metrics: deps.metrics }));
    const operatorKeys = deps.feedback?.operatorKeys ?? (deps.ops?.access === 'keys' ? deps.ops.keys : []);
    const limiter = deps.feedback?.rateLimit ?? new FeedbackRateLimit();
    app.post(
      '/feedback',
      keyAuth({ caller: deps.apiKeys, operator: operatorKeys }),
      feedbackRateLimited(limiter),
      audited(deps),
      limitBody(MAX_FEEDBACK_BODY_BYTES),
      async (c) => {
        const feedback = await readJsonBody(c, feedbackRequestSchema);
        if (deps.decisionLog === DISCARD_DECISION_LOG) {
          return problemResponse(
            problemOf(
              ErrorCode.DECISION_LOG_UNAVAILABLE,
              'Feedback is kept in the decision log, and RISKGATE_DECISION_LOG is off: it would be lost.',
            ),
          );
        }
        const principal = c.get('principal');
        const decision = recent.get(feedback.decisionId);
        // A caller labels only what its own key was answered. An operator labels any decision,
        // also one this process does not know (older than its memory, another replica's).
        if (principal.role === 'caller' && decision?.keyId !== principal.keyId) {
          throw new RiskgateError(
            ErrorCode.NOT_FOUND,
            `No recent decision ${feedback.decisionId} made with this key (feedback takes the key that asked for the decision, or an operator key).`,
          );
        }
        const recordedAt = new Date().toISOString();
        const event = { label: feedback.label, labelledBy: principal.keyId, at: recordedAt };
        const previous = decision?.labels?.at(-1);
        const history = decision === undefined ? [event] : recent.label(decision, event);
        deps.decisionLog.write({
          kind: 'feedback',
          schemaVersion: DECISION_LOG_SCHEMA_VERSION,
          at: recordedAt,
          decisionId: feedback.decisionId,
          label: feedback.label,
          labelledBy: principal.keyId,
          labelledAs: principal.role,
          ...(previous !== undefined && { previousLabel: previous.label }),
          ...(decision === undefined && { decisionKnown: false }),
          ...(feedback.note !== undefined && { note: feedback.note }),
        });
        return c.json(
          {
            decisionId: feedback.decisionId,
            label: feedback.label,
            recordedAt,
            labelledBy: principal.keyId,
            history,
          },
          202,
        );
      },
    );
  }

  // Liveness: the process answers. The vendor's state is detail, never a reason to restart.
  app.get('/healthz', (c) => c.json({ status: 'ok', ...deps.health?.() }));

  // Readiness: this process can answer /decide (a policy is loaded, it is not shutting down). The
  // vendor is not a check: every replica shares it, and failing them all at once would turn a
  // degraded service (outage mode, onUnavailable) into no service.
  app.get('/readyz', (c) => {
    const { ready, checks } = readiness(deps);
    return c.json({ ready, checks }, ready ? 200 : 503);
  });

  const ops = deps.ops ?? { access: 'keys', keys: [] };
  if (ops.access !== 'elsewhere') {
    // Policy file paths, reload errors, traffic, the API surface and the outbox (where a pending
    // lock-out can be dropped): for operators, never for a caller key.
    const opsAuth = operatorAuth(ops.keys);
    app.get('/metrics', opsAuth, async (c) =>
      c.body(await (deps.renderMetrics ?? deps.metrics.render)(), 200, {
        'content-type': PROMETHEUS_CONTENT_TYPE,
      }),
    );

    app.get('/policies', opsAuth, (c) =>
      c.json({
        ...deps.decide.policies.status(),
        ...(deps.shadowStatus !== undefined && { shadow: deps.shadowStatus() }),
      }),
    );
    app.get('/policies/stats', opsAuth, (c) => c.json({ revisions: deps.ruleStats?.snapshot() ?? [] }));

    app.get('/openapi.json', opsAuth, (c) => {
      openApi ??= JSON.stringify(buildOpenApiDocument(deps.version));
      return c.body(openApi, 200, { 'content-type': 'application/json' });
    });

    const store = deps.outboxStore;
    if (store !== undefined) {
      app.get('/actions', opsAuth, async (c) => {
        const query = actionsQuerySchema.safeParse(c.req.query());
        if (!query.success) throw inputErrorOf(query.error, 'The query');
        const [entries, stats] = await fromOutboxStore(
          Promise.all([
            store.list({ status: query.data.status, limit: query.data.limit }),
            store.stats(Date.now()),
          ]),
        );
        return c.json({ ...stats, actions: entries.map(outboxEntryView) });
      });
      app.post('/actions/:id/retry', opsAuth, async (c) => {
        const id = c.req.param('id');
        if (!(await fromOutboxStore(store.retry(id, Date.now()))))
          throw actionNotFound(id, 'dead or dropped');
        deps.onActionRetried?.();
        return c.json(outboxEntryView((await fromOutboxStore(store.get(id)))!));
      });
      app.delete('/actions/:id', opsAuth, async (c) => {
        const id = c.req.param('id');
        if (!(await fromOutboxStore(store.drop(id, 'dropped_by_operator', Date.now()))))
          throw actionNotFound(id, 'pending or dead');
        const entry = (await fromOutboxStore(store.get(id)))!;
        deps.onActionDropped?.(entry);
        return c.json(outboxEntryView(entry));
      });
    }
  }

  const callbackKey = service ? deps.callbackSignatureKey : undefined;
  if (callbackKey !== undefined) {
    const replays = deps.callbackReplayGuard ?? new CallbackReplayGuard();
    app.post('/callbacks/admin', limitBody(MAX_CALLBACK_BODY_BYTES), async (c) => {
      const raw = new Uint8Array(await c.req.arrayBuffer());
      const verified = await verifyCallbackSignature(c.req.header('x-jws-signature'), raw, callbackKey);
      if (!verified.ok) {
        deps.log({ level: 'warn', msg: 'admin callback refused', reason: verified.reason });
        return problemResponse(
          problemOf(ErrorCode.INVALID_SIGNATURE, 'x-jws-signature does not verify over this body.'),
        );
      }
      let body: unknown;
      try {
        body = JSON.parse(Buffer.from(raw).toString('utf8'));
      } catch {
        throw new InputError('The callback body is not valid JSON.', [
          { field: '', message: 'is not valid JSON' },
        ]);
      }
      // Keyed on the signature's bytes: a replay re-spelled (a `=` pad, other unused low bits) is
      // still a replay. A spelling the vendor never sends is refused and not remembered either way.
      const replayed = verified.canonical
        ? !replays.firstSighting(verified.signature)
        : replays.seen(verified.signature);
      if (replayed) {
        deps.log({
          level: 'warn',
          msg: 'admin callback replayed',
          callback: callbackKind(body),
          ...callbackIds(body),
        });
        return problemResponse(
          problemOf(
            ErrorCode.CALLBACK_REPLAYED,
            'This signed callback was already received; it is not processed again.',
          ),
        );
      }
      if (!verified.canonical) {
        deps.log({ level: 'warn', msg: 'admin callback refused', reason: 'NON_CANONICAL_SIGNATURE' });
        return problemResponse(
          problemOf(ErrorCode.INVALID_SIGNATURE, 'x-jws-signature is not canonical unpadded base64url.'),
        );
      }
      deps.log({ level: 'info', msg: 'admin callback', callback: callbackKind(body), ...callbackIds(body) });
      return c.json({ received: true });
    });
  }

  return app;
}

function actionNotFound(id: string, state: string): RiskgateError {
  return new RiskgateError(
    ErrorCode.NOT_FOUND,
    `No ${state} action with id ${JSON.stringify(id.slice(0, 200))}.`,
  );
}

/** Per-key token bucket in front of /feedback: 429 with Retry-After (seconds) past the key's rate. */
function feedbackRateLimited(limiter: FeedbackRateLimit): MiddlewareHandler {
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

/** RISKGATE_DECISION_LOG_ON_FAILURE=refuse: no decision while the decision log cannot record it. */
function audited(deps: AppDeps): MiddlewareHandler {
  const required = deps.auditRequired;
  if (required === undefined) return (_c, next) => next();
  return async (_c, next) => {
    if (!required()) {
      return problemResponse(
        problemOf(
          ErrorCode.DECISION_LOG_UNAVAILABLE,
          'The decision log cannot record decisions, and this riskgate refuses to decide unaudited.',
        ),
        { 'retry-after': '5' },
      );
    }
    await next();
  };
}

/** The `Allow` value of each routed path (a GET route answers HEAD too), for 405 answers. */
function allowedMethods(app: Hono): Map<string, string> {
  const byPath = new Map<string, Set<string>>();
  for (const route of app.routes) {
    if (route.method === 'ALL') continue;
    let methods = byPath.get(route.path);
    if (methods === undefined) {
      methods = new Set();
      byPath.set(route.path, methods);
    }
    methods.add(route.method);
    if (route.method === 'GET') methods.add('HEAD');
  }
  return new Map([...byPath].map(([path, methods]) => [path, [...methods].join(', ')]));
}

/**
 * Enrollment success and accounts migration are told apart by their fields (docs/vendor-api.md#callbacks).
 */
function callbackKind(body: unknown): 'enrollment' | 'migration' | 'unknown' {
  if (typeof body !== 'object' || body === null) return 'unknown';
  if ('migrated_to_device_id' in body) return 'migration';
  if ('enrollment_id' in body || 'activation_code' in body) return 'enrollment';
  return 'unknown';
}

/** The ids a callback is about. Never the rest: an enrollment carries its activation code. */
const CALLBACK_LOGGED_IDS = ['user_id', 'device_id', 'enrollment_id'] as const;

function callbackIds(body: unknown): Record<string, string> {
  const ids: Record<string, string> = {};
  if (typeof body !== 'object' || body === null) return ids;
  for (const key of CALLBACK_LOGGED_IDS) {
    const value = (body as Record<string, unknown>)[key];
    if (typeof value === 'string') ids[key] = value.slice(0, 100);
  }
  return ids;
}

/**
 * What `/readyz` answers (and `riskgate_ready` reports): a policy is loaded, the process is not
 * shutting down, and, with RISKGATE_DECISION_LOG_ON_FAILURE=refuse, the decision log writes.
 */
export function readiness(deps: Pick<AppDeps, 'decide' | 'isDraining' | 'auditRequired'>): {
  ready: boolean;
  checks: Record<string, boolean>;
} {
  const checks: Record<string, boolean> = {
    policy: deps.decide.policies.current() !== undefined,
  };
  if (deps.isDraining?.()) checks.draining = false;
  if (deps.auditRequired !== undefined && !deps.auditRequired()) checks.decisionLog = false;
  return { ready: Object.values(checks).every(Boolean), checks };
}
