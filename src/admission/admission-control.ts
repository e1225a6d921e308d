/**
 * Admission control: whether this process should start one more request. Checked at the HTTP
 * edge before the body is read or anything is fanned out, so a refused request costs a header
 * parse and a short answer, and what capacity there is goes to decisions that can still finish in
 * time. It sheds what riskgate itself queued, never the host's noise. Two signals:
 *
 * - **Event-loop delay, with a queue of riskgate's own**: how late the loop is running work that
 *   was due (sampled by a timer every `sampleIntervalMs`, and read as "how overdue is the next
 *   sample" between samples, so a loop that is stuck right now is seen right now). A request waits
 *   in the socket for about that long before its handler runs. But a loop is also late when the
 *   host deschedules the process (a noisy neighbour, a CPU quota, a GC pause), and shedding a lone
 *   caller then refuses work riskgate had room for. So the delay sheds only while riskgate has a
 *   queue: at least `minInFlightToShedOnDelay` requests admitted and not yet answered. Past
 *   `maxEventLoopDelayMs` (never more than the whole deadline) with that many in flight, a new
 *   request is not started; with fewer, it always is (its deadline still runs from its arrival).
 * - **Decisions in flight, against what the process can finish** (Little's law: the decisions in
 *   flight ÷ the rate they finish is how long each takes). Every 100 ms of the clock (not of
 *   samples: a busy loop runs its sampler late, and the window must not stretch with it), the limit
 *   is set from what the last windows measured:
 *   - the loop saturated (utilisation ≥ 90 %): every decision in flight shares the same CPU, so the
 *     limit is the throughput × `targetLatencyMs`, the window's or the decayed one, whichever is
 *     higher (the loop reads busy while its thread waits for a core the database threads hold, so
 *     one window's count of answers dips with no queue behind it); and, in a window saturated after
 *     windows with room (a stall: the loop's throughput then was what arrived, not what it can
 *     finish), no lower than what it finished per busy millisecond before × `targetLatencyMs`;
 *   - the loop with room: the limit is what the CPU could finish at full speed, each decision
 *     taking its usual time plus `targetLatencyMs`: the service rate (decisions per second of busy
 *     loop) × (the mean time from admission to answer + `targetLatencyMs`). Not `maxInFlight`: a
 *     loop that has room at 1x has none at 2x, and a limit left wide open while it had room would
 *     let the first few hundred milliseconds of a surge queue more than the CPU can answer within
 *     the deadline before the loop is seen saturated. A slow vendor (sockets, not CPU) raises the
 *     time to answer, not the CPU per decision, so its limit grows with it: its decisions end at
 *     their timeouts, degraded, not shed.
 *
 *   The limit falls at once and grows by at most 8 (or a tenth) a window, and not at all in a
 *   window with room while the loop was still ≥ 80 % busy over the last third of a second (a lull
 *   amid saturation, a throttled quota): such a window must not let a burst in. The rates are
 *   decayed sums over the windows (a third of a second's memory), so one noisy window does not
 *   swing the limit. A decision past the limit is not started.
 *
 * Like fastify's under-pressure, shed answers are 503 with `Retry-After`; like Envoy's overload
 * manager, the action (shed new decisions) is tied to measured resource pressure, not to a request
 * rate configured in advance, and health endpoints are never shed.
 */

import { type Clock, type ClockTimer, systemClock } from '../timing/clock.ts';

export type ShedReason = 'event_loop_delay' | 'in_flight';

/** The concurrency limit never goes below this (nor grows by less per window with room). */
const MIN_LIMIT = 8;
/** The limit is adjusted every this many sample intervals of the clock (100 ms at the default 10 ms). */
const ADJUST_EVERY_INTERVALS = 10;
/** What the estimates keep of the windows before, per window (0.7: a third of a second's memory). */
const ESTIMATE_DECAY = 0.7;
/**
 * A window with room while the decayed utilisation is still at least this is a lull amid
 * saturation: the limit does not grow (at 5x, such windows let a burst in that queued past 350 ms).
 */
const LULL_BUSY = 0.8;
/**
 * Samples with nothing in flight and nothing admitted after which sampling pauses until the next
 * request (1 s at the default interval): an idle riskgate wakes for no timer of its own.
 */
const PAUSE_AFTER_QUIET_SAMPLES = 100;

export interface AdmissionOptions {
  /** Most decisions in flight at once in this process. Default 1000. */
  maxInFlight?: number;
  /**
   * Event-loop delay (queueing before a handler runs) past which new decisions are shed,
   * milliseconds. Default 100: a third of the default deadline, above a major GC pause. 0 leaves
   * only the deadline itself as the bound.
   */
  maxEventLoopDelayMs?: number;
  /** The decision deadline, milliseconds: a decision that queued this long is never started. */
  deadlineMs: number;
  /**
   * The wait for CPU a saturated process may give an admitted decision, milliseconds. Default: a
   * third of the deadline.
   */
  targetLatencyMs?: number;
  /**
   * Requests admitted and not yet answered below which the event-loop delay never sheds: riskgate
   * has too little of its own work queued for the delay to be its doing. Default 8.
   */
  minInFlightToShedOnDelay?: number;
  /** How often the event-loop delay is sampled, milliseconds. Default 10. */
  sampleIntervalMs?: number;
  /** `Retry-After` of a shed answer, seconds. Default 1. */
  retryAfterSeconds?: number;
  /** Samples are timed on its monotonic time and its timers. Default {@link systemClock}. */
  clock?: Clock;
  /**
   * The event loop's busy time so far, milliseconds (only differences are read). Default the
   * `active` time of `performance.eventLoopUtilization()`; a test with a driven clock passes its own.
   */
  loopActiveMs?: () => number;
}

/** Decayed sums over the windows (`ESTIMATE_DECAY`): the service rate and the time to answer. */
interface Estimates {
  completed: number;
  /** The loop's busy time, and the time it was measured over. */
  busyMs: number;
  spentMs: number;
  /** Completions whose time from admission to answer is known, and those times' sum. */
  timed: number;
  answerMs: number;
}

export class AdmissionControl {
  readonly retryAfterSeconds: number;
  readonly maxInFlight: number;
  /** Requests admitted and not yet answered (decisions and the other caller endpoints). */
  inFlight = 0;
  /** Decisions shed, by reason, since start. */
  readonly shed: Record<ShedReason, number> = { event_loop_delay: 0, in_flight: 0 };
  readonly #maxDelayMs: number;
  readonly #minQueued: number;
  readonly #intervalMs: number;
  readonly #clock: Clock;
  #lastDelayMs = 0;
  #dueAt = 0;
  #timer: ClockTimer | undefined;
  /** Started and not stopped: sampling, or paused while idle (`#timer` undefined). */
  #running = false;
  /** Samples in a row with nothing in flight and nothing admitted. */
  #quietSamples = 0;
  /** A request was admitted since the last sample. */
  #entered = false;
  /** The concurrency limit in force: `maxInFlight` until a window measured otherwise (see above). */
  limit: number;
  readonly #targetMs: number;
  readonly #adjustEveryMs: number;
  readonly #loopActiveMs: () => number;
  /** This window: its start (clock, loop busy time), completions, and their known times to answer. */
  #windowStart = 0;
  #windowActiveMs = 0;
  #completed = 0;
  #timed = 0;
  #answerMs = 0;
  readonly #estimates: Estimates = { completed: 0, busyMs: 0, spentMs: 0, timed: 0, answerMs: 0 };

  constructor(options: AdmissionOptions) {
    this.maxInFlight = options.maxInFlight ?? 1000;
    const configured = options.maxEventLoopDelayMs ?? 100;
    this.#maxDelayMs = configured === 0 ? options.deadlineMs : Math.min(configured, options.deadlineMs);
    this.#minQueued = options.minInFlightToShedOnDelay ?? MIN_LIMIT;
    this.#intervalMs = options.sampleIntervalMs ?? 10;
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1;
    this.#clock = options.clock ?? systemClock;
    this.limit = this.maxInFlight;
    this.#targetMs = options.targetLatencyMs ?? options.deadlineMs / 3;
    this.#adjustEveryMs = this.#intervalMs * ADJUST_EVERY_INTERVALS;
    this.#loopActiveMs = options.loopActiveMs ?? (() => performance.eventLoopUtilization().active);
  }

  /** An admitted decision starts; returns when (the clock's monotonic time, for `leave`). */
  enter(): number {
    this.inFlight++;
    this.#entered = true;
    if (this.#running && this.#timer === undefined) this.#resume();
    return this.#clock.monotonicMs();
  }

  /** An admitted decision was answered; `enteredAtMs` (what `enter` returned) times it. */
  leave(enteredAtMs?: number): void {
    this.inFlight--;
    this.#completed++;
    if (enteredAtMs !== undefined) {
      this.#timed++;
      this.#answerMs += this.#clock.monotonicMs() - enteredAtMs;
    }
  }

  /** Every 100 ms of the clock: the concurrency limit from the window's and the decayed measures. */
  #adjustLimit(at: number): void {
    const activeMs = this.#loopActiveMs();
    const spentMs = at - this.#windowStart;
    const busyMs = Math.max(0, activeMs - this.#windowActiveMs);
    const saturated = busyMs >= 0.9 * spentMs;
    const throughput = (this.#completed * 1000) / spentMs;
    const e = this.#estimates;
    // What the loop finished per busy millisecond before this window, while it had room: its
    // capacity, which a saturated window's count of answers does not measure then (below).
    const roomPerBusyMs =
      e.busyMs > 0 && e.busyMs < LULL_BUSY * e.spentMs ? e.completed / e.busyMs : undefined;
    e.completed = e.completed * ESTIMATE_DECAY + this.#completed;
    e.busyMs = e.busyMs * ESTIMATE_DECAY + busyMs;
    e.spentMs = e.spentMs * ESTIMATE_DECAY + spentMs;
    e.timed = e.timed * ESTIMATE_DECAY + this.#timed;
    e.answerMs = e.answerMs * ESTIMATE_DECAY + this.#answerMs;
    this.#newWindow(at, activeMs);
    let limit: number;
    if (saturated && throughput > 0) {
      // Not below the decayed rate: the loop counts as busy while its thread waits for the core
      // (the database threads' page writes on it, a GC), so one window's count of answers dips
      // with no queue behind it, and a limit from it alone shed a closed loop of 32 answered in
      // 50 ms. A fall that lasts is followed within a few windows. Not the decayed rate alone:
      // at a surge it still holds the windows with room, and the limit it gives keeps the loop
      // below saturation, where the lull rule holds it, under what the CPU finishes.
      limit = (Math.max(throughput, (e.completed * 1000) / e.spentMs) * this.#targetMs) / 1000;
      // A stall amid windows with room (the mirror of the lull below): a loop with room answers
      // what arrives, so its throughput is the arrival rate, not what it can finish, and one window
      // in which the host, a GC or the database threads held the core must not bring the limit
      // down to the arrival rate × the target (at 200/s on a core that finishes ~1,100/s, a limit
      // of 15-16 shed the few that queued behind a 50-ms stall). It falls no lower than what the
      // loop finished per busy millisecond before it × the target, and rises no higher than it
      // was. Once the loop has been busy over the last third of a second, the rule above alone.
      if (roomPerBusyMs !== undefined)
        limit = Math.max(limit, Math.min(this.limit, roomPerBusyMs * this.#targetMs));
    } else if (e.completed >= 1 && e.busyMs > 0) {
      const perBusyMs = e.completed / e.busyMs;
      const answerMs = e.timed > 0 ? e.answerMs / e.timed : 0;
      // Down at once, up by at most MIN_LIMIT or a tenth a window, and not in a lull (the loop still
      // busy over the last third of a second): a window with room amid saturated ones must not
      // open the limit, and the time to answer measured then still holds their queueing.
      const lull = e.busyMs >= LULL_BUSY * e.spentMs;
      const grown = lull ? this.limit : Math.max(this.limit + MIN_LIMIT, this.limit * 1.1);
      limit = Math.min(perBusyMs * (answerMs + this.#targetMs), grown);
    } else return; // nothing measured yet (or a loop idle throughout): the limit stays
    // Never past maxInFlight, even when that is below MIN_LIMIT (RISKGATE_MAX_IN_FLIGHT=4).
    this.limit = Math.min(this.maxInFlight, Math.max(MIN_LIMIT, Math.round(limit)));
  }

  #newWindow(at: number, activeMs: number): void {
    this.#windowStart = at;
    this.#windowActiveMs = activeMs;
    this.#completed = 0;
    this.#timed = 0;
    this.#answerMs = 0;
  }

  /** Starts sampling the event loop (an unref'd timer: it never keeps the process alive). */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#resume();
  }

  stop(): void {
    this.#running = false;
    this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Sampling (re)starts: a new throughput window, nothing overdue. */
  #resume(): void {
    const at = this.#clock.monotonicMs();
    this.#dueAt = at + this.#intervalMs;
    this.#lastDelayMs = 0;
    this.#quietSamples = 0;
    this.#newWindow(at, this.#loopActiveMs());
    this.#timer = this.#clock.setTimeout(this.#sample, this.#intervalMs);
    this.#timer.unref();
  }

  readonly #sample = (): void => {
    const at = this.#clock.monotonicMs();
    this.#lastDelayMs = Math.max(0, at - this.#dueAt);
    if (at - this.#windowStart >= this.#adjustEveryMs) this.#adjustLimit(at);
    const quiet = this.inFlight === 0 && !this.#entered;
    this.#entered = false;
    this.#quietSamples = quiet ? this.#quietSamples + 1 : 0;
    if (this.#quietSamples >= PAUSE_AFTER_QUIET_SAMPLES) {
      // Nothing to protect: the next admitted request resumes sampling (`enter`).
      this.#timer = undefined;
      return;
    }
    this.#dueAt = at + this.#intervalMs;
    this.#timer = this.#clock.setTimeout(this.#sample, this.#intervalMs);
    this.#timer.unref();
  };

  /** The loop's current delay: the last sample, or how overdue the next one is, milliseconds. */
  eventLoopDelayMs(): number {
    if (this.#timer === undefined) return 0;
    return Math.max(this.#lastDelayMs, this.#clock.monotonicMs() - this.#dueAt);
  }

  /** Undefined to admit a new request, or why it is shed (counted). */
  check(): ShedReason | undefined {
    // A saturated loop runs its sampler late: a check between two samples adjusts on time.
    if (this.#timer !== undefined) {
      const at = this.#clock.monotonicMs();
      if (at - this.#windowStart >= this.#adjustEveryMs) this.#adjustLimit(at);
    }
    let reason: ShedReason | undefined;
    if (this.inFlight >= this.limit) reason = 'in_flight';
    else if (this.inFlight >= this.#minQueued && this.eventLoopDelayMs() > this.#maxDelayMs)
      reason = 'event_loop_delay';
    if (reason !== undefined) this.shed[reason]++;
    return reason;
  }
}

/** What a shed decision's problem says, by the reason it was shed. */
export function overloadDetail(reason: ShedReason): string {
  return reason === 'in_flight'
    ? 'riskgate has as many decisions in flight as it allows; retry shortly.'
    : 'riskgate is overloaded (its event loop is behind); retry shortly.';
}
