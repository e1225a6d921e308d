/**
 * The one retry delay of the upstream layer: exponential from `initialMs`, doubling per failure up
 * to `maxMs`, jittered over its upper half (instances spread apart, none ever retries at once), and
 * never shorter than the upstream's own `Retry-After`. The token manager, the action outbox, the Log
 * API poller and the circuit breakers all wait this way.
 */
export interface BackoffPolicy {
  /** Delay after the first failure, milliseconds. */
  initialMs: number;
  /** Longest delay from the exponential, milliseconds. */
  maxMs: number;
  /** Jitter source in [0, 1). Default `Math.random`. */
  random?: () => number;
}

/** Longest `Retry-After` any waiter honours, milliseconds: a bigger one is a misconfiguration, not a plan. */
export const MAX_RETRY_AFTER_MS = 60_000;

/**
 * The wait after `failures` consecutive failures (1 for the first), milliseconds. With
 * `retryAfterMs`, the wait is at least that (capped at MAX_RETRY_AFTER_MS).
 */
export function backoffDelayMs(policy: BackoffPolicy, failures: number, retryAfterMs?: number): number {
  const exp = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.max(0, failures - 1));
  const jittered = exp * (0.5 + (policy.random ?? Math.random)() * 0.5);
  return retryAfterMs === undefined
    ? jittered
    : Math.max(jittered, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
}
