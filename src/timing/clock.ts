/**
 * The clock the timing helpers read and set timers on. Production code uses {@link systemClock};
 * a test may pass its own, though `vi.useFakeTimers()` already drives the system clock (it looks the
 * globals up at every call, so timers faked after import are the ones it uses).
 */
export interface Clock {
  /** Wall-clock time, epoch milliseconds (`Date.now`). */
  nowMs(): number;
  /** Monotonic time for measuring intervals, milliseconds from an arbitrary origin (`performance.now`). */
  monotonicMs(): number;
  /** Calls `fn` once after `delayMs` milliseconds; returns a handle for {@link Clock.clearTimeout}. */
  setTimeout(fn: () => void, delayMs: number): NodeJS.Timeout;
  /** Cancels a timer from {@link Clock.setTimeout}; a handle already fired or cleared is ignored. */
  clearTimeout(timer: NodeJS.Timeout | undefined): void;
}

/** The process's clock and timers. */
export const systemClock: Clock = {
  nowMs: () => Date.now(),
  monotonicMs: () => performance.now(),
  setTimeout: (fn, delayMs) => setTimeout(fn, delayMs),
  clearTimeout: (timer) => clearTimeout(timer),
};
