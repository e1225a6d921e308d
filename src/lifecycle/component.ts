import type { Context, Hono, MiddlewareHandler } from 'hono';
import type { z } from 'zod';
import type { AnyRouteDeclaration } from '../edge/route-declaration.ts';
import type { AuditAction, AuditEntry, AuditOutcome } from '../operators/audit-trail.ts';
import type { Operator, OperatorRole } from '../operators/operator.ts';

/**
 * The component contract: one piece of riskgate (a store, a client, a background loop, a listener)
 * with a name, a start that hands back what it built, and a stop within a deadline. Modelled on
 * OPA's plugin manager (start in order, stop with a context) and fastify's plugins (each one brings
 * its own routes and its own close hook, run in reverse order). This module imports nothing of
 * riskgate but types that import nothing themselves (the operator, the audit trail): every room may
 * depend on it.
 */

/** One structured service-log line. Never a secret. */
export type LifecycleLog = (line: Record<string, unknown>) => void;

/**
 * What a component's `observe` may register: gauges and counters read at each scrape
 * (src/observability/metrics.ts implements it).
 */
export interface MetricsRegistry {
  observeGauge(name: string, description: string, read: () => number): void;
  observeCounter(name: string, description: string, read: () => number): void;
}

/**
 * Why a teardown runs. `graceful`: a stop asked for (a signal, the primary, a start that failed):
 * drain, then close. `fatal`: the process is in an unknown state (an uncaught exception) and exits
 * once the teardown's short deadline passes: a component does only what must not be lost (the
 * decision log's flush; promised actions stay where the next process finds them), never a drain.
 */
export type StopReason = 'graceful' | 'fatal';

/** What a component hands back once started. */
export interface StartedComponent<H, R = unknown> {
  /** What the next components and the running service use (a store, a client, ...). */
  handle: H;
  /**
   * Undoes `start`: ends the component's loops, timers, sockets and files. Called once, in
   * reverse start order, by `stop()` and by a start that failed later. `deadlineAtMs`
   * (`Date.now()` scale) is when the whole teardown should be over: a component bounds its own
   * waits by it; `reason` says whether to drain (`graceful`) or only save what must not be lost.
   */
  stop?(deadlineAtMs: number, reason: StopReason): Promise<void> | void;
  /** Details for `GET /healthz` (never a readiness check: a degraded answer is still an answer). */
  health?(): Record<string, unknown>;
  /**
   * Readiness checks for `GET /readyz`: the process is ready while every one passes. A boolean
   * check passes while true; one that only ever fails may be listed only while it does
   * (`draining: false`). An input's warmth (`InputWarmth`) counts only while the active policy
   * reads that input, and passes unless it holds the process back (`holdsBack`).
   */
  ready?(): Record<string, boolean | InputWarmth>;
  /** Registers the component's gauges and counters with the metrics registry. */
  observe?(registry: R): void;
  /** Routes the component mounts on the caller or operator surface. */
  routes?: readonly RouteMount[];
}

/**
 * How warm one of a decision's inputs is in this process (the token, the event history, the
 * lists), for `GET /readyz`:
 * - `warm`: decisions read it as well as any replica could;
 * - `behind`: this process's own shortfall, one that others need not share (not read yet since
 *   start, reading back after its source recovered, a refresh that hangs): it holds the process
 *   back, at once until the input was first warm, later once it has been behind for the grace;
 * - `unavailable`: its source fails (the Log API, the token endpoint, the list database answer
 *   errors). Every replica shares the source, and taking them all out would turn degraded answers
 *   into none: it never holds the process back, the degraded verdict covers it.
 */
export interface InputWarmth {
  state: 'warm' | 'behind' | 'unavailable';
  /** Whether it has been warm since the process started. */
  everWarm: boolean;
  /** When it stopped being warm, epoch ms; undefined when warm or not known. */
  sinceMs?: number | undefined;
  /** Why it is not warm (never a secret). */
  reason?: string | undefined;
  /** How far behind it reads, seconds (the event history), when known. */
  behindSeconds?: number | undefined;
}

/**
 * Whether an input's warmth holds the process back at `nowMs`: only when `behind`, and then at
 * once while it has never been warm, else once it has been behind for longer than `graceMs`.
 */
export function holdsBack(w: InputWarmth, nowMs: number, graceMs: number): boolean {
  if (w.state !== 'behind') return false;
  if (!w.everWarm) return true;
  return w.sinceMs !== undefined && nowMs - w.sinceMs > graceMs;
}

/** One component: a name (in logs and in the start hook) and its start. */
export interface Component<H, R = unknown> {
  readonly name: string;
  start(): Promise<StartedComponent<H, R>> | StartedComponent<H, R>;
}

/**
 * Where a route is served. `caller`: the service surface only (caller keys). `operator`: beside
 * the other operator endpoints (the ops port when there is one, else the service port behind the
 * operator keys). `every`: on each surface, unauthenticated (liveness, readiness).
 */
export type RouteSurface = 'caller' | 'operator' | 'every';

/**
 * The HTTP edge's shared pieces, handed to each mount (as fastify decorates the instance a plugin
 * gets): a feature's routes use them without importing src/http/.
 */
export interface RouteEdge {
  /** Caller keys (`Authorization: Bearer`); the principal is `c.get('principal')`. */
  apiKeys: readonly string[];
  /** Guards an operator endpoint (the operator keys, never the caller keys). */
  operatorAuth: MiddlewareHandler;
  /**
   * Takes a caller or an operator key; `c.get('principal').role` says which (`.operator` names an
   * operator). Operator entries as RISKGATE_OPS_KEYS has them (`name:role:key` or a plain key).
   */
  keyAuth(keys: { caller: readonly string[]; operator: readonly string[] }): MiddlewareHandler;
  /**
   * After `operatorAuth` (or `keyAuth`): 403 problem+json unless the operator's role allows `role`
   * (viewer < analyst < admin). `orCaller`: a caller key passes too. Default false.
   */
  requireRole(role: OperatorRole, options?: { orCaller?: boolean }): MiddlewareHandler;
  /**
   * The operator of a request outside the middlewares: its bearer operator key, else the identity
   * a trusted proxy vouches for (RISKGATE_TRUSTED_IDENTITY_HEADER); undefined otherwise.
   */
  resolveOperator(c: Context): Operator | undefined;
  /** The operator a key belongs to (constant time): a sign-in form's key. */
  operatorOfKey(key: string): Operator | undefined;
  /** Whether an operator signed in earlier is still configured with that name and role. */
  stillOperates(operator: Operator): boolean;
  /**
   * What a trusted proxy vouches for on this request: an operator, `{ unknown }` for an identity
   * with no role, undefined when none (no header, or not from a trusted proxy).
   */
  vouchedIdentity(c: Context): { operator: Operator } | { unknown: string } | undefined;
  /**
   * The client's address: the socket's, or behind a trusted proxy (RISKGATE_TRUSTED_PROXIES) the
   * X-Forwarded-For hop it saw. The audit trail's `from`.
   */
  clientAddress(c: Context): string;
  /**
   * Writes an operator's change to the audit trail (who: the request's operator; when; from
   * `clientAddress`) before the route makes it. Rejects with RG_ERR_AUDIT_UNAVAILABLE (503) when
   * the trail cannot write: the route lets it propagate, and the change is not made.
   */
  recordChange(
    c: Context,
    change: { action: AuditAction; target: string; detail?: Record<string, unknown> },
  ): Promise<AuditEntry>;
  /**
   * Says what became of the changes `recordChange` recorded for `c` when the answer will not: the
   * outcome is otherwise read from it (2xx/3xx done, 4xx refused, 5xx failed; src/audit/).
   */
  changeOutcome(c: Context, outcome: AuditOutcome): void;
  /**
   * Admission (shed under overload with a 503, counted in flight). A route's own: /decide, whose
   * shed may be answered with the policy's overload verdict, builds its own in src/decide/.
   */
  admit(): MiddlewareHandler;
  /** With RISKGATE_DECISION_LOG_ON_FAILURE=refuse: 503 while the decision log cannot record. */
  audited: MiddlewareHandler;
  /** 413 past `maxBytes`, before the body is read. */
  limitBody(maxBytes: number): MiddlewareHandler;
  /** The JSON body checked by `schema` (415/400 problem+json naming the field otherwise). */
  readJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>>;
  /** A zod failure as the 400 problem naming the field. */
  inputError(error: z.ZodError, what: string): Error;
}

/**
 * Routes a component brings, and the surface they belong on. `routes`: the declaration of each
 * route `mount` registers (src/edge/route-declaration.ts), which the OpenAPI document is assembled
 * from; a handler `mount` registers without one fails test/openapi-contract.test.ts.
 */
export interface RouteMount {
  surface: RouteSurface;
  routes: readonly AnyRouteDeclaration[];
  /**
   * Pages for a browser under this prefix (the console), not the API: left out of the document.
   * Default none.
   */
  pagesUnder?: string;
  mount(app: Hono, edge: RouteEdge): void;
}

/**
 * How long a stopping component may wait: its own bound `capMs`, cut to what is left before the
 * teardown's `deadlineAtMs` (never below zero).
 */
export function stopWaitMs(deadlineAtMs: number, capMs: number, nowMs = Date.now()): number {
  return Math.max(0, Math.min(capMs, deadlineAtMs - nowMs));
}
