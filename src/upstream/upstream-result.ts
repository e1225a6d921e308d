import type { UpstreamError } from '../errors/riskgate-error.ts';

/**
 * What every upstream client method resolves to. Client methods never reject for upstream
 * failures (only for programmer errors): the /decide fan-out handles outcomes as values, with no
 * exception cost on the hot path. `durationMs` feeds Server-Timing and the latency metrics.
 */
export type UpstreamResult<T> =
  | { ok: true; value: T; durationMs: number }
  | { ok: false; error: UpstreamError; durationMs: number };

/** Per-call options every client method accepts. */
export interface CallOptions {
  /**
   * The decision's shared deadline signal (one per /decide, shared across its fan-out). When it
   * aborts, the call resolves at once with `RG_ERR_DEADLINE_EXCEEDED`.
   */
  signal?: AbortSignal;
  /**
   * When `signal` will abort, as epoch milliseconds on the client's clock (its `now` option).
   * Optional; when given, a retry (or a wait on `Retry-After`) is only attempted if it fits before
   * it. Without it, retries are bounded by the client's own limits.
   */
  deadlineAt?: number;
  /** This call's own timeout in milliseconds, on top of `signal`. Default: the client's. */
  timeoutMs?: number;
  /**
   * When `signal` is sure to have aborted, as `performance.now()` time: the decision's deadline,
   * whose timer aborts it (a caller hanging up only makes it sooner). Optional; an attempt due to
   * time out at or after it sets no timer of its own, since the signal ends it first (issue 32: one
   * deadline timer per decision, not one per attempt). Without it, every attempt keeps its timer.
   */
  signalAbortsAtMs?: number;
  /** W3C `traceparent` to pass upstream, when tracing is on. */
  traceparent?: string;
}

/**
 * Wraps a client method so a synchronous throw (an `InputError` from argument checks before any
 * I/O) surfaces as a rejected promise, the way any async API fails, never as a throw at the call.
 */
export function rejecting<A extends unknown[], T>(
  fn: (...args: A) => Promise<T>,
): (...args: A) => Promise<T> {
  return (...args) => {
    try {
      return fn(...args);
    } catch (err) {
      return Promise.reject(err);
    }
  };
}
