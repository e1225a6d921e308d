/**
 * Riskgate's one clock: wall time, monotonic time and timers, handed to every component that reads
 * time (the component context's `clock`, src/service/riskgate-options.ts). Production code uses
 * {@link systemClock}; a test passes a {@link DrivenClock} (src/timing/driven-clock.ts) and moves it.
 *
 * Which time to read: wall time (`nowMs`) for what is stored, signed or compared with another
 * machine's time (a lock-out's expiry, a request's `Date`, a Log API window); monotonic time
 * (`monotonicMs`) for intervals within this process (a breaker's open period, a drain's deadline,
 * a duration), which a step of the wall clock must not stretch or cut.
 */
export interface Clock {
  /** Wall-clock time, epoch milliseconds (`Date.now`). */
  nowMs(): number;
  /** Monotonic time for measuring intervals, milliseconds from an arbitrary origin (`performance.now`). */
  monotonicMs(): number;
  /** Calls `fn` once after `delayMs` milliseconds; returns a handle for {@link Clock.clearTimeout}. */
  setTimeout(fn: () => void, delayMs: number): ClockTimer;
  /** Cancels a timer from {@link Clock.setTimeout}; a handle already fired or cleared is ignored. */
  clearTimeout(timer: ClockTimer | undefined): void;
}

/** A timer of a {@link Clock}: Node's `Timeout`, or a driven clock's. */
export interface ClockTimer {
  /** Lets the process exit while only this timer is pending. */
  unref(): unknown;
}

/** The process's clock and timers. */
export const systemClock: Clock = {
  nowMs: () => Date.now(),
  monotonicMs: () => performance.now(),
  setTimeout: (fn, delayMs) => setTimeout(fn, delayMs),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
};
