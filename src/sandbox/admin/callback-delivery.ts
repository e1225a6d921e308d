import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { signCallbackBody } from '../../callbacks/jws-signature.ts';
import { exponentialDelayMs } from '../../timing/backoff.ts';

/**
 * Outbound Admin API callbacks (docs/vendor-api.md#callbacks): POST, JSON, `x-jws-signature`.
 * Every attempt has a timeout, retries are bounded, and each delivery is recorded for inspection.
 */

export type CallbackKind = 'enrollment_success' | 'accounts_migration';

export interface CallbackDelivery {
  id: number;
  kind: CallbackKind;
  /** Target without its query string (which may hold the application's single-use token). */
  url: string;
  body: Record<string, unknown>;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  /** HTTP status of the last answer, when there was one. */
  response_status?: number;
  /** Why the last attempt failed (no secrets: a status or an error code). */
  error?: string;
  started_at: number;
  finished_at?: number;
}

export interface CallbackSenderOptions {
  /** Key for `x-jws-signature`. */
  signatureKey: () => string;
  /** Per-attempt timeout (headers and body), ms. Default 2000. */
  timeoutMs?: number;
  /** Attempts in all, first included. Default 3. */
  maxAttempts?: number;
  /** Delay before the first retry, doubled after each, ms. Default 100. */
  retryDelayMs?: number;
  /** Wall clock for the record's timestamps, ms. */
  now: () => number;
  /** How many delivery records `list()` keeps (oldest dropped first). Default 1,000. */
  maxDeliveries?: number;
}

function redactQuery(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : `${url.slice(0, q)}?[redacted]`;
}

/** Delivers callbacks and remembers how the most recent ones went. */
export class CallbackSender {
  readonly #opts: Required<Omit<CallbackSenderOptions, 'signatureKey' | 'now'>> &
    Pick<CallbackSenderOptions, 'signatureKey' | 'now'>;
  #deliveries: CallbackDelivery[] = [];
  #nextId = 1;

  constructor(opts: CallbackSenderOptions) {
    this.#opts = { timeoutMs: 2000, maxAttempts: 3, retryDelayMs: 100, maxDeliveries: 1000, ...opts };
  }

  /**
   * POSTs `body` to `url`, retrying on network errors, timeouts and 5xx/429 answers. Resolves with
   * the delivery record once delivered or given up; never rejects.
   */
  async send(kind: CallbackKind, url: string, body: Record<string, unknown>): Promise<CallbackDelivery> {
    const raw = JSON.stringify(body);
    const signature = signCallbackBody(raw, this.#opts.signatureKey());
    const delivery: CallbackDelivery = {
      id: this.#nextId++,
      kind,
      url: redactQuery(url),
      body,
      status: 'pending',
      attempts: 0,
      started_at: this.#opts.now(),
    };
    this.#deliveries.push(delivery);
    // A long-running sandbox sends callbacks without end; keep only the recent ones for inspection.
    if (this.#deliveries.length > this.#opts.maxDeliveries) {
      this.#deliveries.splice(0, this.#deliveries.length - this.#opts.maxDeliveries);
    }
    for (let attempt = 1; attempt <= this.#opts.maxAttempts; attempt++) {
      delivery.attempts = attempt;
      let retryable = true;
      try {
        const res = await request(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-jws-signature': signature },
          body: raw,
          headersTimeout: this.#opts.timeoutMs,
          bodyTimeout: this.#opts.timeoutMs,
          signal: AbortSignal.timeout(this.#opts.timeoutMs),
        });
        await res.body.dump();
        delivery.response_status = res.statusCode;
        if (res.statusCode >= 200 && res.statusCode < 300) {
          delivery.status = 'delivered';
          delete delivery.error;
          break;
        }
        delivery.error = `HTTP ${res.statusCode}`;
        retryable = res.statusCode >= 500 || res.statusCode === 429;
      } catch (err) {
        const e = err as { code?: string; name?: string };
        delivery.error = e.code ?? e.name ?? 'request failed';
      }
      if (!retryable || attempt === this.#opts.maxAttempts) {
        delivery.status = 'failed';
        break;
      }
      await sleep(exponentialDelayMs({ initialMs: this.#opts.retryDelayMs, maxMs: Infinity }, attempt));
    }
    delivery.finished_at = this.#opts.now();
    return delivery;
  }

  list(): CallbackDelivery[] {
    return [...this.#deliveries];
  }

  clear(): void {
    this.#deliveries = [];
  }
}
