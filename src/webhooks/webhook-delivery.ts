import type { Pool } from 'undici';
import type { WebhookCall, WebhookPoster } from '../actions/admin-actions.ts';
import type { WebhookConfig } from '../config/riskgate-config.ts';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { statusError } from '../upstream/upstream-errors.ts';
import { createUpstreamPool } from '../upstream/upstream-pool.ts';
import { type LateAnswers, type RawResponse, sendAttempt } from '../upstream/upstream-request.ts';
import type { CallOptions, UpstreamResult } from '../upstream/upstream-result.ts';
import { receiverKey, webhookKey, webhookSignature } from './webhook-signature.ts';

/**
 * One attempt of a webhook delivery (the outbox's `postWebhook` calls): a signed POST of the
 * stored body to the receiver, under its own timeout. What becomes of it is the outbox's: a 2xx is
 * done; a timeout, an unreachable receiver, 408, 429 (its `Retry-After` honoured) and 5xx are
 * retried with the outbox's backoff until its horizon; anything else (a redirect, which is never
 * followed, or another 4xx) is dead-lettered with its code, as is a delivery whose headers HTTP
 * cannot carry (`RG_ERR_UNSENDABLE_REQUEST`: no attempt could ever send it). Nothing here names the receiver's URL
 * or a secret: errors say `webhook deliver`, logs the receiver's key.
 */

/** What an HTTP header value may hold (as undici checks it): tab, printable ASCII, Latin-1. */
const SENDABLE_HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Largest receiver answer read, bytes: a receiver's answer is only looked at for its status. */
const MAX_ANSWER_BYTES = 64 * 1024;

interface Receiver {
  pool: Pool;
  /** Path and query of the URL. */
  path: string;
  /** `Authorization: Basic` for a URL that carries `user:password@`. */
  authorization: string | undefined;
}

export interface WebhookDeliveryOptions {
  /** Its wall time is the signature's timestamp. Default {@link systemClock}. */
  clock?: Clock | undefined;
}

export class WebhookDelivery implements WebhookPoster {
  readonly timeoutMs: number;
  readonly retryHorizonMs: number | undefined;
  readonly #receivers = new Map<string, Receiver>();
  readonly #keys: Buffer[];
  readonly #lateAnswers: LateAnswers = new Set();
  readonly #clock: Clock;

  constructor(config: WebhookConfig, options: WebhookDeliveryOptions = {}) {
    this.timeoutMs = config.timeoutMs;
    this.retryHorizonMs = config.retryHorizonMs;
    this.#keys = config.secrets.map(webhookKey);
    this.#clock = options.clock ?? systemClock;
    for (const url of config.urls) {
      const u = new URL(url);
      const authorization =
        u.username === ''
          ? undefined
          : `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
      this.#receivers.set(receiverKey(url), {
        pool: createUpstreamPool(u.origin, {
          connections: 4,
          connectTimeoutMs: Math.min(config.timeoutMs, 5000),
          headersTimeoutMs: config.timeoutMs + 1000,
          bodyTimeoutMs: config.timeoutMs + 1000,
        }),
        path: `${u.pathname}${u.search}`,
        authorization,
      });
    }
  }

  /** The receivers' keys, in configuration order (what `postWebhook` calls name). */
  get receivers(): string[] {
    return [...this.#receivers.keys()];
  }

  async post(call: WebhookCall, options: CallOptions): Promise<UpstreamResult<unknown>> {
    const startedAt = performance.now();
    const receiver = this.#receivers.get(call.receiver);
    const result = (outcome: UpstreamError | undefined): UpstreamResult<unknown> =>
      outcome === undefined
        ? { ok: true, value: undefined, durationMs: performance.now() - startedAt }
        : { ok: false, error: outcome, durationMs: performance.now() - startedAt };
    if (receiver === undefined) {
      // Its URL left RISKGATE_WEBHOOK_URLS since the event was queued: for an operator.
      return result(
        webhookError(ErrorCode.INVALID_CONFIG, `webhook receiver ${call.receiver} is not configured`),
      );
    }
    // The attempt's own time (Standard Webhooks): a delivery retried after an outage is still
    // within the receiver's tolerance; the id and the body stay those of the event.
    const timestampSec = Math.floor(this.#clock.nowMs() / 1000);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': 'riskgate-webhooks',
      'webhook-id': call.webhookId,
      'webhook-timestamp': String(timestampSec),
      'webhook-signature': webhookSignature(this.#keys, call.webhookId, timestampSec, call.body),
    };
    if (receiver.authorization !== undefined) headers.authorization = receiver.authorization;
    if (options.traceparent !== undefined) headers.traceparent = options.traceparent;
    const unsendable = Object.keys(headers).find((name) => !SENDABLE_HEADER_VALUE.test(headers[name]!));
    if (unsendable !== undefined) {
      // Sending would throw before any byte left, every time: dead-lettered now, for an operator,
      // never retried as if the receiver were unreachable (it held its stream for a day).
      return result(
        webhookError(
          ErrorCode.UNSENDABLE_REQUEST,
          `webhook deliver: the ${unsendable} header cannot carry this value (not Latin-1 text)`,
        ),
      );
    }
    const answer = await sendAttempt(
      receiver.pool,
      { method: 'POST', path: receiver.path, headers, body: call.body },
      {
        upstream: 'webhook',
        operation: 'deliver',
        timeoutMs: this.timeoutMs,
        signal: options.signal,
        maxBodyBytes: MAX_ANSWER_BYTES,
        lateAnswerGraceMs: 1000,
        lateAnswers: this.#lateAnswers,
      },
    );
    return result(answer instanceof UpstreamError ? answer : this.#failureOf(answer));
  }

  /** A receiver's answer as the outbox reads it: undefined (delivered) or why not. */
  #failureOf(answer: RawResponse): UpstreamError | undefined {
    const { status } = answer;
    if (status >= 200 && status <= 299) return undefined;
    // 408: the receiver timed the request out; worth another attempt, like a timeout of ours.
    if (status === 408) {
      return webhookError(ErrorCode.UPSTREAM_TIMEOUT, 'webhook deliver: receiver answered 408', status);
    }
    return statusError(
      'webhook',
      'deliver',
      status,
      answer.body,
      answer.headers['retry-after'],
      this.#clock.nowMs(),
    );
  }

  /** Closes every receiver's connections (after the outbox stopped its attempts). */
  async close(): Promise<void> {
    for (const late of this.#lateAnswers) late.abort(new Error('closing'));
    await Promise.all([...this.#receivers.values()].map((r) => r.pool.destroy()));
  }
}

function webhookError(code: ErrorCode, message: string, status?: number): UpstreamError {
  return new UpstreamError(code, message, { upstream: 'webhook', ...(status !== undefined && { status }) });
}
