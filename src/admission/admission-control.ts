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
 * - **Decisions in flight, against what the process can finish**: when the loop is saturated
 *   (utilisation ≥ 90 % over the last 100 ms), every decision in flight shares the same CPU, so a
 *   decision's wait is in-flight ÷ throughput (Little's law). The limit then becomes the measured
 *   throughput × `targetLatencyMs`, and a decision past it is not started; while the loop has room
 *   the limit grows back (+10 % per 100 ms) up to `maxInFlight`. A slow vendor (sockets, not CPU)
 *   keeps the loop idle and the limit open: its decisions end at their timeouts, degraded, not shed.
 *
 * Like fastify's under-pressure, shed answers are 503 with `Retry-After`; like Envoy's overload
 * manager, the action (shed new decisions) is tied to measured resource pressure, not to a request
 * rate configured in advance, and health endpoints are never shed.
 */

import { type Clock, type ClockTimer, systemClock } from '../timing/clock.ts';

export type ShedReason = 'event_loop_delay' | 'in_flight';

/** The concurrency limit never goes below this (nor grows by less per step). */
const MIN_LIMIT = 8;
/** The limit is adjusted every this many samples (100 ms at the default 10 ms interval). */
const ADJUST_EVERY_SAMPLES = 10;
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
  /** The concurrency limit in force: `maxInFlight` unless the loop is saturated (see above). */
  limit: number;
  readonly #targetS: number;
  #completed = 0;
  #windowStart = 0;
  #samples = 0;
  #utilization = performance.eventLoopUtilization();

  constructor(options: AdmissionOptions) {
    this.maxInFlight = options.maxInFlight ?? 1000;
    const configured = options.maxEventLoopDelayMs ?? 100;
    this.#maxDelayMs = configured === 0 ? options.deadlineMs : Math.min(configured, options.deadlineMs);
    this.#minQueued = options.minInFlightToShedOnDelay ?? MIN_LIMIT;
    this.#intervalMs = options.sampleIntervalMs ?? 10;
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1;
    this.#clock = options.clock ?? systemClock;
    this.limit = this.maxInFlight;
    this.#targetS = (options.targetLatencyMs ?? options.deadlineMs / 3) / 1000;
  }

  /** An admitted decision starts. */
  enter(): void {
    this.inFlight++;
    this.#entered = true;
    if (this.#running && this.#timer === undefined) this.#resume();
  }

  /** An admitted decision was answered. */
  leave(): void {
    this.inFlight--;
    this.#completed++;
  }

  /** Every 100 ms: the concurrency limit from the loop's utilisation and the throughput. */
  #adjustLimit(at: number): void {
    const now = performance.eventLoopUtilization();
    const busy = performance.eventLoopUtilization(now, this.#utilization).utilization;
    this.#utilization = now;
    const seconds = (at - this.#windowStart) / 1000;
    const throughput = seconds > 0 ? this.#completed / seconds : 0;
    this.#completed = 0;
    this.#windowStart = at;
    if (busy >= 0.9 && throughput > 0) {
      // Never past maxInFlight, even when that is below MIN_LIMIT (RISKGATE_MAX_IN_FLIGHT=4).
      this.limit = Math.min(this.maxInFlight, Math.max(MIN_LIMIT, Math.round(throughput * this.#targetS)));
    } else {
      this.limit = Math.min(this.maxInFlight, Math.max(this.limit + MIN_LIMIT, Math.round(this.limit * 1.1)));
    }
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
    this.#windowStart = at;
    this.#completed = 0;
    this.#utilization = performance.eventLoopUtilization();
    this.#timer = this.#clock.setTimeout(this.#sample, this.#intervalMs);
    this.#timer.unref();
  }

  readonly #sample = (): void => {
    const at = this.#clock.monotonicMs();
    this.#lastDelayMs = Math.max(0, at - this.#dueAt);
    if (++this.#samples % ADJUST_EVERY_SAMPLES === 0) this.#adjustLimit(at);
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
