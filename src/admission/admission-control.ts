/**
 * Admission control: whether this process should start one more decision. Checked at the HTTP
 * edge before the body is read or anything is fanned out, so a refused decision costs a header
 * parse and a short answer, and what capacity there is goes to decisions that can still finish in
 * time. Two signals see the real cause of overload in a Node process:
 *
 * - **Event-loop delay**: how late the loop is running work that was due (sampled by a timer every
 *   `sampleIntervalMs`, and read as "how overdue is the next sample" between samples, so a loop that
 *   is stuck right now is seen right now). A request waits in the socket for about that long before
 *   its handler runs: the delay is its queueing time, measured from arrival. A decision that has
 *   queued past `maxEventLoopDelayMs` (never more than its whole deadline) is not started.
 * - **Decisions in flight**: a slow vendor makes decisions wait on sockets instead of CPU; past
 *   `maxInFlight` a new one would only queue behind them.
 *
 * Like fastify's under-pressure, shed answers are 503 with `Retry-After`; like Envoy's overload
 * manager, the action (shed new decisions) is tied to measured resource pressure, not to a request
 * rate configured in advance, and health endpoints are never shed.
 */

export type ShedReason = 'event_loop_delay' | 'in_flight';

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
  /** How often the event-loop delay is sampled, milliseconds. Default 10. */
  sampleIntervalMs?: number;
  /** `Retry-After` of a shed answer, seconds. Default 1. */
  retryAfterSeconds?: number;
  /** Monotonic milliseconds. Default `performance.now`. */
  now?: () => number;
}

export class AdmissionControl {
  readonly retryAfterSeconds: number;
  readonly maxInFlight: number;
  /** Decisions admitted and not yet answered. */
  inFlight = 0;
  /** Decisions shed, by reason, since start. */
  readonly shed: Record<ShedReason, number> = { event_loop_delay: 0, in_flight: 0 };
  readonly #maxDelayMs: number;
  readonly #intervalMs: number;
  readonly #now: () => number;
  #lastDelayMs = 0;
  #dueAt = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: AdmissionOptions) {
    this.maxInFlight = options.maxInFlight ?? 1000;
    const configured = options.maxEventLoopDelayMs ?? 100;
    this.#maxDelayMs = configured === 0 ? options.deadlineMs : Math.min(configured, options.deadlineMs);
    this.#intervalMs = options.sampleIntervalMs ?? 10;
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Starts sampling the event loop (an unref'd timer: it never keeps the process alive). */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#dueAt = this.#now() + this.#intervalMs;
    this.#timer = setTimeout(this.#sample, this.#intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  readonly #sample = (): void => {
    const at = this.#now();
    this.#lastDelayMs = Math.max(0, at - this.#dueAt);
    this.#dueAt = at + this.#intervalMs;
    this.#timer = setTimeout(this.#sample, this.#intervalMs);
    this.#timer.unref();
  };

  /** The loop's current delay: the last sample, or how overdue the next one is, milliseconds. */
  eventLoopDelayMs(): number {
    if (this.#timer === undefined) return 0;
    return Math.max(this.#lastDelayMs, this.#now() - this.#dueAt);
  }

  /** Undefined to admit a new decision, or why it is shed (counted). */
  check(): ShedReason | undefined {
    let reason: ShedReason | undefined;
    if (this.inFlight >= this.maxInFlight) reason = 'in_flight';
    else if (this.eventLoopDelayMs() > this.#maxDelayMs) reason = 'event_loop_delay';
    if (reason !== undefined) this.shed[reason]++;
    return reason;
  }
}
