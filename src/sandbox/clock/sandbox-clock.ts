import type { SandboxClock } from '../sandbox-config.ts';

/** The sandbox's clock: wall time plus an offset that `POST /sandbox/clock` moves forward. */
export interface AdjustableClock extends SandboxClock {
  /** Moves the clock forward by `ms` milliseconds (never backwards). */
  advance(ms: number): void;
  /** Current offset from wall time, milliseconds. */
  offsetMs(): number;
  /** Back to wall time (on `POST /sandbox/reset`). */
  resetOffset(): void;
}

/** Creates a clock reading `wallNow()` (default `Date.now`) plus an adjustable offset. */
export function createSandboxClock(wallNow: () => number = Date.now): AdjustableClock {
  let offset = 0;
  return {
    now: () => wallNow() + offset,
    advance(ms) {
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError('the sandbox clock only moves forward');
      offset += ms;
    },
    offsetMs: () => offset,
    resetOffset() {
      offset = 0;
    },
  };
}
