import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { UpstreamError, UpstreamName } from '../errors/riskgate-error.ts';
import { deadlineError, malformedError, timeoutError, transportError } from './upstream-errors.ts';

/**
 * One HTTP attempt over an undici dispatcher, with the call's own timer and the decision's shared
 * signal. Uses the low-level `dispatch` handler API rather than `request()`: no Readable stream per
 * response, no per-request AbortSignal; a timer we clear and one listener on the shared signal.
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
  /** Bodies larger than this are refused as malformed (the connection is dropped). */
  maxBodyBytes: number;
  /**
   * Streams a 2xx body chunk by chunk instead of collecting it. Returning an error aborts the
   * attempt with it (e.g. a line that does not parse).
   */
  onChunk?: ((chunk: Buffer) => UpstreamError | undefined) | undefined;
}

const EMPTY = Buffer.alloc(0);

class Attempt implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  private settled = false;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private chunks: Buffer[] = [];
  private size = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly settings: AttemptSettings;
  private readonly resolve: (outcome: RawResponse | UpstreamError) => void;

  constructor(settings: AttemptSettings, resolve: (outcome: RawResponse | UpstreamError) => void) {
    this.settings = settings;
    this.resolve = resolve;
    this.timer = setTimeout(onAttemptTimeout, settings.timeoutMs, this);
    settings.signal?.addEventListener('abort', this, { once: true });
  }

  /** The decision signal aborted (EventTarget listener object: no closure per attempt). */
  handleEvent(): void {
    this.fail(deadlineError(this.settings.upstream, this.settings.operation));
  }

  timedOut(): void {
    this.timer = undefined;
    this.fail(timeoutError(this.settings.upstream, this.settings.operation, this.settings.timeoutMs));
  }

  /** Settles with `error` and drops the request (its socket is destroyed, so nothing is left unread). */
  fail(error: UpstreamError): void {
    if (this.settled) return;
    this.finish(error);
    this.controller?.abort(error);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // Settled while queued for a connection: drop it before it is written.
    if (this.settled) {
      controller.abort(new Error('attempt already settled'));
      return;
    }
    this.controller = controller;
  }

  onResponseStart(_c: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    if (status < 200) return;
    this.status = status;
    this.headers = headers;
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    this.size += chunk.length;
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
    if (this.settled) return;
    const c = this.chunks;
    const body = c.length === 0 ? EMPTY : c.length === 1 ? c[0]! : Buffer.concat(c, this.size);
    this.finish({ status: this.status, headers: this.headers, body });
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    if (this.settled) return;
    this.finish(transportError(this.settings.upstream, this.settings.operation, err));
  }

  private finish(outcome: RawResponse | UpstreamError): void {
    this.settled = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.settings.signal?.removeEventListener('abort', this);
    this.resolve(outcome);
  }
}

function onAttemptTimeout(attempt: Attempt): void {
  attempt.timedOut();
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
