import { ErrorCode, InputError, RiskgateError, type UpstreamError } from '../errors/riskgate-error.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { CallTracer } from '../upstream/call-tracer.ts';
import type { CircuitBreakers } from '../upstream/circuit-breaker.ts';
import { type CallInfo, callUpstream, parseJsonBody, type RetryTuning } from '../upstream/upstream-call.ts';
import { createUpstreamContext } from '../upstream/upstream-context.ts';
import { splitBaseUrl, type UpstreamPoolOptions } from '../upstream/upstream-pool.ts';
import type { AttemptRequest, HttpMethod, RawResponse } from '../upstream/upstream-request.ts';
import { type CallOptions, rejecting, type UpstreamResult } from '../upstream/upstream-result.ts';
import {
  canonicalizeQuery,
  createSigningKey,
  formatRfc2822,
  type SigningKey,
  signRequest,
} from '../vendor-auth/hmac-signature.ts';
import { ReadCache, type ReadCacheOptions } from './admin-read-cache.ts';
import {
  type AdminInfo,
  adminInfoSchema,
  deletedDeviceSchema,
  type Factor,
  type OneTimeCode,
  oneTimeCodeSchema,
  SETTABLE_USER_STATUSES,
  type SettableUserStatus,
  type UpdatedUser,
  type UserDevices,
  type UserPage,
  updatedUserSchema,
  userDevicesSchema,
  userPageSchema,
} from './admin-responses.ts';
import { type AdminUser, adminUserSchema, DEVICE_TYPES, FACTORS } from './admin-schemas.ts';

/**
 * The Admin API client: the calls riskgate needs, each signed per docs/vendor-api.md#signing with `SVC-Date`
 * (signed anew for every attempt, so a retry never carries a stale date), answers parsed with zod.
 * 304 is "no change" and 410 "already archived": outcomes, not errors.
 */

export const ADMIN_PREFIX = '/srv/admin/v1';

/**
 * Every operation the client calls (its circuit-breaker routes are `admin <operation>`): listed so
 * `riskgate_circuit_state` shows each route from the start, and typed so a new call must be added.
 */
export const ADMIN_OPERATIONS = [
  'get-user',
  'get-user-devices',
  'update-user',
  'delete-device',
  'create-one-time-code',
  'lookup-users',
  'get-info',
] as const;
type AdminOperation = (typeof ADMIN_OPERATIONS)[number];

/** Defaults of the user read cache (milliseconds); see `AdminClientOptions.cache.user`. */
const USER_CACHE_TTL_MS = 2000;
const USER_CACHE_STALE_MS = 5000;

/** Options of `createAdminClient`. Times in milliseconds. */
export interface AdminClientOptions {
  /** `{base_url}`: the service origin, e.g. `http://127.0.0.1:4010` (paths add `/srv/admin/v1`; a path in
   * the base URL, e.g. a gateway's, goes in front). */
  baseUrl: string;
  serviceId: string;
  /** The Admin API key (HMAC key). Never logged, never in an error. */
  apiKey: string;
  /** Connections to the Admin origin (one call in flight each). Default 64. */
  connections?: number;
  /** Timeout of one attempt when the call gives none. Default 2000. */
  defaultTimeoutMs?: number;
  /** Caches of `getUserCached` and `getUserDevicesCached`. */
  cache?: {
    /**
     * `getUserCached`. Defaults: fresh 2000, then served stale (while refreshed) 5000 more. Short on
     * purpose: the user's status drives `account-locked`, a security rule, so a lock made outside
     * riskgate must show within seconds.
     */
    user?: ReadCacheOptions;
    /** `getUserDevicesCached`. Defaults: fresh 5000, then stale 30000 more. */
    devices?: ReadCacheOptions;
  };
  /** Its wall time dates `SVC-Date`, its monotonic time ages the read caches. Default {@link systemClock}. */
  clock?: Clock;
  onCall?: (info: CallInfo) => void;
  /** Client spans and `traceparent` on every call, when tracing is on (src/observability/tracing.ts). */
  tracer?: CallTracer | undefined;
  /** Per-route circuit breakers shared with the other clients (src/upstream/circuit-breaker.ts). */
  breakers?: CircuitBreakers | undefined;
  pool?: Omit<UpstreamPoolOptions, 'connections'>;
  retry?: RetryTuning;
}

export const DEVICE_STATUSES = ['enrolled', 'unenrolled', 'archived'] as const;
export type DeviceStatus = (typeof DEVICE_STATUSES)[number];
export type DeviceType = (typeof DEVICE_TYPES)[number];

/** Filter of `GET /users/{id}/devices` (each a set, sent comma-separated). */
export interface DeviceFilter {
  status?: readonly DeviceStatus[];
  type?: readonly DeviceType[];
}

/** What `PUT /users/{id}` may change here. */
export interface UserUpdate {
  status?: SettableUserStatus;
  /** Values of `FACTORS` (checked before sending). An empty list leaves `passcode` as the only factor. */
  allowed_factors?: readonly (Factor | (string & {}))[];
}

/** Outcome of `updateUser`. */
export interface UserUpdateOutcome {
  /** False on 304 (nothing to change) and on 410. */
  changed: boolean;
  /** 410: the user is archived, so nothing can change (and it cannot authenticate either). */
  alreadyArchived: boolean;
  /** The attributes the API reports as updated (200 only). */
  updated: UpdatedUser;
}

/** Outcome of `deleteDevice`. */
export interface DeviceDeleteOutcome {
  /** 410: it was archived already (e.g. by an earlier attempt whose answer was lost). */
  alreadyArchived: boolean;
  /** `success_2fa_disabled` when it was the user's only enrolled device. */
  result?: 'success' | 'success_2fa_disabled';
  archivedAt?: number;
}

type R<T> = Promise<UpstreamResult<T>>;

/** Filter of `GET /users`. */
export interface UserLookup {
  username?: string;
  status?: SettableUserStatus | 'archived';
  /** 0 to 100, default 25 (server side). */
  limit?: number;
  offset?: number;
}

/**
 * What `createAdminClient` returns. Methods never reject for upstream failures; bad arguments reject
 * with `InputError`. "Retryable" calls are retried at most once, on a transport failure, a timeout,
 * a 5xx other than 501 or a 429 whose `Retry-After` fits (see `callUpstream`); the others never are.
 */
export interface AdminClient {
  /** `GET /users/{id}`, uncached; retryable. A missing user is `UPSTREAM_NOT_FOUND`. */
  getUser(userId: string, opts?: CallOptions): R<AdminUser>;
  /** `GET /users/{id}/devices`, uncached, filtered upstream by status and type; retryable. */
  getUserDevices(userId: string, filter?: DeviceFilter, opts?: CallOptions): R<UserDevices>;
  /**
   * `getUser` through the short-lived cache (stale-while-revalidate; fresh 2 s, stale 5 s more by
   * default). This client's writes drop the user's entries and any read of them in flight. Treat
   * the value as read-only.
   */
  getUserCached(userId: string, opts?: CallOptions): R<AdminUser>;
  /** `getUserDevices` through the cache. Treat the value as read-only. */
  getUserDevicesCached(userId: string, filter?: DeviceFilter, opts?: CallOptions): R<UserDevices>;
  /**
   * `PUT /users/{id}`; retryable (a PUT sets, so repeating it is harmless). Drops the cached user
   * unless the answer is 304 (nothing changed); drops the cached devices only for status=disabled,
   * which unenrolls them all (or on 410).
   */
  updateUser(userId: string, update: UserUpdate, opts?: CallOptions): R<UserUpdateOutcome>;
  /**
   * `DELETE /devices/{id}`; never retried here (a caller's retry that finds it archived gets
   * `alreadyArchived`).
   */
  deleteDevice(deviceId: string, opts?: CallOptions): R<DeviceDeleteOutcome>;
  /** `POST /users/{id}/one_time_code`; never retried (a new code voids the previous one). */
  createOneTimeCode(
    userId: string,
    params?: { length?: number; valid_secs?: number },
    opts?: CallOptions,
  ): R<OneTimeCode>;
  /** `GET /info`: the service's own description (name, trial, callback URL); retryable. */
  getInfo(opts?: CallOptions): R<AdminInfo>;
  /**
   * `GET /users` (username is a partial match upstream; filters combine with AND); retryable.
   * `limit` 0 to 100, `offset` at least 0.
   */
  lookupUsers(filter: UserLookup, opts?: CallOptions): R<UserPage>;
  /** Drops cached reads of a user (done automatically after this client's own writes). */
  invalidateUser(userId: string): void;
  /** Cache counters over both cached reads: fresh and stale hits, misses, background refreshes. */
  cacheStats(): { fresh: number; stale: number; misses: number; refreshes: number };
  /** Closes the connections once the calls in flight finish. */
  close(): Promise<void>;
}

/** Who signs and where to: the parts of a signed Admin request that do not change per call. */
export interface AdminSigner {
  serviceId: string;
  /** Best a `createSigningKey` key object, made once. */
  apiKey: SigningKey;
  /** Host as in the base URL (`host[:port]`). */
  host: string;
  /** `http:` or `https:`. */
  protocol: string;
}

/**
 * One Admin request signed per docs/vendor-api.md#signing at `date` (RFC 2822, sent as `SVC-Date`): the query
 * is sent exactly in its canonical form, the body is sent as the very bytes that were signed.
 */
export function signAdminRequest(
  signer: AdminSigner,
  date: string,
  method: HttpMethod,
  path: string,
  query: readonly (readonly [string, string])[] | undefined,
  body: string | undefined,
): AttemptRequest {
  const authorization = signRequest(
    { date, method, host: signer.host, protocol: signer.protocol, path, query, body },
    signer.serviceId,
    signer.apiKey,
  );
  const headers: Record<string, string> = { 'svc-date': date, authorization, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const qs = query !== undefined && query.length > 0 ? `?${canonicalizeQuery(query)}` : '';
  return { method, path: path + qs, headers, body };
}

const ID = /^[A-Za-z0-9._~-]{1,256}$/;

function bad(field: string, message: string): never {
  throw new InputError(`${field} ${message}`, [{ field, message }]);
}

function checkId(field: string, v: unknown): string {
  if (typeof v !== 'string' || !ID.test(v))
    bad(field, 'must be 1 to 256 characters of A-Z, a-z, 0-9 and . _ ~ -');
  return v;
}

function checkIntRange(field: string, v: unknown, min: number, max: number): void {
  if (v !== undefined && (!Number.isSafeInteger(v) || (v as number) < min || (v as number) > max)) {
    bad(field, `must be an integer from ${min} to ${max}`);
  }
}

/** Creates an Admin API client. Throws `RG_ERR_INVALID_CONFIG` for missing credentials (never echoing the key). */
export function createAdminClient(opts: AdminClientOptions): AdminClient {
  if (!opts.serviceId || !opts.apiKey) {
    throw new RiskgateError(ErrorCode.INVALID_CONFIG, 'admin client: serviceId and apiKey are required');
  }
  const { origin, host, protocol, pathPrefix } = splitBaseUrl(opts.baseUrl);
  // A base URL with a path (a gateway) is kept in front of the API's own prefix.
  const prefix = `${pathPrefix}${ADMIN_PREFIX}`;
  const clock = opts.clock ?? systemClock;
  const { ctx, close: closePool } = createUpstreamContext('admin', origin, clock, opts, {
    connections: 64,
    defaultTimeoutMs: 2000,
    maxBodyBytes: 1024 * 1024,
  });
  const signer: AdminSigner = {
    serviceId: opts.serviceId,
    apiKey: createSigningKey(opts.apiKey),
    host,
    protocol,
  };

  /** A request signed now: called for every attempt. */
  function signed(
    method: HttpMethod,
    path: string,
    query: [string, string][] | undefined,
    body: string | undefined,
  ): AttemptRequest {
    // The call's `traceparent`, when tracing is on, is set by callUpstream (not a signed header).
    return signAdminRequest(signer, formatRfc2822(new Date(clock.nowMs())), method, path, query, body);
  }

  function call<T>(
    name: AdminOperation,
    method: HttpMethod,
    path: string,
    parse: (res: RawResponse) => T | UpstreamError,
    o: CallOptions | undefined,
    extra: {
      query?: [string, string][];
      body?: string;
      retry?: boolean;
      accept?: (s: number) => boolean;
    } = {},
  ): R<T> {
    return callUpstream(
      ctx,
      {
        name,
        build: () => signed(method, path, extra.query, extra.body),
        parse,
        retry: extra.retry ?? true,
        accept: extra.accept,
      },
      o,
    );
  }

  /**
   * A shared load runs without its caller's signal (others may wait on it) but in the trace of the
   * caller that started it, when tracing is on.
   */
  const loadOptions = (o: CallOptions | undefined): CallOptions =>
    o?.traceparent === undefined ? cacheTimeout : { ...cacheTimeout, traceparent: o.traceparent };

  const userPath = (id: string) => `${prefix}/users/${checkId('userId', id)}`;
  const parseUser = (res: RawResponse) => parseJsonBody('admin', 'get-user', res, adminUserSchema);
  const parseDevices = (res: RawResponse) =>
    parseJsonBody('admin', 'get-user-devices', res, userDevicesSchema);

  function devicesQuery(filter: DeviceFilter | undefined): [string, string][] {
    const q: [string, string][] = [];
    if (filter?.status !== undefined) {
      for (const s of filter.status)
        if (!(DEVICE_STATUSES as readonly string[]).includes(s))
          bad('filter.status', `has unknown status ${s}`);
      if (filter.status.length > 0) q.push(['status', filter.status.join(',')]);
    }
    if (filter?.type !== undefined) {
      for (const t of filter.type)
        if (!(DEVICE_TYPES as readonly string[]).includes(t)) bad('filter.type', `has unknown type ${t}`);
      if (filter.type.length > 0) q.push(['type', filter.type.join(',')]);
    }
    return q;
  }

  const getUser = (id: string, o?: CallOptions) => call('get-user', 'GET', userPath(id), parseUser, o);
  const getUserDevices = (id: string, filter?: DeviceFilter, o?: CallOptions) =>
    call('get-user-devices', 'GET', `${userPath(id)}/devices`, parseDevices, o, {
      query: devicesQuery(filter),
    });

  const userCache = opts.cache?.user;
  const users = new ReadCache<AdminUser>(
    {
      ttlMs: userCache?.ttlMs ?? USER_CACHE_TTL_MS,
      staleMs: userCache?.staleMs ?? USER_CACHE_STALE_MS,
      max: userCache?.max,
    },
    clock,
    'get-user',
  );
  const devices = new ReadCache<UserDevices>(opts.cache?.devices ?? {}, clock, 'get-user-devices');
  const cacheTimeout = { timeoutMs: ctx.defaultTimeoutMs };

  function invalidateUser(userId: string): void {
    users.invalidate(`${userId}\u0001`);
    devices.invalidate(`${userId}\u0001`);
  }

  return {
    getUser: rejecting(getUser),
    getUserDevices: rejecting(getUserDevices),
    getUserCached: rejecting((id: string, o?: CallOptions) => {
      userPath(id);
      return users.get(`${id}\u0001`, () => getUser(id, loadOptions(o)), o);
    }),
    getUserDevicesCached: rejecting((id: string, filter?: DeviceFilter, o?: CallOptions) => {
      userPath(id);
      const key = `${id}\u0001${canonicalizeQuery(devicesQuery(filter))}`;
      return devices.get(key, () => getUserDevices(id, filter, loadOptions(o)), o);
    }),
    updateUser: rejecting((id: string, update: UserUpdate, o?: CallOptions) => {
      const path = userPath(id);
      if (typeof update !== 'object' || update === null) bad('update', 'must be an object');
      const body: { status?: string; allowed_factors?: string[] } = {};
      if (update.status !== undefined) {
        if (!(SETTABLE_USER_STATUSES as readonly string[]).includes(update.status)) {
          bad('status', `must be one of ${SETTABLE_USER_STATUSES.join(', ')}`);
        }
        body.status = update.status;
      }
      if (update.allowed_factors !== undefined) {
        if (!Array.isArray(update.allowed_factors)) bad('allowed_factors', 'must be an array');
        for (const f of update.allowed_factors) {
          if (!(FACTORS as readonly string[]).includes(f)) bad('allowed_factors', `has unknown factor ${f}`);
        }
        body.allowed_factors = [...update.allowed_factors];
      }
      const json = JSON.stringify(body);
      return call<UserUpdateOutcome>(
        'update-user',
        'PUT',
        path,
        (res) => {
          if (res.status === 304) return { changed: false, alreadyArchived: false, updated: {} };
          if (res.status === 410) return { changed: false, alreadyArchived: true, updated: {} };
          const v = parseJsonBody('admin', 'update-user', res, updatedUserSchema);
          return v instanceof RiskgateError
            ? (v as UpstreamError)
            : { changed: true, alreadyArchived: false, updated: v };
        },
        o,
        { body: json, accept: (s) => s === 200 || s === 304 || s === 410 },
      ).then((r) => {
        // 304: nothing changed, the cached reads still hold. Anything else (a change, 410 archived,
        // or a failure that may have been applied) drops the user. A user PUT leaves devices alone,
        // except status=disabled, which unenrolls every device.
        if (r.ok && r.value.changed === false && r.value.alreadyArchived === false) return r;
        users.invalidate(`${id}\u0001`);
        if (body.status === 'disabled' || (r.ok && r.value.alreadyArchived)) {
          devices.invalidate(`${id}\u0001`);
        }
        return r;
      });
    }),
    deleteDevice: rejecting((deviceId: string, o?: CallOptions) => {
      checkId('deviceId', deviceId);
      return call<DeviceDeleteOutcome>(
        'delete-device',
        'DELETE',
        `${prefix}/devices/${deviceId}`,
        (res) => {
          if (res.status === 410) return { alreadyArchived: true };
          const v = parseJsonBody('admin', 'delete-device', res, deletedDeviceSchema);
          if (v instanceof RiskgateError) return v as UpstreamError;
          const out: DeviceDeleteOutcome = { alreadyArchived: false, result: v.result };
          if (v.archived_at !== undefined) out.archivedAt = v.archived_at;
          return out;
        },
        o,
        // Not retried here: the issue allows retries for GETs and PUT status only. The outbox
        // retries at its own level, and a 410 there is "already archived".
        { accept: (s) => s === 200 || s === 410, retry: false },
      ).then((r) => {
        devices.invalidate(undefined, (list) => list.devices.some((d) => d.device_id === deviceId));
        return r;
      });
    }),
    createOneTimeCode: rejecting(
      (id: string, params: { length?: number; valid_secs?: number } = {}, o?: CallOptions) => {
        const path = `${userPath(id)}/one_time_code`;
        checkIntRange('length', params.length, 4, 20);
        checkIntRange('valid_secs', params.valid_secs, 60, 604_800);
        const body: { length?: number; valid_secs?: number } = {};
        if (params.length !== undefined) body.length = params.length;
        if (params.valid_secs !== undefined) body.valid_secs = params.valid_secs;
        return call(
          'create-one-time-code',
          'POST',
          path,
          (res) => parseJsonBody('admin', 'create-one-time-code', res, oneTimeCodeSchema),
          o,
          { body: JSON.stringify(body), retry: false },
        );
      },
    ),
    lookupUsers: rejecting((filter: UserLookup, o?: CallOptions) => {
      const q: [string, string][] = [];
      if (filter.username !== undefined) {
        if (typeof filter.username !== 'string' || filter.username.length > 100)
          bad('username', 'must be at most 100 characters');
        q.push(['username', filter.username]);
      }
      if (filter.status !== undefined) q.push(['status', filter.status]);
      checkIntRange('limit', filter.limit, 0, 100);
      checkIntRange('offset', filter.offset, 0, Number.MAX_SAFE_INTEGER);
      if (filter.limit !== undefined) q.push(['limit', String(filter.limit)]);
      if (filter.offset !== undefined) q.push(['offset', String(filter.offset)]);
      return call(
        'lookup-users',
        'GET',
        `${prefix}/users`,
        (res) => parseJsonBody('admin', 'lookup-users', res, userPageSchema),
        o,
        {
          query: q,
        },
      );
    }),
    getInfo: rejecting((o?: CallOptions) =>
      call(
        'get-info',
        'GET',
        `${prefix}/info`,
        (res) => parseJsonBody('admin', 'get-info', res, adminInfoSchema),
        o,
      ),
    ),
    invalidateUser,
    cacheStats: () => {
      const a = users.stats;
      const b = devices.stats;
      return {
        fresh: a.fresh + b.fresh,
        stale: a.stale + b.stale,
        misses: a.misses + b.misses,
        refreshes: a.refreshes + b.refreshes,
      };
    },
    close: closePool,
  };
}
