import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { UpstreamError, UpstreamName } from '../errors/riskgate-error.ts';
import { type Clock, type ClockTimer, systemClock } from '../timing/clock.ts';
import { deadlineError, malformedError, timeoutError, transportError } from './upstream-errors.ts';

/**
 * One HTTP attempt over an undici dispatcher, with the call's own timer and the decision's shared
 * signal. Uses the low-level `dispatch` handler API rather than `request()`: no Readable stream per
 * response, no per-request AbortSignal; a timer we clear and one listener per shared signal.
 */

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** What one attempt sends. `path` includes the query string. */
export interface AttemptRequest {
  method: HttpMethod;
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer | undefined;
}

/** A complete answer (any status). `body` is empty when `onChunk` consumed a 2xx body. */
export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** How an attempt is run. */
export interface AttemptSettings {
  upstream: UpstreamName;
  /** Operation name, for messages (e.g. `new-browser`). */
  operation: string;
  /** This attempt's own timeout, milliseconds. */
  timeoutMs: number;
  /** The decision's shared deadline signal. */
  signal?: AbortSignal | undefined;
  /**
   * When `signal` is sure to have aborted (`performance.now()` time, see `CallOptions`). An
   * attempt due to time out at or after it sets no timer: the signal's own timer bounds it.
   */
  signalAbortsAtMs?: number | undefined;
  /** Bodies larger than this are refused as malformed (the connection is dropped). */
  maxBodyBytes: number;
  /**
   * After a timeout or the decision deadline, how long the late answer may still take, ms: the
   * caller is released at once, the answer is read and discarded so its keep-alive socket is
   * reused, and only an answer still missing after this grace destroys the socket. 0 destroys it
   * at once.
   */
  lateAnswerGraceMs: number;
  /** Whose timer measures `lateAnswerGraceMs` (tests drive it). Default: the system clock. */
  clock?: Clock | undefined;
  /** Where a draining attempt registers, so closing the client can end it (see `LateAnswers`). */
  lateAnswers?: LateAnswers | undefined;
  /**
   * Streams a 2xx body chunk by chunk instead of collecting it. Returning an error aborts the
   * attempt with it (e.g. a line that does not parse).
   */
  onChunk?: ((chunk: Buffer) => UpstreamError | undefined) | undefined;
}

const EMPTY = Buffer.alloc(0);

/** Something that can be told to give up on its connection now. */
export interface Abortable {
  abort(error: Error): void;
}

/**
 * The late answers a client is draining. `close()` of a client aborts them: nobody waits for them,
 * and a graceful pool close would otherwise wait up to the grace for each.
 */
export type LateAnswers = Set<Abortable>;

class Attempt implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  private settled = false;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private chunks: Buffer[] = [];
  private size = 0;
  private timer: NodeJS.Timeout | undefined;
  private graceTimer: ClockTimer | undefined;
  /** When the attempt's timer is due (`performance.now()`). */
  private readonly dueAt: number;
  /** How late the timeout's timer fired, ms, once it has (the final look then runs). */
  private timerLateMs: number | undefined;
  private readonly settings: AttemptSettings;
  private readonly resolve: (outcome: RawResponse | UpstreamError) => void;

  constructor(settings: AttemptSettings, resolve: (outcome: RawResponse | UpstreamError) => void) {
    this.settings = settings;
    this.resolve = resolve;
    this.dueAt = performance.now() + settings.timeoutMs;
    const signal = settings.signal;
    // A signal that aborts by the time this attempt would time out ends it first: no timer of its
    // own (the decision's deadline timer is the attempt's explicit timeout then).
    const abortsAt = settings.signalAbortsAtMs;
    if (signal === undefined || abortsAt === undefined || abortsAt > this.dueAt)
      this.timer = setTimeout(onAttemptTimeout, settings.timeoutMs, this);
    if (signal !== undefined) watch(signal, this);
  }

  /** The decision signal aborted. */
  deadlineReached(): void {
    this.fail(deadlineError(this.settings.upstream, this.settings.operation), true);
  }

  /**
   * The timer fired. Timers run before the loop reads its sockets, so an answer that arrived in
   * time may be waiting unread behind a busy loop: one final look (the rest of this turn, where the
   * loop polls its sockets) takes it as the answer. Only then is the attempt a timeout, carrying
   * riskgate's own delay for the circuit breakers (`routeOutcome`).
   */
  timedOut(): void {
    this.timer = undefined;
    this.timerLateMs = Math.max(0, performance.now() - this.dueAt);
    setImmediate(onFinalLook, this);
  }

  finalLook(): void {
    if (this.settled) return;
    const { upstream, operation, timeoutMs } = this.settings;
    this.fail(timeoutError(upstream, operation, timeoutMs, this.timerLateMs), true);
  }

  /**
   * Settles with `error`. With `drain` (a timeout or the deadline: the answer is merely late), a
   * request on the wire is left to finish so its socket stays in the pool (destroying it under load
   * means a new TCP connection per timeout, more timeouts, and a collapse); the answer is discarded
   * as it arrives, and one not complete after `lateAnswerGraceMs` is aborted. Without `drain` (a
   * bad body) the request is aborted now and its socket destroyed, so nothing is left unread.
   */
  fail(error: UpstreamError, drain = false): void {
    if (this.settled) return;
    this.finish(error);
    const controller = this.controller;
    if (controller === null) return;
    const graceMs = this.settings.lateAnswerGraceMs;
    if (drain && graceMs > 0) {
      // Only a timed-out attempt gets here: a closure per grace costs nothing on the answered path.
      this.graceTimer = (this.settings.clock ?? systemClock).setTimeout(
        () => onGraceOver(this, error),
        graceMs,
      );
      this.graceTimer.unref();
      this.settings.lateAnswers?.add(this);
    } else {
      this.abort(error);
    }
  }

  /** The late answer did not complete within the grace: give up on the socket. */
  abort(error: Error): void {
    this.clearGrace();
    const controller = this.controller;
    this.controller = null;
    if (controller !== null && !controller.aborted) controller.abort(error);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // Timed out while queued for a connection: nothing to look for, it was never sent.
    if (this.timerLateMs !== undefined) this.finalLook();
    if (this.settled) {
      // Settled while queued for a connection. Throwing here makes undici drop the request before
      // it is written, keeping the socket (`controller.abort` at this point would destroy it).
      throw new Error('attempt already settled');
    }
    this.controller = controller;
  }

  onResponseStart(_c: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    if (status < 200) return;
    this.status = status;
    this.headers = headers;
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    this.size += chunk.length;
    if (this.settled) {
      // A late answer being drained: discard it, but not without bound.
      if (this.size > this.settings.maxBodyBytes) this.abort(new Error('late answer over the size limit'));
      return;
    }
    if (this.size > this.settings.maxBodyBytes) {
      this.fail(
        malformedError(
          this.settings.upstream,
          this.settings.operation,
          `body over ${this.settings.maxBodyBytes} bytes`,
          this.status,
        ),
      );
      return;
    }
    const onChunk = this.settings.onChunk;
    if (onChunk !== undefined && this.status >= 200 && this.status < 300) {
      const err = onChunk(chunk);
      if (err) this.fail(err);
      return;
    }
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    this.controller = null;
    if (this.settled) {
      this.clearGrace();
      return;
    }
    const c = this.chunks;
    const body = c.length === 0 ? EMPTY : c.length === 1 ? c[0]! : Buffer.concat(c, this.size);
    this.finish({ status: this.status, headers: this.headers, body });
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.controller = null;
    if (this.settled) {
      this.clearGrace();
      return;
    }
    this.finish(transportError(this.settings.upstream, this.settings.operation, err));
  }

  private clearGrace(): void {
    if (this.graceTimer !== undefined) {
      (this.settings.clock ?? systemClock).clearTimeout(this.graceTimer);
      this.graceTimer = undefined;
      this.settings.lateAnswers?.delete(this);
    }
  }

  private finish(outcome: RawResponse | UpstreamError): void {
    this.settled = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.settings.signal !== undefined) waiting.get(this.settings.signal)?.delete(this);
    this.resolve(outcome);
  }
}

/**
 * The attempts in flight on each decision signal. A signal gets one abort listener, added by its
 * first attempt, that ends every attempt still waiting; an attempt then joins and leaves a set
 * (issue 32: an EventTarget listener added and removed per attempt, with its option parsing and
 * listener objects, cost more than the rest of the attempt's bookkeeping). Weak: a decision's
 * signal and its set go together once the decision is over.
 */
const waiting = new WeakMap<AbortSignal, Set<Attempt>>();

function watch(signal: AbortSignal, attempt: Attempt): void {
  let attempts = waiting.get(signal);
  if (attempts === undefined) {
    const set = new Set<Attempt>();
    attempts = set;
    waiting.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        for (const a of [...set]) a.deadlineReached();
        set.clear();
      },
      { once: true },
    );
  }
  attempts.add(attempt);
}

function onAttemptTimeout(attempt: Attempt): void {
  attempt.timedOut();
}

function onFinalLook(attempt: Attempt): void {
  attempt.finalLook();
}

function onGraceOver(attempt: Attempt, error: UpstreamError): void {
  attempt.abort(error);
}

/**
 * Runs one attempt. Resolves (never rejects) with the response, whatever its status, or with the
 * typed error of a timeout, a deadline, a transport failure or an oversized body.
 */
export function sendAttempt(
  dispatcher: Dispatcher,
  req: AttemptRequest,
  settings: AttemptSettings,
): Promise<RawResponse | UpstreamError> {
  if (settings.signal?.aborted) {
    return Promise.resolve(deadlineError(settings.upstream, settings.operation));
  }
  return new Promise((resolve) => {
    const attempt = new Attempt(settings, resolve);
    try {
      dispatcher.dispatch(
        {
          method: req.method,
          path: req.path,
          headers: req.headers,
          body: req.body ?? null,
          // Only GETs are replayed by undici itself; we decide retries above this layer.
          idempotent: req.method === 'GET',
        },
        attempt,
      );
    } catch (err) {
      attempt.onResponseError(null as unknown as Dispatcher.DispatchController, err as Error);
    }
  });
}
