/**
 * Stable error codes. A code never changes meaning once published: callers, logs, metrics and the
 * HTTP edge all key on it (the way undici's `UND_ERR_*` codes work).
 */
export const ErrorCode = {
  /** Caller input failed validation (a request body, a query, a client method's parameters). */
  INVALID_INPUT: 'RG_ERR_INVALID_INPUT',
  /** Configuration (env, files) is missing or malformed. */
  INVALID_CONFIG: 'RG_ERR_INVALID_CONFIG',
  /** A policy file failed to parse, validate or type-check. */
  INVALID_POLICY: 'RG_ERR_INVALID_POLICY',
  /** The per-decision deadline passed before the work finished. */
  DEADLINE_EXCEEDED: 'RG_ERR_DEADLINE_EXCEEDED',
  /** A single upstream call exceeded its own timeout. */
  UPSTREAM_TIMEOUT: 'RG_ERR_UPSTREAM_TIMEOUT',
  /** The upstream could not be reached (refused, reset, DNS). */
  UPSTREAM_UNREACHABLE: 'RG_ERR_UPSTREAM_UNREACHABLE',
  /** Upstream answered 400. */
  UPSTREAM_BAD_REQUEST: 'RG_ERR_UPSTREAM_BAD_REQUEST',
  /** Upstream answered 401. */
  UPSTREAM_UNAUTHORIZED: 'RG_ERR_UPSTREAM_UNAUTHORIZED',
  /** Upstream answered 403 (or a batch item came back `forbidden`). */
  UPSTREAM_FORBIDDEN: 'RG_ERR_UPSTREAM_FORBIDDEN',
  /** Upstream answered 404. */
  UPSTREAM_NOT_FOUND: 'RG_ERR_UPSTREAM_NOT_FOUND',
  /** Upstream answered 410: the resource is archived. */
  UPSTREAM_GONE: 'RG_ERR_UPSTREAM_GONE',
  /** Upstream answered 429. */
  UPSTREAM_RATE_LIMITED: 'RG_ERR_UPSTREAM_RATE_LIMITED',
  /** Upstream answered 5xx (or a batch item came back `internalError`). */
  UPSTREAM_SERVER_ERROR: 'RG_ERR_UPSTREAM_SERVER_ERROR',
  /** Upstream answered something that does not match the spec (bad JSON, wrong shape, cut stream). */
  UPSTREAM_MALFORMED_RESPONSE: 'RG_ERR_UPSTREAM_MALFORMED_RESPONSE',
  /** Upstream answered a status the spec does not define for the call. */
  UPSTREAM_UNEXPECTED_STATUS: 'RG_ERR_UPSTREAM_UNEXPECTED_STATUS',
  /**
   * A request riskgate built cannot be sent at all (a header value outside what HTTP carries, such
   * as a webhook id holding a non-Latin-1 character): no attempt can succeed, so it is never retried.
   */
  UNSENDABLE_REQUEST: 'RG_ERR_UNSENDABLE_REQUEST',
  /** The upstream route's circuit breaker is open: the call was not attempted (see `retryAfterMs`). */
  CIRCUIT_OPEN: 'RG_ERR_CIRCUIT_OPEN',
  /** The feature store (velocity counters, history) did not answer: down, refused or too slow. */
  FEATURE_STORE_UNAVAILABLE: 'RG_ERR_FEATURE_STORE_UNAVAILABLE',
  /** The Log API follower is further behind than the policy's `history.maxLagSeconds` (or has not read yet). */
  HISTORY_BEHIND: 'RG_ERR_HISTORY_BEHIND',
  /** No valid access token could be obtained. */
  TOKEN_UNAVAILABLE: 'RG_ERR_TOKEN_UNAVAILABLE',
  /** A signature (callback JWS, HMAC) did not verify. */
  INVALID_SIGNATURE: 'RG_ERR_INVALID_SIGNATURE',
  /** A signed callback arrived a second time (a replay): refused, not processed again (HTTP 409). */
  CALLBACK_REPLAYED: 'RG_ERR_CALLBACK_REPLAYED',
  /** The caller is not authenticated. */
  UNAUTHENTICATED: 'RG_ERR_UNAUTHENTICATED',
  /**
   * The endpoint is not open to this request whatever key it carries: an operator endpoint while
   * no operator key is configured (HTTP 403; the detail says how to configure one).
   */
  FORBIDDEN: 'RG_ERR_FORBIDDEN',
  /** The caller key sent more requests than its rate allows (HTTP 429, with `Retry-After`). */
  RATE_LIMITED: 'RG_ERR_RATE_LIMITED',
  /** The operation was cancelled by its caller. */
  ABORTED: 'RG_ERR_ABORTED',
  /** A request body is over the endpoint's size limit (HTTP 413). */
  PAYLOAD_TOO_LARGE: 'RG_ERR_PAYLOAD_TOO_LARGE',
  /** A request body has a content type the endpoint does not take (HTTP 415). */
  UNSUPPORTED_MEDIA_TYPE: 'RG_ERR_UNSUPPORTED_MEDIA_TYPE',
  /** No route matches the request's path (HTTP 404). */
  NOT_FOUND: 'RG_ERR_NOT_FOUND',
  /** The path exists but not for the request's method (HTTP 405, with `Allow`). */
  METHOD_NOT_ALLOWED: 'RG_ERR_METHOD_NOT_ALLOWED',
  /**
   * The change asked for no longer applies to what is there now (a lock-out that ended meanwhile:
   * another admin unlocked it, its end came): refused, nothing done (HTTP 409).
   */
  CONFLICT: 'RG_ERR_CONFLICT',
  /** riskgate is overloaded and did not start the decision (HTTP 503, with `Retry-After`). */
  OVERLOADED: 'RG_ERR_OVERLOADED',
  /** The decision log is failing and RISKGATE_DECISION_LOG_ON_FAILURE=refuse (HTTP 503). */
  DECISION_LOG_UNAVAILABLE: 'RG_ERR_DECISION_LOG_UNAVAILABLE',
  /** The outbox's store (SQLite, Redis) did not answer: down, refused or too slow (HTTP 503). */
  OUTBOX_UNAVAILABLE: 'RG_ERR_OUTBOX_UNAVAILABLE',
  /**
   * The recent decisions `POST /feedback` checks did not answer in time: with RISKGATE_WORKERS > 1
   * they are the primary's, asked over IPC (HTTP 503; never a 404 for a decision that may exist).
   */
  FEEDBACK_UNAVAILABLE: 'RG_ERR_FEEDBACK_UNAVAILABLE',
  /** The decision store (SQLite, PostgreSQL) did not answer a query: down, refused or too slow (HTTP 503). */
  DECISION_STORE_UNAVAILABLE: 'RG_ERR_DECISION_STORE_UNAVAILABLE',
  /** The database (RISKGATE_DATABASE) did not answer: down, refused or too slow (HTTP 503). */
  DATABASE_UNAVAILABLE: 'RG_ERR_DATABASE_UNAVAILABLE',
  /**
   * The audit trail (src/audit/) cannot write: an operator's change is refused, not made, rather
   * than made unaudited (HTTP 503).
   */
  AUDIT_UNAVAILABLE: 'RG_ERR_AUDIT_UNAVAILABLE',
  /**
   * An action waiting for its subject to be verified found the Admin user is not the account's
   * (or is gone): it is dropped, never carried out.
   */
  SUBJECT_MISMATCH: 'RG_ERR_SUBJECT_MISMATCH',
  /**
   * A decision's runtime list snapshot is stale: no poll of the database confirmed it for the
   * bound (10 s), so the lists input is unavailable (src/lists/list-sync.ts).
   */
  LISTS_UNAVAILABLE: 'RG_ERR_LISTS_UNAVAILABLE',
  /**
   * The rule snoozes' snapshot is stale (no poll confirmed it for 10 s): decisions evaluate every
   * rule as if nothing were snoozed, and say so (src/snoozes/snooze-sync.ts).
   */
  SNOOZES_UNAVAILABLE: 'RG_ERR_SNOOZES_UNAVAILABLE',
  /**
   * A policy version cannot take the step asked: it is not in the state the step starts from
   * (another operator moved it first), or its content would change (versions are immutable) (HTTP 409).
   */
  POLICY_VERSION_CONFLICT: 'RG_ERR_POLICY_VERSION_CONFLICT',
  /** An approval by the version's own author while self-approval is off (four eyes; HTTP 403). */
  POLICY_SELF_APPROVAL: 'RG_ERR_POLICY_SELF_APPROVAL',
  /** A bug: an error nobody raised on purpose (HTTP 500). Details go to the log, never the caller. */
  INTERNAL: 'RG_ERR_INTERNAL',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Base of every error riskgate raises on purpose. `code` is stable; `message` is for humans. */
export class RiskgateError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'RiskgateError';
    this.code = code;
  }
}

/** A caller's input failed validation; `field` is the JSON pointer-ish path of the first bad field. */
export class InputError extends RiskgateError {
  readonly field: string | undefined;
  readonly issues: readonly { field: string; message: string }[];
  constructor(message: string, issues: readonly { field: string; message: string }[] = []) {
    super(ErrorCode.INVALID_INPUT, message);
    this.name = 'InputError';
    this.issues = issues;
    this.field = issues[0]?.field;
  }
}

/** The names of the vendor APIs riskgate calls; used in errors, metrics and Server-Timing. */
export type UpstreamName =
  | 'auth'
  | 'signals'
  | 'admin'
  | 'logs'
  | 'features'
  | 'webhook'
  | 'lists'
  | 'snoozes';

/** Details an upstream failure carries besides its code. */
export interface UpstreamErrorDetails {
  upstream: UpstreamName;
  /** HTTP status, when the upstream answered. */
  status?: number;
  /** The upstream's own error message or code, when it sent one (never a secret). */
  upstreamMessage?: string;
  /** From `Retry-After`, in milliseconds, on 429. */
  retryAfterMs?: number;
  /**
   * On a timeout of riskgate's own attempt timer: the timeout it had, and riskgate's own delay on
   * that attempt (the request written late, the timer fired late), milliseconds. The circuit
   * breakers use them to tell a slow vendor from a slow riskgate (src/upstream/circuit-breaker.ts).
   */
  timeout?: { timeoutMs: number; ownDelayMs: number };
}

/** A call to a vendor API failed. Typed by `code`; retry decisions use `code` and `status` only. */
export class UpstreamError extends RiskgateError {
  readonly upstream: UpstreamName;
  readonly status: number | undefined;
  readonly upstreamMessage: string | undefined;
  readonly retryAfterMs: number | undefined;
  readonly timeout: UpstreamErrorDetails['timeout'];
  constructor(code: ErrorCode, message: string, details: UpstreamErrorDetails, options?: ErrorOptions) {
    super(code, message, options);
    this.name = 'UpstreamError';
    this.upstream = details.upstream;
    this.status = details.status;
    this.upstreamMessage = details.upstreamMessage;
    this.retryAfterMs = details.retryAfterMs;
    this.timeout = details.timeout;
  }
}

/** Narrowing helper for `catch (e: unknown)`. */
export function isRiskgateError(error: unknown): error is RiskgateError {
  return error instanceof RiskgateError;
}
