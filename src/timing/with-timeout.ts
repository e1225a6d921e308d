import { type Clock, type ClockTimer, systemClock } from './clock.ts';

/** How {@link withTimeout} races `work` against its timer. */
export interface TimeoutOptions {
  /** How long `work` may take, milliseconds (0 or less: the timer fires on the next turn). */
  timeoutMs: number;
  /** The error the race rejects with when the timer wins. */
  onTimeout: () => Error;
  /**
   * When the timer fires, first let the I/O that arrived by then be handled (one poll phase, a
   * `setImmediate`) and only then call `work` late: a timer that fired late because the event loop
   * was busy must not blame the other side for the caller's own slowness. Default `false`.
   */
  tolerateLateTimer?: boolean;
  /** Whether the timer may keep the process alive. Default `true`. */
  ref?: boolean;
  /** Default {@link systemClock}. */
  clock?: Clock;
}

/**
 * `work`'s result, or a rejection with `onTimeout()` once `timeoutMs` pass first. `work` itself goes
 * on (a write may still land after its caller was told it timed out); the timer is cleared as soon
 * as `work` settles.
 */
export function withTimeout<T>(work: Promise<T>, opts: TimeoutOptions): Promise<T> {
  const clock = opts.clock ?? systemClock;
  return new Promise<T>((resolve, reject) => {
    const expired = (): void => reject(opts.onTimeout());
    let immediate: NodeJS.Immediate | undefined;
    const timer = clock.setTimeout(
      opts.tolerateLateTimer
        ? () => {
            immediate = setImmediate(expired);
          }
        : expired,
      Math.max(0, opts.timeoutMs),
    );
    if (opts.ref === false) timer.unref();
    const cancel = (): void => {
      clock.clearTimeout(timer);
      if (immediate !== undefined) clearImmediate(immediate);
    };
    work.then(
      (value) => {
        cancel();
        resolve(value);
      },
      (error: unknown) => {
        cancel();
        reject(error);
      },
    );
  });
}

/**
 * Whether `work` fulfilled within `timeoutMs` milliseconds: `true` as soon as it does, `false` once
 * the time is up (`work` goes on). Rejects when `work` rejects first. For waits that end either way,
 * like a drain that gives up after its grace period.
 */
export async function settlesWithin(
  work: Promise<unknown>,
  timeoutMs: number,
  opts?: { ref?: boolean; clock?: Clock },
): Promise<boolean> {
  const clock = opts?.clock ?? systemClock;
  let timer: ClockTimer | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = clock.setTimeout(() => resolve(false), timeoutMs);
    if (opts?.ref === false) timer.unref();
  });
  try {
    return await Promise.race([work.then(() => true as const), timedOut]);
  } finally {
    clock.clearTimeout(timer);
  }
}
