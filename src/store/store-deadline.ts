import { withTimeout } from '../timing/with-timeout.ts';

/**
 * Deadlines on store calls (the outbox, the feature store). A Redis client's own command timeout
 * stops at the socket: once a command is written, node-redis waits for its reply however long a
 * stalled server (SIGSTOP, a full disk under `appendfsync always`, a paused VM) takes to send it.
 * These race the reply against a timer instead, so the caller always gets its answer in time.
 *
 * A timer that fires late because the event loop was busy may find the reply already read from
 * the socket but not yet handled: the deadline gives such I/O one poll phase (a `setImmediate`)
 * before it calls the call late, so riskgate's own slowness is not blamed on the store.
 */

/** A store call that did not answer within its deadline (it may still complete later). */
export class StoreTimeoutError extends Error {
  readonly timeoutMs: number;
  constructor(what: string, timeoutMs: number) {
    super(`${what}: no answer within ${timeoutMs} ms`);
    this.name = 'StoreTimeoutError';
    this.timeoutMs = timeoutMs;
  }
}

/**
 * `work`'s result, or a rejection with {@link StoreTimeoutError} once `timeoutMs` (milliseconds)
 * pass first. `work` itself goes on: a write may still land after its caller was told it timed out.
 */
export function withDeadline<T>(work: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  return withTimeout(work, {
    timeoutMs,
    onTimeout: () => new StoreTimeoutError(what, timeoutMs),
    tolerateLateTimer: true,
  });
}
