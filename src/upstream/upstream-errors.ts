import { ErrorCode, UpstreamError, type UpstreamName } from '../errors/riskgate-error.ts';

/**
 * Turning what an upstream did (a status, a transport failure, a body) into a typed
 * `UpstreamError`. The one place the status → code table lives, shared by every client.
 */

/** Longest upstream message kept on an error: enough to act on, never a dump of a body. */
const MAX_MESSAGE_CHARS = 300;

/** The code for an HTTP status that is an error (anything the call did not accept). */
export function codeForStatus(status: number): ErrorCode {
  switch (status) {
    case 400:
      return ErrorCode.UPSTREAM_BAD_REQUEST;
    case 401:
      return ErrorCode.UPSTREAM_UNAUTHORIZED;
    case 403:
      return ErrorCode.UPSTREAM_FORBIDDEN;
    case 404:
      return ErrorCode.UPSTREAM_NOT_FOUND;
    case 410:
      return ErrorCode.UPSTREAM_GONE;
    case 429:
      return ErrorCode.UPSTREAM_RATE_LIMITED;
    default:
      return status >= 500 && status <= 599
        ? ErrorCode.UPSTREAM_SERVER_ERROR
        : ErrorCode.UPSTREAM_UNEXPECTED_STATUS;
  }
}

/**
 * `Retry-After` in milliseconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); `undefined` when
 * absent or unreadable. A date in the past is 0.
 */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined) return undefined;
  const trimmed = v.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

/**
 * The upstream's own message from an error body, when it sent one: Trust Signals'
 * `{error, message}`, the Admin/Log `{error: true, code, message, detail}` or OAuth's
 * `{error, error_description}`. Bounded in length.
 */
export function extractUpstreamMessage(body: Uint8Array): string | undefined {
  if (body.length === 0 || body.length > 64 * 1024) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.length).toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const o = parsed as Record<string, unknown>;
  const parts: string[] = [];
  if (typeof o.error === 'string') parts.push(o.error);
  if (typeof o.code === 'number') parts.push(String(o.code));
  if (typeof o.message === 'string') parts.push(o.message);
  // RFC 6749 §5.2 (the token endpoint).
  if (typeof o.error_description === 'string') parts.push(o.error_description);
  if (typeof o.detail === 'string') parts.push(o.detail);
  if (parts.length === 0) return undefined;
  const text = parts.join(': ');
  return text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS)}…` : text;
}

/** An error for a status the call does not accept, with the upstream's message and `Retry-After`. */
export function statusError(
  upstream: UpstreamName,
  operation: string,
  status: number,
  body: Uint8Array,
  retryAfterHeader: string | string[] | undefined,
  nowMs: number,
): UpstreamError {
  const upstreamMessage = extractUpstreamMessage(body);
  const retryAfterMs = status === 429 ? parseRetryAfter(retryAfterHeader, nowMs) : undefined;
  const message = `${upstream} ${operation}: upstream answered ${status}${upstreamMessage ? ` (${upstreamMessage})` : ''}`;
  return new UpstreamError(codeForStatus(status), message, {
    upstream,
    status,
    upstreamMessage,
    retryAfterMs,
  });
}

/** A body that does not match the spec. `what` says how (never includes the body itself). */
export function malformedError(
  upstream: UpstreamName,
  operation: string,
  what: string,
  status?: number,
): UpstreamError {
  return new UpstreamError(ErrorCode.UPSTREAM_MALFORMED_RESPONSE, `${upstream} ${operation}: ${what}`, {
    upstream,
    status,
  });
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);
const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);

function errorCodeOf(err: unknown): string | undefined {
  const e = err as { code?: unknown; errors?: unknown[]; cause?: unknown };
  if (typeof e?.code === 'string') return e.code;
  // Dual-stack connects fail with an AggregateError of per-address errors.
  if (Array.isArray(e?.errors) && e.errors.length > 0) return errorCodeOf(e.errors[0]);
  if (e?.cause) return errorCodeOf(e.cause);
  return undefined;
}

/** Maps a transport failure (undici or socket error) to a typed error. */
export function transportError(upstream: UpstreamName, operation: string, err: unknown): UpstreamError {
  const sysCode = errorCodeOf(err) ?? 'UNKNOWN';
  if (TIMEOUT_CODES.has(sysCode)) {
    return new UpstreamError(ErrorCode.UPSTREAM_TIMEOUT, `${upstream} ${operation}: timed out (${sysCode})`, {
      upstream,
    });
  }
  if (sysCode === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH') {
    return malformedError(upstream, operation, 'response shorter or longer than its content-length');
  }
  const known = UNREACHABLE_CODES.has(sysCode);
  return new UpstreamError(
    ErrorCode.UPSTREAM_UNREACHABLE,
    `${upstream} ${operation}: ${known ? 'unreachable' : 'transport failure'} (${sysCode})`,
    { upstream },
    { cause: err },
  );
}

/**
 * The call's own timeout passed. `ownDelayMs`: riskgate's own part of the wait (the request written
 * late, the timer fired late), which the circuit breakers do not blame on the vendor.
 */
export function timeoutError(
  upstream: UpstreamName,
  operation: string,
  timeoutMs: number,
  ownDelayMs = 0,
): UpstreamError {
  return new UpstreamError(
    ErrorCode.UPSTREAM_TIMEOUT,
    `${upstream} ${operation}: no answer within ${timeoutMs} ms`,
    { upstream, timeout: { timeoutMs, ownDelayMs } },
  );
}

/** The decision's deadline passed (its shared signal aborted). */
export function deadlineError(upstream: UpstreamName, operation: string): UpstreamError {
  return new UpstreamError(
    ErrorCode.DEADLINE_EXCEEDED,
    `${upstream} ${operation}: decision deadline passed`,
    {
      upstream,
    },
  );
}

/**
 * A bug, not an upstream failure: a promise that must never reject did (`cause` keeps what it
 * threw, for the log). Callers get a typed answer instead of waiting forever.
 */
export function internalError(upstream: UpstreamName, operation: string, cause: unknown): UpstreamError {
  return new UpstreamError(
    ErrorCode.INTERNAL,
    `${upstream} ${operation}: internal error`,
    { upstream },
    { cause },
  );
}
