import { ErrorCode, UpstreamError, type UpstreamName } from '../errors/riskgate-error.ts';
import { type BackoffPolicy, backoffDelayMs } from '../timing/backoff.ts';
import { type Clock, systemClock } from '../timing/clock.ts';

/**
 * Circuit breakers, one per upstream route (`<upstream> <operation>`: an operation is one method
 * on one route template, so one user's lock-out failing never opens another route). A route opens
 * after `consecutiveFailures` failures in a row, or when most of its recent calls failed, or at once
 * when the vendor says how long to stay away (a 429 or 503 with `Retry-After`). While open, calls
 * are not attempted: they resolve at once with `RG_ERR_CIRCUIT_OPEN` and the time until the next
 * probe, so no decision waits on a route known to be down and an outage does not burn the retry
 * budget of queued actions. When the open period ends, one call at a time goes through as a probe
 * (half-open); a success closes the route, a failure opens it again for longer (the upstream
 * layer's backoff). Only the vendor's failures count: unreachable, 5xx, 429, malformed answers, and
 * timeouts that are the vendor's slowness. A 4xx about the request says the route works.
 *
 * Not counted, either way (`UncountedReason`, reported through `onUncounted`):
 * - `deadline`: the decision's own deadline passed, or its caller hung up, and the call was cut.
 * - `riskgate_late`: a timeout whose timer fired late. A busy or descheduled event loop runs the
 *   timer late and reads the vendor's answer late; were that counted, whoever floods riskgate would
 *   open its breakers and turn its signals off. A timeout counts against the vendor only when its
 *   timer fired within `lateTolerance` of when it was due: 10 % of the call's timeout, at least
 *   10 ms (a healthy loop fires timers within a millisecond or two; a saturated one runs tens of
 *   milliseconds late). And an answer that had arrived, unread, when the timer fired is taken as the
 *   answer (src/upstream/upstream-request.ts), so a late loop never turns an answer into a timeout.
 */

export type CircuitState = 'closed' | 'open' | 'half_open';

export interface CircuitBreakerOptions {
  /** Failures in a row that open a route. Default 5. */
  consecutiveFailures?: number;
  /** Recent calls kept per route for the failure ratio. Default 20. */
  windowCalls?: number;
  /** Share of the recent calls (once at least half the window) that opens a route. Default 0.5. */
  failureRatio?: number;
  /** How long a route stays open, first time and after repeated failed probes (milliseconds). */
  openMs?: BackoffPolicy;
  /** Open periods run on its monotonic time. Default {@link systemClock}. */
  clock?: Clock;
  /** Called on every state change (metrics, logs). */
  onTransition?: (route: string, from: CircuitState, to: CircuitState) => void;
  /**
   * How late a timeout's timer may fire and still count against the vendor: `ratio` of the call's
   * timeout, at least `minMs` milliseconds. Default `{ ratio: 0.1, minMs: 10 }`.
   */
  lateTolerance?: { ratio: number; minMs: number };
  /** Called for each failure not counted against its route, and why (metrics). */
  onUncounted?: (route: string, reason: UncountedReason) => void;
}

/** Why a failed call was not counted against its route (see the module comment). */
export type UncountedReason = 'deadline' | 'riskgate_late';

/** A decision to make a call: go (`probe` when it is the half-open trial), or not, and for how long. */
export type CircuitGate = { go: true; probe: boolean } | { go: false; retryAfterMs: number };

interface Route {
  state: CircuitState;
  /** Ring of recent outcomes: true = failure. */
  recent: boolean[];
  next: number;
  consecutive: number;
  /** When an open route lets its next probe through (monotonic ms). */
  openUntil: number;
  /** Opens in a row without a success in between (drives the open period's backoff). */
  opens: number;
  probing: boolean;
}

const FAILURE_CODES: ReadonlySet<string> = new Set([
  ErrorCode.UPSTREAM_TIMEOUT,
  ErrorCode.UPSTREAM_UNREACHABLE,
  ErrorCode.UPSTREAM_SERVER_ERROR,
  ErrorCode.UPSTREAM_RATE_LIMITED,
  ErrorCode.UPSTREAM_MALFORMED_RESPONSE,
]);
/** The route answered, about the request: it works. */
const ANSWERED_CODES: ReadonlySet<string> = new Set([
  ErrorCode.UPSTREAM_BAD_REQUEST,
  ErrorCode.UPSTREAM_UNAUTHORIZED,
  ErrorCode.UPSTREAM_FORBIDDEN,
  ErrorCode.UPSTREAM_NOT_FOUND,
  ErrorCode.UPSTREAM_GONE,
]);

const DEFAULT_LATE_TOLERANCE = { ratio: 0.1, minMs: 10 };

/**
 * Why `error` is riskgate's own doing rather than the route's, if it is: the decision's deadline
 * (or its caller) cut the call, or a timeout's timer fired more than `tolerance` late.
 */
export function uncountedReason(
  error: UpstreamError,
  tolerance: { ratio: number; minMs: number } = DEFAULT_LATE_TOLERANCE,
): UncountedReason | undefined {
  if (error.code === ErrorCode.DEADLINE_EXCEEDED) return 'deadline';
  const t = error.timeout;
  if (error.code === ErrorCode.UPSTREAM_TIMEOUT && t !== undefined) {
    if (t.ownDelayMs > Math.max(tolerance.minMs, tolerance.ratio * t.timeoutMs)) return 'riskgate_late';
  }
  return undefined;
}

/**
 * What a call's outcome says about its route: it works (a success, or a 4xx about the request),
 * it fails (the vendor's fault), or nothing (riskgate's deadline or late loop, a missing token).
 */
export function routeOutcome(
  error: UpstreamError | undefined,
  tolerance: { ratio: number; minMs: number } = DEFAULT_LATE_TOLERANCE,
): 'success' | 'failure' | 'neutral' {
  if (error === undefined || ANSWERED_CODES.has(error.code)) return 'success';
  if (uncountedReason(error, tolerance) !== undefined) return 'neutral';
  return FAILURE_CODES.has(error.code) ? 'failure' : 'neutral';
}

export class CircuitBreakers {
  readonly #routes = new Map<string, Route>();
  /** Routes listed by `states()` even before their first failure (closed until then). */
  readonly #known = new Set<string>();
  readonly #consecutive: number;
  readonly #window: number;
  readonly #ratio: number;
  readonly #open: BackoffPolicy;
  readonly #clock: Clock;
  readonly #onTransition: CircuitBreakerOptions['onTransition'];
  readonly #onUncounted: CircuitBreakerOptions['onUncounted'];
  readonly #tolerance: { ratio: number; minMs: number };

  constructor(options: CircuitBreakerOptions = {}) {
    this.#consecutive = options.consecutiveFailures ?? 5;
    this.#window = options.windowCalls ?? 20;
    this.#ratio = options.failureRatio ?? 0.5;
    this.#open = options.openMs ?? { initialMs: 2000, maxMs: 30_000 };
    this.#clock = options.clock ?? systemClock;
    this.#onTransition = options.onTransition;
    this.#onUncounted = options.onUncounted;
    this.#tolerance = options.lateTolerance ?? DEFAULT_LATE_TOLERANCE;
  }

  /** Whether a call on `route` may go now. A `probe` must be followed by `record`. */
  gate(route: string): CircuitGate {
    const r = this.#routes.get(route);
    if (r === undefined || r.state === 'closed') return GO;
    const at = this.#clock.monotonicMs();
    if (r.state === 'open') {
      if (at < r.openUntil) return { go: false, retryAfterMs: r.openUntil - at };
      this.#move(route, r, 'half_open');
    }
    // Half-open: one probe at a time; the others wait as if open, a moment.
    if (r.probing) return { go: false, retryAfterMs: this.#open.initialMs / 4 };
    r.probing = true;
    return PROBE;
  }

  /**
   * Records a call's outcome (`error` undefined: a success; see `routeOutcome`). A failure with
   * `retryAfterMs` (the vendor's `Retry-After`) opens the route for at least that long.
   */
  record(route: string, error: UpstreamError | undefined, probe: boolean): void {
    const outcome = routeOutcome(error, this.#tolerance);
    let r = this.#routes.get(route);
    if (r !== undefined && probe) r.probing = false;
    if (outcome === 'neutral') {
      const why = error === undefined ? undefined : uncountedReason(error, this.#tolerance);
      if (why !== undefined) this.#onUncounted?.(route, why);
      return;
    }
    const failed = outcome === 'failure';
    if (r === undefined) {
      if (!failed) return; // a healthy route needs no state
      r = { state: 'closed', recent: [], next: 0, consecutive: 0, openUntil: 0, opens: 0, probing: false };
      this.#routes.set(route, r);
    }
    if (!failed) {
      // Only the probe speaks for an open route: a call sent before it opened proves nothing now.
      if (r.state !== 'closed' && !probe) return;
      r.consecutive = 0;
      this.#push(r, false);
      if (r.state !== 'closed') {
        r.opens = 0;
        r.recent = [];
        r.next = 0;
        this.#move(route, r, 'closed');
      }
      return;
    }
    r.consecutive++;
    this.#push(r, true);
    const retryAfterMs = error?.retryAfterMs;
    // A late failure of a call sent before the route opened: it is open already.
    if (r.state === 'open' && retryAfterMs === undefined) return;
    if (r.state === 'half_open' || retryAfterMs !== undefined || this.#tripped(r)) {
      r.opens++;
      r.openUntil = this.#clock.monotonicMs() + backoffDelayMs(this.#open, r.opens, retryAfterMs);
      if (r.state !== 'open') this.#move(route, r, 'open');
    }
  }

  /**
   * Names routes `states()` lists from the start, closed until they fail, so a dashboard or an
   * alert sees every route before its first call. Changes nothing about how a route opens.
   */
  declareRoutes(routes: Iterable<string>): void {
    for (const route of routes) this.#known.add(route);
  }

  /** Every declared route and every route with state, for /metrics and /healthz. */
  states(): { route: string; state: CircuitState; retryAfterMs: number }[] {
    const at = this.#clock.monotonicMs();
    const out = [...this.#routes].map(([route, r]) => ({
      route,
      state: r.state,
      retryAfterMs: r.state === 'open' ? Math.max(0, r.openUntil - at) : 0,
    }));
    for (const route of this.#known)
      if (!this.#routes.has(route)) out.push({ route, state: 'closed', retryAfterMs: 0 });
    return out;
  }

  #tripped(r: Route): boolean {
    if (r.consecutive >= this.#consecutive) return true;
    const n = r.recent.length;
    if (n < this.#window / 2) return false;
    let failures = 0;
    for (const f of r.recent) if (f) failures++;
    return failures / n >= this.#ratio;
  }

  #push(r: Route, failed: boolean): void {
    if (r.recent.length < this.#window) r.recent.push(failed);
    else r.recent[r.next] = failed;
    r.next = (r.next + 1) % this.#window;
  }

  #move(route: string, r: Route, to: CircuitState): void {
    const from = r.state;
    r.state = to;
    this.#onTransition?.(route, from, to);
  }
}

const GO: CircuitGate = { go: true, probe: false };
const PROBE: CircuitGate = { go: true, probe: true };

/** The error of a call not attempted because its route is open. */
export function circuitOpenError(
  upstream: UpstreamName,
  operation: string,
  retryAfterMs: number,
): UpstreamError {
  return new UpstreamError(
    ErrorCode.CIRCUIT_OPEN,
    `${upstream} ${operation}: circuit open (the route is failing; next try in ${Math.ceil(retryAfterMs)} ms)`,
    { upstream, retryAfterMs },
  );
}
