import { z } from 'zod';
import { ErrorCode, RiskgateError, UpstreamError } from '../errors/riskgate-error.ts';
import { backoffDelayMs } from '../timing/backoff.ts';
import { type Clock, type ClockTimer, systemClock } from '../timing/clock.ts';
import { raceWithSignal } from '../upstream/abortable.ts';
import type { CallTracer } from '../upstream/call-tracer.ts';
import { type CallInfo, callUpstream, parseJsonBody } from '../upstream/upstream-call.ts';
import { createUpstreamContext } from '../upstream/upstream-context.ts';
import { internalError } from '../upstream/upstream-errors.ts';
import { splitBaseUrl } from '../upstream/upstream-pool.ts';
import type { UpstreamResult } from '../upstream/upstream-result.ts';
import { audienceScope } from './audience-scope.ts';

export { audienceScope };

/**
 * OAuth 2.0 client-credentials token manager for the Trust Signals Retrieval client
 * (docs/vendor-api.md#oauth-token).
 * Holds one token, refreshes it in the background before it expires, and makes sure any number of
 * concurrent callers cause one token request. The client secret lives only inside the precomputed
 * `Authorization` header in this closure: never in an error, a log line, a metric or `stats()`.
 */

/** Options of `createTokenManager`. Times in milliseconds unless named otherwise. */
export interface TokenManagerOptions {
  /** Base of the authorization server; the endpoint is `{authUrl}/oauth/v2/token`. */
  authUrl: string;
  clientId: string;
  clientSecret: string;
  /** The signals audience, e.g. `riskgate-signals`. */
  audience: string;
  /**
   * The `<idp>` of the audience URN `urn:<idp>:iam:org:project:id:<audience>:aud`. Required unless
   * `scope` is given.
   */
  idp?: string;
  /** The full `scope` to request, overriding the URN built from `idp` and `audience`. */
  scope?: string;
  /** Timeout of one token request. Default 2000. */
  timeoutMs?: number;
  /** A token is not handed out when it expires within this margin (skew, time in flight). Default 1000. */
  expiryMarginMs?: number;
  /** First retry delay after a failed refresh; doubles each failure. Default 250. */
  backoffInitialMs?: number;
  /**
   * Cap of the retry delay while a valid token is held. Default 30000. It shrinks to half the
   * token's remaining validity as expiry nears, so a few tries still happen before it lapses.
   */
  backoffMaxMs?: number;
  /**
   * Cap of the retry delay once no valid token is held (every decision is degraded then, so the
   * first answer after the endpoint recovers matters most). Default 2000.
   */
  noTokenBackoffMaxMs?: number;
  /** Token lifetimes run on its wall time, refreshes on its timers. Default {@link systemClock}. */
  clock?: Clock;
  /** Jitter source in [0, 1). Default `Math.random`. */
  random?: () => number;
  /** Connections to the token endpoint. Default 2. */
  connections?: number;
  /** Called for each token request (metrics). */
  onCall?: (info: CallInfo) => void;
  /** Client spans and `traceparent` on every call, when tracing is on (src/observability/tracing.ts). */
  tracer?: CallTracer | undefined;
}

/** Counters of the manager (no secrets, no tokens). */
export interface TokenManagerStats {
  /** Successful token requests. */
  refreshes: number;
  /** Failed token requests. */
  failures: number;
  /** Failures since the last success (drives the backoff). */
  consecutiveFailures: number;
  /** Code of the last failure, if any. */
  lastErrorCode?: string;
  /** Epoch ms at which the current token expires, if there is one. */
  expiresAt?: number;
}

/** What `createTokenManager` returns. */
export interface TokenManager {
  /**
   * A valid access token: the cached one when valid (no await on a network call), otherwise the
   * result of the single in-flight refresh. `signal` releases the caller (the refresh goes on).
   * Fails with `RG_ERR_TOKEN_UNAVAILABLE` (cause: the token endpoint's error) or
   * `RG_ERR_DEADLINE_EXCEEDED`.
   */
  getToken(signal?: AbortSignal): Promise<UpstreamResult<string>>;
  /** The cached token when valid, synchronously; `undefined` otherwise (then call `getToken`). */
  peekToken(): string | undefined;
  /**
   * Drops `token` if it is still the current one (an upstream answered 401 to it). Tokens already
   * replaced are ignored, so a burst of 401s for one stale token causes a single refresh.
   */
  invalidate(token: string): void;
  /** True while a valid token is held. */
  isReady(): boolean;
  /** First fetch, then background refresh. Never rejects; check `isReady()`. */
  start(): Promise<void>;
  /** Stops background work and closes the connection pool. */
  stop(): Promise<void>;
  stats(): TokenManagerStats;
}

const tokenResponseSchema = z.object({
  access_token: z.string().min(1),
  token_type: z.string().regex(/^bearer$/i, 'must be Bearer'),
  expires_in: z.number().positive(),
});

interface HeldToken {
  token: string;
  expiresAt: number;
  refreshAt: number;
  /** Reused for every hit, so a cache hit allocates nothing. */
  resolved: Promise<UpstreamResult<string>>;
}

/**
 * When to refresh a token with lifetime `lifetimeMs`: before `expires_in − 60 s` and before 80% of
 * the lifetime, whichever comes first, but never before half of it (so a short-lived token does not
 * cause a refresh loop).
 */
export function refreshDelayMs(lifetimeMs: number): number {
  return Math.max(0.5 * lifetimeMs, Math.min(0.8 * lifetimeMs, lifetimeMs - 60_000));
}

/** Creates a token manager. Throws `RG_ERR_INVALID_CONFIG` for missing settings (never echoing the secret). */
export function createTokenManager(opts: TokenManagerOptions): TokenManager {
  if (!opts.clientId || !opts.clientSecret) {
    throw new RiskgateError(
      ErrorCode.INVALID_CONFIG,
      'token manager: clientId and clientSecret are required',
    );
  }
  if (opts.scope === undefined && (!opts.idp || !opts.audience)) {
    throw new RiskgateError(ErrorCode.INVALID_CONFIG, 'token manager: give `scope`, or `idp` and `audience`');
  }
  const scope = opts.scope ?? audienceScope(opts.idp!, opts.audience);
  const { origin, pathPrefix } = splitBaseUrl(opts.authUrl);
  const path = `${pathPrefix}/oauth/v2/token`;
  const clock = opts.clock ?? systemClock;
  const now = () => clock.nowMs();
  const random = opts.random ?? Math.random;
  const margin = opts.expiryMarginMs ?? 1000;
  const backoffInitial = opts.backoffInitialMs ?? 250;
  const backoffMax = opts.backoffMaxMs ?? 30_000;
  const noTokenBackoffMax = opts.noTokenBackoffMaxMs ?? 2000;
  const timeoutMs = opts.timeoutMs ?? 2000;
  const formEncode = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  // RFC 6749 §2.3.1: id and secret are form-urlencoded before Base64.
  const authorization = `Basic ${Buffer.from(`${formEncode(opts.clientId)}:${formEncode(opts.clientSecret)}`).toString('base64')}`;
  const body = new URLSearchParams({ grant_type: 'client_credentials', scope }).toString();

  const { ctx, close: closePool } = createUpstreamContext(
    'auth',
    origin,
    clock,
    { connections: opts.connections, onCall: opts.onCall, tracer: opts.tracer },
    { connections: 2, defaultTimeoutMs: timeoutMs, maxBodyBytes: 64 * 1024 },
  );

  let held: HeldToken | undefined;
  let inflight: Promise<UpstreamResult<string>> | undefined;
  let timer: ClockTimer | undefined;
  let started = false;
  let stopped = false;
  // While the endpoint is failing, callers without a token fail fast until the next backoff slot
  // instead of each starting a request of their own.
  let nextAttemptAt = 0;
  let lastFailure: UpstreamResult<string> | undefined;
  const counters: TokenManagerStats = { refreshes: 0, failures: 0, consecutiveFailures: 0 };

  function valid(t: HeldToken | undefined, at: number): t is HeldToken {
    return t !== undefined && at < t.expiresAt - margin;
  }

  function schedule(delayMs: number): void {
    if (!started || stopped) return;
    clock.clearTimeout(timer);
    timer = clock.setTimeout(onTimer, Math.max(0, delayMs));
    timer.unref();
  }

  function onTimer(): void {
    timer = undefined;
    void refresh();
  }

  /**
   * The pause after a failed refresh: exponential from `backoffInitialMs`, capped by how urgent a
   * token is (see `backoffMaxMs`, `noTokenBackoffMaxMs`), and never shorter than the endpoint's own
   * `Retry-After` (the upstream layer's `backoffDelayMs`). A success resets it.
   */
  function backoffDelay(retryAfterMs: number | undefined): number {
    const at = now();
    const t = held;
    const cap = valid(t, at)
      ? Math.max(backoffInitial, Math.min(backoffMax, (t.expiresAt - margin - at) / 2))
      : Math.min(backoffMax, noTokenBackoffMax);
    return backoffDelayMs(
      { initialMs: backoffInitial, maxMs: cap, random },
      counters.consecutiveFailures,
      retryAfterMs,
    );
  }

  /** Whether a refresh may start now: none in flight, not stopped, past any backoff. */
  function mayRefresh(at: number): boolean {
    return inflight === undefined && !stopped && at >= nextAttemptAt;
  }

  function refresh(): Promise<UpstreamResult<string>> {
    if (inflight) return inflight;
    const requestedAt = now();
    inflight = callUpstream(
      ctx,
      {
        name: 'token',
        build: () => ({
          method: 'POST',
          path,
          headers: {
            authorization,
            'content-type': 'application/x-www-form-urlencoded',
            accept: 'application/json',
          },
          body,
        }),
        parse: (res) => parseJsonBody('auth', 'token', res, tokenResponseSchema),
        retry: true,
      },
      { timeoutMs },
    ).then((r): UpstreamResult<string> => {
      inflight = undefined;
      if (r.ok) {
        const lifetimeMs = r.value.expires_in * 1000;
        const t: HeldToken = {
          token: r.value.access_token,
          // Counted from when we asked: the server's clock started no later than that.
          expiresAt: requestedAt + lifetimeMs,
          refreshAt: requestedAt + refreshDelayMs(lifetimeMs),
          resolved: undefined as unknown as Promise<UpstreamResult<string>>,
        };
        const result: UpstreamResult<string> = { ok: true, value: t.token, durationMs: r.durationMs };
        t.resolved = Promise.resolve(result);
        held = t;
        counters.refreshes++;
        counters.consecutiveFailures = 0;
        lastFailure = undefined;
        nextAttemptAt = 0;
        counters.expiresAt = t.expiresAt;
        schedule(t.refreshAt - now());
        return result;
      }
      counters.failures++;
      counters.consecutiveFailures++;
      counters.lastErrorCode = r.error.code;
      const delay = backoffDelay(r.error.retryAfterMs);
      nextAttemptAt = now() + delay;
      schedule(delay);
      const failure: UpstreamResult<string> = {
        ok: false,
        durationMs: r.durationMs,
        error: new UpstreamError(
          ErrorCode.TOKEN_UNAVAILABLE,
          `no access token: ${r.error.message}`,
          { upstream: 'auth', status: r.error.status, upstreamMessage: r.error.upstreamMessage },
          { cause: r.error },
        ),
      };
      lastFailure = failure;
      return failure;
    });
    // A bug (a throwing `onCall` hook, a parse that throws): every waiter still gets an answer, the
    // next caller may start a refresh, and the failure is counted and backed off like any other.
    inflight = inflight.catch((err: unknown): UpstreamResult<string> => {
      inflight = undefined;
      counters.failures++;
      counters.consecutiveFailures++;
      const failure: UpstreamResult<string> = {
        ok: false,
        durationMs: 0,
        error: internalError('auth', 'token', err),
      };
      counters.lastErrorCode = failure.error.code;
      const delay = backoffDelay(undefined);
      nextAttemptAt = now() + delay;
      schedule(delay);
      lastFailure = failure;
      return failure;
    });
    return inflight;
  }

  return {
    getToken(signal) {
      const t = held;
      const at = now();
      if (valid(t, at)) {
        // A late timer (a busy loop, a suspended VM) must not let the token lapse; a failing
        // endpoint's backoff and Retry-After hold whether or not the old token is still valid.
        if (at >= t.refreshAt && mayRefresh(at)) void refresh();
        return t.resolved;
      }
      if (inflight === undefined && lastFailure !== undefined && at < nextAttemptAt)
        return Promise.resolve(lastFailure);
      const p = refresh();
      return signal ? raceWithSignal(p, signal, 'auth', 'token') : p;
    },
    peekToken() {
      const t = held;
      const at = now();
      if (!valid(t, at)) return undefined;
      if (at >= t.refreshAt && mayRefresh(at)) void refresh();
      return t.token;
    },
    invalidate(token) {
      if (held !== undefined && held.token === token) {
        held = undefined;
        counters.expiresAt = undefined;
      }
    },
    isReady() {
      return valid(held, now());
    },
    async start() {
      if (started) return;
      started = true;
      stopped = false;
      await refresh();
    },
    async stop() {
      stopped = true;
      started = false;
      clock.clearTimeout(timer);
      timer = undefined;
      await closePool();
    },
    stats() {
      return { ...counters };
    },
  };
}
