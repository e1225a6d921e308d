import { ErrorCode, type UpstreamError } from '../errors/riskgate-error.ts';
import type { InputOutcome } from '../policy/inputs/input-values.ts';
import { type Clock, type ClockTimer, systemClock } from '../timing/clock.ts';
import type { UpstreamResult } from '../upstream/upstream-result.ts';

/**
 * The one join of a decision's inputs: every source starts at once, each ends at its own timeout
 * or at the decision's deadline, whichever is first, and what each gave comes back as a value. The
 * deadline is enforced here and nowhere else in the fan-out: at it, everything still running is
 * aborted (one shared signal) and marked `deadline`; a result that arrives later is ignored.
 */

/** One input to fetch: a row of the decision's input table (src/policy/inputs/input-table.ts). */
export interface InputSource<T = unknown> {
  /** The call's name in Server-Timing, metrics and the decision log: `signals-newBrowser`, `admin-user`. */
  name: string;
  /** Its own timeout, milliseconds. At or past the deadline, the deadline alone ends it. */
  timeoutMs: number;
  /**
   * Starts the call. `deadlineAt` (epoch milliseconds) is the earlier of the deadline and the own
   * timeout, so a client retries only when that fits before it. Resolves, never rejects: a
   * rejection (a bug in a client) becomes an `RG_ERR_INTERNAL` outcome.
   */
  fetch(call: { signal: AbortSignal; deadlineAt: number; timeoutMs: number }): Promise<UpstreamResult<T>>;
}

export type { InputOutcome };

/** One upstream call (or step) of a decision, for Server-Timing, metrics and the decision log. */
export interface CallTiming {
  /** `signals-<name>`, `admin-user`, `admin-devices`, `velocity`, `history`, `admin-otc`. */
  name: string;
  durationMs: number;
  /** `ok`, or why not: `timeout`, `deadline`, an `RG_ERR_*` code. */
  outcome: string;
}

export interface GatherOptions {
  /** `performance.now()` (the clock's monotonic time) when the decision's deadline passes. */
  deadlineAtMs: number;
  /** The caller hung up: every call still running is aborted (its client answers at once). */
  signal?: AbortSignal | undefined;
  /** Default: the system clock (`vi.useFakeTimers()` drives it in tests). */
  clock?: Clock;
}

export interface Gathered {
  /** One per source, in the sources' order. */
  outcomes: InputOutcome[];
  /** One per source, in the order they ended (a call cut at the deadline last, in source order). */
  calls: CallTiming[];
}

/** The reason an upstream failure is reported under (`SignalOutcome.reason`). */
export function unavailableReason(error: UpstreamError): string {
  if (error.code === ErrorCode.UPSTREAM_TIMEOUT) return 'timeout';
  if (error.code === ErrorCode.DEADLINE_EXCEEDED) return 'deadline';
  if (error.code === ErrorCode.CIRCUIT_OPEN) return 'circuit_open';
  return error.code;
}

const NOTHING: Gathered = { outcomes: [], calls: [] };

/**
 * Starts every source at once and resolves when each has an outcome: its result, its own timeout
 * (`timeout`), or the deadline (`deadline`, and the shared signal aborts). Never rejects.
 */
export function gather(sources: readonly InputSource[], options: GatherOptions): Promise<Gathered> {
  if (sources.length === 0) return Promise.resolve(NOTHING);
  const clock = options.clock ?? systemClock;
  const startedAt = clock.monotonicMs();
  const budgetMs = Math.max(0, options.deadlineAtMs - startedAt);
  const nowMs = clock.nowMs();
  const controller = new AbortController();
  const signal = controller.signal;
  const callerGone = options.signal;
  // The caller hung up: nobody will read the answer, so the fan-out stops now (as at the deadline).
  if (callerGone?.aborted) controller.abort();
  else callerGone?.addEventListener('abort', () => controller.abort(), { once: true, signal });

  const outcomes: (InputOutcome | undefined)[] = new Array(sources.length).fill(undefined);
  const timers: ClockTimer[] = [];
  const calls: CallTiming[] = [];
  let pending = sources.length;
  let closed = false;
  let deadline: ClockTimer | undefined;
  let done!: (gathered: Gathered) => void;
  const finished = new Promise<Gathered>((resolve) => {
    done = resolve;
  });
  const close = () => {
    closed = true;
    clock.clearTimeout(deadline);
    for (const timer of timers) clock.clearTimeout(timer);
    done({ outcomes: outcomes as InputOutcome[], calls });
  };
  const end = (i: number, outcome: InputOutcome, durationMs: number) => {
    if (closed || outcomes[i] !== undefined) return; // late: the timeout or the deadline came first
    outcomes[i] = outcome;
    calls.push({
      name: sources[i]!.name,
      durationMs,
      outcome: outcome.status === 'ok' ? 'ok' : outcome.reason,
    });
    if (--pending === 0) close();
  };

  // Nothing left of the deadline (the request waited it out before its handler, as under
  // overload): no call is sent only to be aborted on the next turn, adding vendor load right then.
  if (budgetMs <= 0 || signal.aborted) {
    sources.forEach((_source, i) => {
      end(i, { status: 'unavailable', reason: 'deadline' }, 0);
    });
    return finished;
  }
  const byTimeout = new Map<number, number[]>();
  sources.forEach((source, i) => {
    const onResult = (r: UpstreamResult<unknown>) =>
      end(
        i,
        r.ok
          ? { status: 'ok', value: r.value }
          : { status: 'unavailable', reason: unavailableReason(r.error) },
        r.durationMs,
      );
    const onRejected = () =>
      end(i, { status: 'unavailable', reason: ErrorCode.INTERNAL }, clock.monotonicMs() - startedAt);
    const call = {
      signal,
      deadlineAt: Math.min(nowMs + budgetMs, nowMs + source.timeoutMs),
      timeoutMs: source.timeoutMs,
    };
    let started: Promise<UpstreamResult<unknown>>;
    try {
      started = source.fetch(call);
    } catch {
      started = Promise.reject(new Error('the client threw'));
    }
    started.then(onResult, onRejected);
    if (source.timeoutMs < budgetMs) {
      const same = byTimeout.get(source.timeoutMs);
      if (same === undefined) byTimeout.set(source.timeoutMs, [i]);
      else same.push(i);
    }
  });
  // One timer per distinct own timeout (a policy's signals mostly share one), not one per source.
  for (const [timeoutMs, indices] of byTimeout) {
    timers.push(
      clock.setTimeout(() => {
        const atMs = clock.monotonicMs() - startedAt;
        for (const i of indices) end(i, { status: 'unavailable', reason: 'timeout' }, atMs);
      }, timeoutMs),
    );
  }
  const onDeadline = () => {
    if (closed) return;
    // A timer runs on the event loop's time, read at the start of its turn: after a long turn it
    // fires early by that turn's length (14 ms seen on a starved machine). The deadline is never
    // cut short: what is left of it is waited for again.
    const leftMs = options.deadlineAtMs - clock.monotonicMs();
    if (leftMs >= 1) {
      deadline = clock.setTimeout(onDeadline, leftMs);
      return;
    }
    closed = true;
    controller.abort();
    const atMs = clock.monotonicMs() - startedAt;
    sources.forEach((source, i) => {
      if (outcomes[i] !== undefined) return;
      outcomes[i] = { status: 'unavailable', reason: 'deadline' };
      calls.push({ name: source.name, durationMs: atMs, outcome: 'deadline' });
    });
    close();
  };
  deadline = clock.setTimeout(onDeadline, budgetMs);
  return finished;
}
