import { LRUCache } from 'lru-cache';
import type { z } from 'zod';
import type { TokenManager } from '../auth/token-manager.ts';
import { ErrorCode, RiskgateError, type UpstreamError } from '../errors/riskgate-error.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { CallTracer } from '../upstream/call-tracer.ts';
import type { CircuitBreakers } from '../upstream/circuit-breaker.ts';
import {
  type CallInfo,
  type CallSpec,
  callUpstream,
  parseJsonBody,
  type RetryTuning,
} from '../upstream/upstream-call.ts';
import { createUpstreamContext } from '../upstream/upstream-context.ts';
import { malformedError } from '../upstream/upstream-errors.ts';
import { splitBaseUrl, type UpstreamPoolOptions } from '../upstream/upstream-pool.ts';
import type { AttemptRequest, RawResponse } from '../upstream/upstream-request.ts';
import { type CallOptions, rejecting, type UpstreamResult } from '../upstream/upstream-result.ts';
import { UUID_PATTERN } from './identifiers.ts';
import {
  BATCH_OPERATION,
  type BatcherStats,
  type BatchItem,
  type BatchOptions,
  RatBatcher,
} from './rat-batcher.ts';
import {
  checkRemoteAccessTool,
  type NewBrowserParams,
  newBrowserQuery,
  type ProximityParams,
  proximityQuery,
  type RemoteAccessToolParams,
  remoteAccessToolQuery,
  type SingleUnitParams,
  singleUnitQuery,
} from './signal-params.ts';
import {
  type ActiveCallResponse,
  activeCallResponseSchema,
  type GeolocationResponse,
  type GeovelocityResponse,
  geolocationResponseSchema,
  geovelocityResponseSchema,
  type HistoricalProximityResponse,
  historicalProximityResponseSchema,
  type LatestProximityResponse,
  latestProximityResponseSchema,
  type NewBrowserResponse,
  newBrowserResponseSchema,
  type RemoteAccessToolBatchItem,
  type RemoteAccessToolResponse,
  remoteAccessToolBatchResponseSchema,
  remoteAccessToolResponseSchema,
  SIGNAL_TYPES,
} from './signal-schemas.ts';

/**
 * The Trust Signals API client: one typed method per endpoint, parameters validated before any
 * I/O, bearer token from the token manager (a 401 refreshes it once and retries once), answers
 * parsed with the shared zod schemas. Remote-access-tool lookups are batched.
 */

/** Default lifetime of a cached remote-access-tool answer, ms (`SignalsClientOptions.cache`). */
export const DEFAULT_RAT_CACHE_TTL_MS = 5000;

/**
 * Every operation the client calls (its circuit-breaker routes are `signals <operation>`): listed so
 * `riskgate_circuit_state` shows each route from the start, and typed so a new call must be added.
 */
export const SIGNALS_OPERATIONS = [
  'remote-access-tool',
  BATCH_OPERATION,
  'new-browser',
  'latest-proximity',
  'historical-proximity',
  'geovelocity',
  'active-call',
  'geolocation',
] as const;
type SignalsOperation = (typeof SIGNALS_OPERATIONS)[number];

/** Options of `createSignalsClient`. Times in milliseconds. */
export interface SignalsClientOptions {
  /** `{signals_url}`, e.g. `http://127.0.0.1:4010/api/v1`. */
  baseUrl: string;
  /** The tenant UUID; must equal the token's `service_id`. */
  serviceId: string;
  /** Source of bearer tokens (`createTokenManager`). */
  tokens: Pick<TokenManager, 'getToken' | 'peekToken' | 'invalidate'>;
  /** Connections to the signals origin (one call in flight each). Default 128. */
  connections?: number;
  /** Timeout of one attempt when the call gives none. Default 1000. */
  defaultTimeoutMs?: number;
  /** Remote-access-tool batching; see `BatchOptions`. */
  batch?: BatchOptions & {
    /** Timeout of one batch call (the callers keep their own). Default `defaultTimeoutMs`. */
    timeoutMs?: number;
  };
  /**
   * Caches remote-access-tool answers, on by default for a short while. Sound because the batch
   * endpoint (and the single one by default) is `interaction_anchored`: a session is scored against
   * the user's baseline as it stood when the scored session took place, so the answer for one
   * (serviceId, accountId, unitId, verificationStatus, interactionId, sdkVersionId) does not change
   * once computed. Useful because a login backend may call /decide more than once for one
   * interaction (retries, step-up re-checks). Only stable answers are kept: successes and
   * `unsupported_platform`; never `insufficient_observations` or `no_user_baseline` (more events may
   * arrive while the login goes on), never an error. `full_history` lookups are never cached (their
   * score moves with every stored session). Other signals describe "the latest" observation and
   * change with every interaction: never cached.
   */
  cache?: {
    /** Lifetime of an entry, ms; 0 turns the cache off. Default 5000. */
    ttlMs?: number;
    /** Entries kept. Default 10000. */
    max?: number;
  };
  /** Called once per HTTP call (a batch is one call): metrics and Server-Timing. */
  onCall?: (info: CallInfo) => void;
  /** Client spans and `traceparent` on every call, when tracing is on (src/observability/tracing.ts). */
  tracer?: CallTracer | undefined;
  /** Per-route circuit breakers shared with the other clients (src/upstream/circuit-breaker.ts). */
  breakers?: CircuitBreakers | undefined;
  /** Its wall time validates query windows. Default {@link systemClock}. */
  clock?: Clock;
  /** Connection tuning (timeouts are backstops; calls carry their own). */
  pool?: Omit<UpstreamPoolOptions, 'connections'>;
  retry?: RetryTuning;
  /** Largest accepted body, bytes. Default 1 MiB. */
  maxBodyBytes?: number;
}

type Method<P, R> = (params: P, opts?: CallOptions) => Promise<UpstreamResult<R>>;

/** What `createSignalsClient` returns. Methods never reject for upstream failures; invalid params reject with `InputError`. */
export interface SignalsClient {
  /** Remote access tool via the batcher (or the single GET for `baselineScope: 'full_history'`). */
  remoteAccessTool: Method<RemoteAccessToolParams, RemoteAccessToolResponse>;
  /** `GET /signals/remote-access-tool`, unbatched. */
  remoteAccessToolSingle: Method<RemoteAccessToolParams, RemoteAccessToolResponse>;
  newBrowser: Method<NewBrowserParams, NewBrowserResponse>;
  latestProximity: Method<ProximityParams, LatestProximityResponse>;
  historicalProximity: Method<ProximityParams, HistoricalProximityResponse>;
  geovelocity: Method<SingleUnitParams, GeovelocityResponse>;
  activeCall: Method<SingleUnitParams, ActiveCallResponse>;
  geolocation: Method<SingleUnitParams, GeolocationResponse>;
  /**
   * Batcher and cache counters, and `lateAnswers`: timed-out calls whose answers are still being
   * read and discarded (their sockets go back to the pool once read).
   */
  stats(): BatcherStats & { cacheHits: number; lateAnswers: number };
  /** Sends any open batch, then closes the connections once in-flight calls finish. */
  close(): Promise<void>;
}

interface Envelope {
  signalType: string;
  success: boolean;
  reason?: string | undefined;
  result?: unknown;
}

/**
 * Beyond the schema: the envelope is for this signal, and `success` agrees with `result`/`reason`
 * (docs/vendor-api.md#signal-envelope: no `result` when success is false; a failure always has a reason).
 */
function checkEnvelope(
  operation: string,
  expected: string,
  env: Envelope,
  status: number,
): UpstreamError | undefined {
  if (env.signalType !== expected) {
    return malformedError(
      'signals',
      operation,
      `signalType ${JSON.stringify(env.signalType)}, expected ${expected}`,
      status,
    );
  }
  if (env.success && env.result === undefined)
    return malformedError('signals', operation, 'success without result', status);
  if (!env.success && env.reason === undefined)
    return malformedError('signals', operation, 'failure without reason', status);
  return undefined;
}

function envelopeParser<S extends z.ZodType>(operation: string, expected: string, schema: S) {
  return (res: RawResponse): z.infer<S> | UpstreamError => {
    const v = parseJsonBody('signals', operation, res, schema);
    if (v instanceof RiskgateError) return v as UpstreamError;
    return checkEnvelope(operation, expected, v as Envelope, res.status) ?? v;
  };
}

const parsers = {
  geolocation: envelopeParser('geolocation', SIGNAL_TYPES.geolocation, geolocationResponseSchema),
  geovelocity: envelopeParser('geovelocity', SIGNAL_TYPES.geovelocity, geovelocityResponseSchema),
  activeCall: envelopeParser('active-call', SIGNAL_TYPES.activeCall, activeCallResponseSchema),
  latestProximity: envelopeParser(
    'latest-proximity',
    SIGNAL_TYPES.latestProximity,
    latestProximityResponseSchema,
  ),
  historicalProximity: envelopeParser(
    'historical-proximity',
    SIGNAL_TYPES.historicalProximity,
    historicalProximityResponseSchema,
  ),
  newBrowser: envelopeParser('new-browser', SIGNAL_TYPES.newBrowser, newBrowserResponseSchema),
  remoteAccessTool: envelopeParser(
    'remote-access-tool',
    SIGNAL_TYPES.remoteAccessTool,
    remoteAccessToolResponseSchema,
  ),
};

/** Cache key of a remote-access-tool lookup: the full parameter set. */
function ratKey(p: RemoteAccessToolParams): string {
  return `${p.accountId}\u0001${p.unitId}\u0001${p.verificationStatus}\u0001${p.interactionId}\u0001${p.sdkVersionId ?? ''}`;
}

/** The token source a call reads (`SignalsClientOptions.tokens`). */
type Tokens = SignalsClientOptions['tokens'];

// The call's `traceparent`, when tracing is on, is set by callUpstream (its client span's).
function headersFor(token: string, json: boolean): Record<string, string> {
  const h: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'application/json' };
  if (json) h['content-type'] = 'application/json';
  return h;
}

/**
 * A call whose requests carry the current bearer token, refreshed once on a 401. A class, not an
 * object of closures (issue 32: two closures made and named per call, on every signal lookup).
 */
class AuthedCall<T> implements CallSpec<T> {
  readonly retry = true; // every Trust Signals call is a read (the batch POST included)
  items?: number;
  links?: readonly string[];

  constructor(
    private readonly tokens: Tokens,
    readonly name: SignalsOperation,
    private readonly method: 'GET' | 'POST',
    private readonly path: string,
    private readonly body: string | undefined,
    readonly parse: (res: RawResponse) => T | UpstreamError,
    private readonly signal: AbortSignal | undefined,
  ) {}

  build(): AttemptRequest | Promise<AttemptRequest | UpstreamError> {
    const { method, path, body } = this;
    const json = body !== undefined;
    const t = this.tokens.peekToken();
    if (t !== undefined) return { method, path, headers: headersFor(t, json), body };
    return this.tokens
      .getToken(this.signal)
      .then((r) => (r.ok ? { method, path, headers: headersFor(r.value, json), body } : r.error));
  }

  async onUnauthorized(req: AttemptRequest): Promise<boolean> {
    this.tokens.invalidate(req.headers.authorization!.slice(7));
    const r = await this.tokens.getToken(this.signal);
    return r.ok;
  }
}

/** A remote-access-tool batch call: its items, and the traces of the other decisions it serves. */
function batchCall<T>(call: AuthedCall<T>, items: number, traceparents: readonly string[]): AuthedCall<T> {
  call.items = items;
  if (traceparents.length > 1) call.links = traceparents.slice(1);
  return call;
}

/** Creates a Trust Signals client. Throws `RG_ERR_INVALID_CONFIG` on a bad `serviceId` or URL. */
export function createSignalsClient(opts: SignalsClientOptions): SignalsClient {
  if (!UUID_PATTERN.test(opts.serviceId)) {
    throw new RiskgateError(ErrorCode.INVALID_CONFIG, 'signals client: serviceId must be a UUID');
  }
  const { origin, pathPrefix } = splitBaseUrl(opts.baseUrl);
  const clock = opts.clock ?? systemClock;
  const now = () => clock.nowMs();
  const tokens = opts.tokens;
  const { ctx, close: closePool } = createUpstreamContext('signals', origin, clock, opts, {
    connections: 128,
    defaultTimeoutMs: 1000,
    maxBodyBytes: 1024 * 1024,
  });
  const queryPrefix = `?serviceId=${opts.serviceId}`;
  const signalsPath = `${pathPrefix}/signals/`;
  const paths = {
    geolocation: `${signalsPath}geolocation`,
    geovelocity: `${signalsPath}geovelocity`,
    activeCall: `${signalsPath}active-call`,
    latestProximity: `${signalsPath}latest-proximity`,
    historicalProximity: `${signalsPath}historical-proximity`,
    newBrowser: `${signalsPath}new-browser`,
    remoteAccessTool: `${signalsPath}remote-access-tool`,
  };

  function get<T>(
    name: SignalsOperation,
    path: string,
    parse: (res: RawResponse) => T | UpstreamError,
    o?: CallOptions,
  ) {
    return callUpstream(ctx, new AuthedCall(tokens, name, 'GET', path, undefined, parse, o?.signal), o);
  }

  const batchTimeoutMs = opts.batch?.timeoutMs ?? ctx.defaultTimeoutMs;
  const parseBatch =
    (items: BatchItem[]) =>
    (res: RawResponse): RemoteAccessToolBatchItem[] | UpstreamError => {
      const v = parseJsonBody('signals', BATCH_OPERATION, res, remoteAccessToolBatchResponseSchema);
      if (v instanceof RiskgateError) return v as UpstreamError;
      const results = v.results;
      if (results.length !== items.length) {
        return malformedError(
          'signals',
          BATCH_OPERATION,
          `${results.length} results for ${items.length} items`,
          res.status,
        );
      }
      // Matching is by position: make sure each position really answers its item.
      for (let i = 0; i < results.length; i++) {
        const r = results[i]!;
        const it = items[i]!;
        if (
          r.accountId !== it.accountId ||
          r.unitId !== it.unitId ||
          r.verificationStatus !== it.verificationStatus ||
          r.interactionId !== it.interactionId
        ) {
          return malformedError('signals', BATCH_OPERATION, `result ${i} echoes another item`, res.status);
        }
        if (r.success ? r.result === undefined : r.reason === undefined) {
          return malformedError(
            'signals',
            BATCH_OPERATION,
            `result ${i}: success and result/reason disagree`,
            res.status,
          );
        }
      }
      return results;
    };
  const batcher = new RatBatcher(
    (items, traceparents) =>
      callUpstream(
        ctx,
        batchCall(
          new AuthedCall(
            tokens,
            BATCH_OPERATION,
            'POST',
            paths.remoteAccessTool,
            JSON.stringify(items),
            parseBatch(items),
            undefined,
          ),
          items.length,
          traceparents,
        ),
        traceparents.length === 0
          ? { timeoutMs: batchTimeoutMs }
          : { timeoutMs: batchTimeoutMs, traceparent: traceparents[0]! },
      ),
    opts.batch,
  );

  const cacheTtlMs = opts.cache?.ttlMs ?? DEFAULT_RAT_CACHE_TTL_MS;
  const cache =
    cacheTtlMs > 0
      ? new LRUCache<string, RemoteAccessToolResponse>({
          max: opts.cache?.max ?? 10_000,
          ttl: cacheTtlMs,
          // The clock read at every lookup (a vDSO call), not kept for 1 ms behind a timer that
          // woke the event loop for a turn of its own after nearly every lookup at a low rate.
          ttlResolution: 0,
        })
      : undefined;
  let cacheHits = 0;

  /** Only settled answers are cached: too few events may become enough as the session goes on. */
  function remember(
    key: string,
    r: UpstreamResult<RemoteAccessToolResponse>,
  ): UpstreamResult<RemoteAccessToolResponse> {
    if (cache !== undefined && r.ok && (r.value.success || r.value.reason === 'unsupported_platform')) {
      cache.set(key, r.value);
    }
    return r;
  }

  function single(p: RemoteAccessToolParams, o?: CallOptions) {
    const q = remoteAccessToolQuery(queryPrefix, p);
    return get('remote-access-tool', paths.remoteAccessTool + q, parsers.remoteAccessTool, o);
  }

  function remoteAccessTool(
    p: RemoteAccessToolParams,
    o?: CallOptions,
  ): Promise<UpstreamResult<RemoteAccessToolResponse>> {
    checkRemoteAccessTool(p);
    if (p.baselineScope === 'full_history') return single(p, o);
    const key = ratKey(p);
    if (cache !== undefined) {
      const hit = cache.get(key);
      if (hit !== undefined) {
        cacheHits++;
        return Promise.resolve({ ok: true, value: hit, durationMs: 0 });
      }
    }
    const item: BatchItem = {
      serviceId: opts.serviceId,
      accountId: p.accountId,
      unitId: p.unitId,
      verificationStatus: p.verificationStatus,
      interactionId: p.interactionId,
    };
    if (p.sdkVersionId !== undefined) item.sdkVersionId = p.sdkVersionId;
    const pending = batcher.lookup(key, item, o);
    return cache === undefined ? pending : pending.then((r) => remember(key, r));
  }

  function remoteAccessToolSingle(p: RemoteAccessToolParams, o?: CallOptions) {
    const pending = single(p, o);
    if (cache === undefined || p.baselineScope === 'full_history') return pending;
    return pending.then((r) => remember(ratKey(p), r));
  }

  return {
    remoteAccessTool: rejecting(remoteAccessTool),
    remoteAccessToolSingle: rejecting(remoteAccessToolSingle),
    newBrowser: rejecting((p, o) =>
      get('new-browser', paths.newBrowser + newBrowserQuery(queryPrefix, p, now()), parsers.newBrowser, o),
    ),
    latestProximity: rejecting((p, o) =>
      get(
        'latest-proximity',
        paths.latestProximity + proximityQuery(queryPrefix, p, now()),
        parsers.latestProximity,
        o,
      ),
    ),
    historicalProximity: rejecting((p, o) =>
      get(
        'historical-proximity',
        paths.historicalProximity + proximityQuery(queryPrefix, p, now()),
        parsers.historicalProximity,
        o,
      ),
    ),
    geovelocity: rejecting((p, o) =>
      get('geovelocity', paths.geovelocity + singleUnitQuery(queryPrefix, p, now()), parsers.geovelocity, o),
    ),
    activeCall: rejecting((p, o) =>
      get('active-call', paths.activeCall + singleUnitQuery(queryPrefix, p, now()), parsers.activeCall, o),
    ),
    geolocation: rejecting((p, o) =>
      get('geolocation', paths.geolocation + singleUnitQuery(queryPrefix, p, now()), parsers.geolocation, o),
    ),
    stats: () => ({ ...batcher.stats, cacheHits, lateAnswers: ctx.lateAnswers?.size ?? 0 }),
    async close() {
      batcher.flush();
      await closePool();
    },
  };
}
