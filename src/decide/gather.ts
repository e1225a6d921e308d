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
   * timeout, so a client retries only when that fits before it. `signalAbortsAtMs` is when `signal`
   * aborts at the latest (the deadline, monotonic time), so an attempt that would time out no sooner
   * needs no timer of its own. Resolves, never rejects: a rejection (a bug in a client) becomes an
   * `RG_ERR_INTERNAL` outcome.
   */
  fetch(call: SourceCall): Promise<UpstreamResult<T>>;
}

/** What `InputSource.fetch` is given: the shared signal, the times that bound the call. */
export interface SourceCall {
  signal: AbortSignal;
  /** Epoch milliseconds: the earlier of the deadline and the own timeout. */
  deadlineAt: number;
  timeoutMs: number;
  /**
   * `performance.now()` time by which `signal` has aborted; `Infinity` when the gather runs on a
   * driven clock (its timers are not the attempts').
   */
  signalAbortsAtMs: number;
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
  return new Fanout(sources, options).finished;
}

/**
 * One `gather`'s state. A class rather than closures over locals: the decision path runs under
 * tsx, whose `keepNames` wraps every named function expression (`const end = () => ...`) in a
 * `defineProperty` call each time it is created, and this runs once per decision (issue 32).
 */
class Fanout {
  readonly finished: Promise<Gathered>;
  readonly #sources: readonly InputSource[];
  readonly #options: GatherOptions;
  readonly #clock: Clock;
  readonly #startedAt: number;
  readonly #controller = new AbortController();
  readonly #outcomes: (InputOutcome | undefined)[];
  readonly #calls: CallTiming[] = [];
  /** The own timeouts shorter than the budget, ascending, each with its sources (see `#onTimer`). */
  #dues: [timeoutMs: number, indices: number[]][] | undefined;
  /** The next of `#dues` the timer is for; past the last, the timer is the deadline's. */
  #nextDue = 0;
  readonly #budgetMs: number;
  #pending: number;
  #closed = false;
  /** The fan-out's one timer: the next own timeout due, then the deadline. */
  #timer: ClockTimer | undefined;
  #done!: (gathered: Gathered) => void;
  /** Aborts the fan-out when the caller hangs up; removed once it is over. */
  #onCallerGone: (() => void) | undefined;

  constructor(sources: readonly InputSource[], options: GatherOptions) {
    this.#sources = sources;
    this.#options = options;
    const clock = options.clock ?? systemClock;
    this.#clock = clock;
    const startedAt = clock.monotonicMs();
    this.#startedAt = startedAt;
    const budgetMs = Math.max(0, options.deadlineAtMs - startedAt);
    this.#budgetMs = budgetMs;
    const nowMs = clock.nowMs();
    this.#outcomes = new Array(sources.length).fill(undefined);
    this.#pending = sources.length;
    this.finished = new Promise<Gathered>((resolve) => {
      this.#done = resolve;
    });
    const signal = this.#controller.signal;
    const callerGone = options.signal;
    // The caller hung up: nobody will read the answer, so the fan-out stops now (as at the deadline).
    if (callerGone?.aborted) this.#controller.abort();
    else if (callerGone !== undefined) {
      this.#onCallerGone = () => this.#controller.abort();
      callerGone.addEventListener('abort', this.#onCallerGone, { once: true });
    }

    // Nothing left of the deadline (the request waited it out before its handler, as under
    // overload): no call is sent only to be aborted on the next turn, adding vendor load right then.
    if (budgetMs <= 0 || signal.aborted) {
      for (let i = 0; i < sources.length; i++) this.#end(i, { status: 'unavailable', reason: 'deadline' }, 0);
      return;
    }
    // The deadline's timer aborts the signal then, never sooner (see #onDeadline). Only the system
    // clock's timers run on the attempts' time; a driven clock's deadline says nothing about it.
    const signalAbortsAtMs = clock === systemClock ? options.deadlineAtMs : Number.POSITIVE_INFINITY;
    let byTimeout: Map<number, number[]> | undefined;
    for (let i = 0; i < sources.length; i++) {
      const source = sources[i]!;
      const call: SourceCall = {
        signal,
        deadlineAt: Math.min(nowMs + budgetMs, nowMs + source.timeoutMs),
        timeoutMs: source.timeoutMs,
        signalAbortsAtMs,
      };
      let started: Promise<UpstreamResult<unknown>>;
      try {
        started = source.fetch(call);
      } catch {
        started = Promise.reject(new Error('the client threw'));
      }
      started.then(
        (r) => this.#result(i, r),
        () => this.#end(i, { status: 'unavailable', reason: ErrorCode.INTERNAL }, this.#sinceStartMs()),
      );
      if (source.timeoutMs < budgetMs) {
        byTimeout ??= new Map();
        const same = byTimeout.get(source.timeoutMs);
        if (same === undefined) byTimeout.set(source.timeoutMs, [i]);
        else same.push(i);
      }
    }
    // One timer for the whole fan-out, not one per distinct own timeout plus the deadline's: it is
    // set for the earliest, and set again for the next only if something is still running then.
    // Most decisions end before the first, so they set and clear one timer (issue 32).
    if (byTimeout !== undefined) this.#dues = [...byTimeout].sort((a, b) => a[0] - b[0]);
    this.#timer = clock.setTimeout(() => this.#onTimer(), this.#dues?.[0]?.[0] ?? budgetMs);
  }

  /** The timer fired: the own timeouts now due end their sources, then the timer is set again. */
  #onTimer(): void {
    const dues = this.#dues;
    if (this.#closed) return;
    if (dues === undefined || this.#nextDue >= dues.length) {
      this.#onDeadline();
      return;
    }
    const atMs = this.#sinceStartMs();
    // The due group ends now whatever the clock says (as its own timer did); any later one also
    // past (a long turn delayed this timer) with it.
    do {
      for (const i of dues[this.#nextDue++]![1])
        this.#end(i, { status: 'unavailable', reason: 'timeout' }, atMs);
    } while (!this.#closed && this.#nextDue < dues.length && dues[this.#nextDue]![0] <= atMs);
    if (this.#closed) return;
    const nextMs = this.#nextDue < dues.length ? dues[this.#nextDue]![0] : this.#budgetMs;
    this.#timer = this.#clock.setTimeout(() => this.#onTimer(), Math.max(0, nextMs - atMs));
  }

  #sinceStartMs(): number {
    return this.#clock.monotonicMs() - this.#startedAt;
  }

  #result(i: number, r: UpstreamResult<unknown>): void {
    this.#end(
      i,
      r.ok ? { status: 'ok', value: r.value } : { status: 'unavailable', reason: unavailableReason(r.error) },
      r.durationMs,
    );
  }

  #end(i: number, outcome: InputOutcome, durationMs: number): void {
    if (this.#closed || this.#outcomes[i] !== undefined) return; // late: the timeout or the deadline came first
    this.#outcomes[i] = outcome;
    this.#calls.push({
      name: this.#sources[i]!.name,
      durationMs,
      outcome: outcome.status === 'ok' ? 'ok' : outcome.reason,
    });
    if (--this.#pending === 0) this.#close();
  }

  #close(): void {
    this.#closed = true;
    const clock = this.#clock;
    clock.clearTimeout(this.#timer);
    if (this.#onCallerGone !== undefined)
      this.#options.signal?.removeEventListener('abort', this.#onCallerGone);
    this.#done({ outcomes: this.#outcomes as InputOutcome[], calls: this.#calls });
  }

  #onDeadline(): void {
    if (this.#closed) return;
    // A timer runs on the event loop's time, read at the start of its turn: after a long turn it
    // fires early by that turn's length (14 ms seen on a starved machine). The deadline is never
    // cut short: what is left of it is waited for again.
    const leftMs = this.#options.deadlineAtMs - this.#clock.monotonicMs();
    if (leftMs >= 1) {
      this.#timer = this.#clock.setTimeout(() => this.#onDeadline(), leftMs);
      return;
    }
    this.#closed = true;
    this.#controller.abort();
    const atMs = this.#sinceStartMs();
    const sources = this.#sources;
    for (let i = 0; i < sources.length; i++) {
      if (this.#outcomes[i] !== undefined) continue;
      this.#outcomes[i] = { status: 'unavailable', reason: 'deadline' };
      this.#calls.push({ name: sources[i]!.name, durationMs: atMs, outcome: 'deadline' });
    }
    this.#close();
  }
}
