import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { ACTION_SUBMIT_MIN_BUDGET_MS, type ActionDispatcher } from '../actions/action-dispatcher.ts';
import { type ActionJob, type ActionPlan, planActions } from '../actions/admin-actions.ts';
import { type AdmissionControl, overloadDetail, type ShedReason } from '../admission/admission-control.ts';
import { admittedAtListener, arrivedAt } from '../admission/shed-before-app.ts';
import { decideRequestSchema, MAX_DECIDE_BODY_BYTES } from '../decide/decide-request.ts';
import {
  type ActionReport,
  actionReport,
  buildDecideResponse,
  type DecideResponse,
  oneTimeCodeReport,
  overloadResponse,
  serverTiming,
} from '../decide/decide-response.ts';
import { type DecisionRun, type RunDecisionDeps, runDecision } from '../decide/run-decision.ts';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import {
  DECISION_LOG_SCHEMA_VERSION,
  decisionLine,
  type ShadowOutcome,
} from '../decision-log/decision-record.ts';
import { ErrorCode, InputError } from '../errors/riskgate-error.ts';
import { RecentDecisions } from '../feedback/recent-decisions.ts';
import type { RouteEdge, RouteMount, RouteSurface } from '../lifecycle/component.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import type { DecisionSpan, DecisionTracing } from '../observability/tracing.ts';
import type { RuleStats } from '../policy/rule-stats.ts';
import { refusalClosesConnection } from '../problem/early-refusal.ts';
import { problemCodeOf, problemOf, problemResponse, toProblem } from '../problem/problem-details.ts';
import { mismatchMessage } from '../subject/subject-binding.ts';
import { allowedMethods } from './allowed-methods.ts';
import { callerAuth, createKeyVerifier, keyAuth, operatorAuth, presentedKey } from './caller-auth.ts';
import { clientAbortOf, inputErrorOf, limitBody, readJsonBody } from './json-body.ts';

/**
 * riskgate's HTTP surface. `createApp` only wires: it opens nothing, reads no environment and
 * starts no timer, so tests build it around real clients and a real policy store.
 */

/** One structured service-log line (callbacks, unexpected errors). Never a secret. */
export type ServiceLog = (line: Record<string, unknown>) => void;

export interface AppDeps {
  /** The fan-out's clients, policy source and deadline. */
  decide: RunDecisionDeps;
  /** Caller keys for `Authorization: Bearer`. */
  apiKeys: readonly string[];
  /** The recent decisions: /decide remembers each one's caller key (`POST /feedback` reads them). */
  feedback?: { decisions?: RecentDecisions };
  actions: ActionDispatcher;
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
  if (service)
    app.post('/decide', admit(deps), auth, audited(deps), limitBody(MAX_DECIDE_BODY_BYTES), async (c) => {
      const startedAt = performance.now();
      const request = await readJsonBody(c, decideRequestSchema);
      const span = deps.tracing?.startDecision(c.req.header('traceparent'), c.req.header('tracestate'), {
        method: 'POST',
        url: c.req.url,
        route: '/decide',
        userAgent: c.req.header('user-agent'),
      });
      // A caller that hangs up ends the fan-out: its upstream calls free their sockets for others.
      const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
      const arrivedAtMs = incoming === undefined ? undefined : arrivedAt(incoming);
      const run = await runDecision(deps.decide, request, span?.traceparent, c.req.raw.signal, arrivedAtMs);
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
      const queueMs = arrivedAtMs === undefined ? undefined : startedAt - arrivedAtMs;
      // Before the answer leaves: feedback on it may follow at once, from its key alone.
      recent.remember(run.decisionId, c.get('principal').keyId);
      return c.json(response, 200, { 'server-timing': serverTiming(run, totalMs, queueMs) });
    });

  const ops = deps.ops ?? { access: 'keys', keys: [] };
  const edge: RouteEdge = {
    apiKeys: deps.apiKeys,
    operatorAuth: operatorAuth(ops.access === 'keys' ? ops.keys : []),
    keyAuth,
    admit: (verdict) => admit(deps, verdict),
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

/**
 * Admission at the edge of every caller endpoint (/decide, /feedback), before authentication, body
 * and fan-out: a shed request costs a header parse and a short answer
 * (src/admission/admission-control.ts). Shed, the caller gets 503 problem+json with Retry-After, or
 * for a decision (`verdict`) the policy's overload verdict when it names one (200, degraded, reason
 * overloaded; only for a valid caller key).
 */
function admit(deps: AppDeps, verdict = true): MiddlewareHandler {
  const admission = deps.admission;
  if (admission === undefined) return (_c, next) => next();
  const verify = createKeyVerifier(deps.apiKeys);
  return async (c, next) => {
    // Checked once per request: the node:http listener already did unless the policy answers
    // overload with a verdict (which needs the caller's key, so it is decided here).
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
    const shed = incoming !== undefined && admittedAtListener(incoming) ? undefined : admission.check();
    if (shed !== undefined) return overloaded(c, deps, admission, shed, verdict ? verify : undefined);
    admission.enter();
    try {
      await next();
    } finally {
      admission.leave();
    }
  };
}

function overloaded(
  c: Context,
  deps: AppDeps,
  admission: AdmissionControl,
  reason: ShedReason,
  /** Undefined: no overload verdict for this endpoint (not a decision). */
  verify: ((key: string) => boolean) | undefined,
): Response {
  const startedAt = performance.now();
  const policy = deps.decide.policies.current();
  const key = presentedKey(c.req.header('authorization'));
  if (policy.overloadVerdict !== undefined && key !== undefined && verify?.(key)) {
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
  }
  deps.metrics.recordShed(reason, 'refused');
  return problemResponse(problemOf(ErrorCode.OVERLOADED, overloadDetail(reason)), {
    'retry-after': String(admission.retryAfterSeconds),
  });
}

/**
 * Reports every action of the decision: the one-time code as fetched, the others queued (they
 * start on a later turn, after this answer is written), deferred or skipped with the reason.
 */
async function startActions(
  deps: AppDeps,
  run: DecisionRun,
  traceparent: string | undefined,
): Promise<ActionReport[]> {
  const { actions } = run.decision;
  if (actions.length === 0) return [];
  const reports: ActionReport[] = [];
  const otc = actions.find((a) => a.type === 'one_time_code');
  if (otc !== undefined) reports.push(oneTimeCodeReport(run, otc));
  // The Admin user could not be read: it may not be the account's, so each action verifies it
  // first, once the Admin API answers (deferred, never taken on an unchecked identity).
  const unverified = run.subject.status === 'unverified';
  const targets = {
    decisionId: run.decisionId,
    userId: run.request.userId,
    deviceId: run.request.deviceId,
    traceparent,
    ...(unverified && { verifyAccountId: run.request.accountId }),
  };
  // Reports keep the plans' order: a submitted plan's slot is filled once the submit is answered.
  const submitted: { plan: ActionPlan; first: number; slot: number }[] = [];
  const jobs: ActionJob[] = [];
  for (const plan of planActions(actions, targets)) {
    if (plan.skipped !== undefined) {
      reports.push(actionReport(plan.action, 'skipped', plan.skipped));
      continue;
    }
    submitted.push({ plan, first: jobs.length, slot: reports.length });
    reports.push(
      unverified
        ? actionReport(plan.action, 'deferred', 'subject_unverified')
        : actionReport(plan.action, 'queued'),
    );
    jobs.push(...plan.jobs);
  }
  if (jobs.length === 0) return reports;
  // One submit for the decision: with the durable outbox, one group-committed write before the
  // answer says `queued`, waited for no longer than the decision's deadline allows.
  const timeoutMs = Math.max(ACTION_SUBMIT_MIN_BUDGET_MS, run.deadlineAtMs - performance.now());
  const results = await deps.actions.submit(jobs, { timeoutMs });
  for (const { plan, first, slot } of submitted) {
    const own = results.slice(first, first + plan.jobs.length);
    if (own.includes('refused')) reports[slot] = actionReport(plan.action, 'failed', 'queue_refused');
    else if (own.includes('deferred'))
      reports[slot] = actionReport(plan.action, 'deferred', 'outbox_timeout');
  }
  return reports;
}

function afterDecision(
  deps: AppDeps,
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
  deps.metrics.recordDecision(response.verdict, response.degraded, totalMs);
  span?.end({ verdict: response.verdict, degraded: response.degraded, policyRevision: run.policy.revision });
}
