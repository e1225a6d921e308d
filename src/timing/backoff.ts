/**
 * The one retry delay: exponential from `initialMs`, doubling per failure up to `maxMs`, jittered
 * over its upper half (instances spread apart, none ever retries at once), and never shorter than
 * the other side's own `Retry-After`. The upstream calls, the token manager, the action queue, the
 * outbox, the Log API poller and the circuit breakers all wait this way; the Redis reconnect and the
 * sandbox's callback retries use the same exponential without jitter.
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
 * The exponential alone, without jitter, milliseconds: `initialMs` after the first failure (and for
 * `failures` of 0 or less), doubling per further failure, at most `maxMs`.
 */
export function exponentialDelayMs(
  policy: Pick<BackoffPolicy, 'initialMs' | 'maxMs'>,
  failures: number,
): number {
  return Math.min(policy.maxMs, policy.initialMs * 2 ** Math.max(0, failures - 1));
}

/**
 * The wait after `failures` consecutive failures (1 for the first), milliseconds. With
 * `retryAfterMs`, the wait is at least that (capped at MAX_RETRY_AFTER_MS).
 */
export function backoffDelayMs(policy: BackoffPolicy, failures: number, retryAfterMs?: number): number {
  const jittered = exponentialDelayMs(policy, failures) * (0.5 + (policy.random ?? Math.random)() * 0.5);
  return retryAfterMs === undefined
    ? jittered
    : Math.max(jittered, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
}
