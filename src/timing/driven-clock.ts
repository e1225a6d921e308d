import type { Clock, ClockTimer } from './clock.ts';

interface DrivenTimer extends ClockTimer {
  readonly dueMs: number;
  readonly seq: number;
  readonly fn: () => void;
}

/** Where a {@link DrivenClock} starts. */
export interface DrivenClockOptions {
  /** Wall time at the start, epoch milliseconds. Default 1 767 225 600 000 (2026-01-01T00:00:00Z). */
  nowMs?: number;
  /** Monotonic time at the start, milliseconds. Default 0. */
  monotonicMs?: number;
}

/**
 * A {@link Clock} that moves only when a test moves it: `advance` moves wall and monotonic time
 * together and fires the timers that fall due, in order, each at its own time; `stepWall` moves
 * the wall clock alone (an NTP step), which intervals must not see. Unlike `vi.useFakeTimers()` it
 * leaves the process's own timers real: sockets, the sandbox and `eventually` keep working.
 */
export class DrivenClock implements Clock {
  #wallMs: number;
  #monoMs: number;
  #seq = 0;
  #timers: DrivenTimer[] = [];

  constructor(options: DrivenClockOptions = {}) {
    this.#wallMs = options.nowMs ?? Date.UTC(2026, 0, 1);
    this.#monoMs = options.monotonicMs ?? 0;
  }

  nowMs(): number {
    return this.#wallMs;
  }

  monotonicMs(): number {
    return this.#monoMs;
  }

  setTimeout(fn: () => void, delayMs: number): ClockTimer {
    const timer: DrivenTimer = {
      dueMs: this.#monoMs + Math.max(0, delayMs),
      seq: this.#seq++,
      fn,
      unref: () => timer,
    };
    this.#timers.push(timer);
    return timer;
  }

  clearTimeout(timer: ClockTimer | undefined): void {
    this.#timers = this.#timers.filter((t) => t !== timer);
  }

  /** Timers set and not yet fired nor cleared. */
  get pendingTimers(): number {
    return this.#timers.length;
  }

  /**
   * Moves both times on by `ms` (at least 0), firing each timer due on the way at its due time, in
   * due order (ties in the order set). After each timer, and at the end, lets the work it started
   * run (one turn of the event loop), so a timer set by a timer in the same span fires too.
   */
  async advance(ms: number): Promise<void> {
    const targetMs = this.#monoMs + Math.max(0, ms);
    for (;;) {
      const next = this.#next(targetMs);
      if (next === undefined) break;
      this.#move(Math.max(0, next.dueMs - this.#monoMs));
      this.#timers = this.#timers.filter((t) => t !== next);
      next.fn();
      await turn();
    }
    this.#move(targetMs - this.#monoMs);
    await turn();
  }

  /**
   * Moves both times on by `ms` at once, for code that reads the time and sets no timer (a
   * breaker, a cache's age): the timers due on the way fire in order, with no turn of the event
   * loop between them (use {@link DrivenClock.advance} when their work must run).
   */
  tick(ms: number): void {
    const targetMs = this.#monoMs + Math.max(0, ms);
    for (let next = this.#next(targetMs); next !== undefined; next = this.#next(targetMs)) {
      this.#move(Math.max(0, next.dueMs - this.#monoMs));
      this.#timers = this.#timers.filter((t) => t !== next);
      next.fn();
    }
    this.#move(targetMs - this.#monoMs);
  }

  /**
   * Moves both times on by `ms` with the event loop stuck: no timer fires, those that fall due
   * fire late, at the next `tick` or `advance`.
   */
  stall(ms: number): void {
    this.#move(Math.max(0, ms));
  }

  /** Steps the wall clock alone by `ms` (negative: backwards); monotonic time and timers stay. */
  stepWall(ms: number): void {
    this.#wallMs += ms;
  }

  #move(ms: number): void {
    this.#wallMs += ms;
    this.#monoMs += ms;
  }

  #next(untilMs: number): DrivenTimer | undefined {
    let next: DrivenTimer | undefined;
    for (const t of this.#timers) {
      if (t.dueMs > untilMs) continue;
      if (next === undefined || t.dueMs < next.dueMs || (t.dueMs === next.dueMs && t.seq < next.seq))
        next = t;
    }
    return next;
  }
}

/** One turn of the real event loop: promise callbacks and I/O already arrived run first. */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * The system clock with its wall time stepped by a test (`step`), beside a sandbox whose clock the
 * test moves too: time runs in real time, monotonic time and timers are the system's.
 */
export class SteppedClock implements Clock {
  #offsetMs: number;

  /** @param offsetMs where the wall time starts, from the system's, milliseconds. Default 0. */
  constructor(offsetMs = 0) {
    this.#offsetMs = offsetMs;
  }

  nowMs(): number {
    return Date.now() + this.#offsetMs;
  }

  monotonicMs(): number {
    return performance.now();
  }

  setTimeout(fn: () => void, delayMs: number): ClockTimer {
    return setTimeout(fn, delayMs);
  }

  clearTimeout(timer: ClockTimer | undefined): void {
    clearTimeout(timer as NodeJS.Timeout | undefined);
  }

  /** Steps the wall time by `ms` (negative: backwards). */
  step(ms: number): void {
    this.#offsetMs += ms;
  }
}
