import { setTimeout as sleep } from 'node:timers/promises';

/** The real clock, taken before any test can fake `performance` (vi.useFakeTimers does). */
const realNow = performance.now.bind(performance);

/** Not yet: what a check returns while its condition does not hold. */
type NotYet = undefined | false;

export interface EventuallyOptions {
  /** How long to keep checking, milliseconds. Default 10,000: generous, for a busy machine. */
  timeoutMs?: number;
  /** Between checks, milliseconds. Default 20. */
  intervalMs?: number;
  /** What is awaited, for the error when it does not happen. */
  what?: string;
}

/**
 * The one way tests wait for something that happens after an answer (queued actions, the Log API
 * follower, a reload, a child's file): polls `check` (sync or async) until it returns a value
 * other than `undefined` or `false`, and returns that value. Fails after `timeoutMs` (a number
 * instead of options is the timeout), with the last error `check` threw, if any, as the cause.
 * Never a fixed sleep: it returns as soon as the condition holds, and waits longer on a slow
 * machine. Waits on real time (node:timers/promises and a `performance.now` taken at import,
 * which `vi.useFakeTimers()` leaves alone): it polls and times out under fake timers too.
 */
export async function eventually<T>(
  check: () => T | NotYet | Promise<T | NotYet>,
  options: EventuallyOptions | number = {},
): Promise<T> {
  const {
    timeoutMs = 10_000,
    intervalMs = 20,
    what,
  } = typeof options === 'number' ? { timeoutMs: options } : options;
  const until = realNow() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
      lastError = undefined;
    } catch (error) {
      lastError = error;
    }
    if (realNow() > until) {
      throw new Error(`${what ?? 'condition'} not met within ${timeoutMs} ms`, {
        ...(lastError !== undefined && { cause: lastError }),
      });
    }
    await sleep(intervalMs);
  }
}
