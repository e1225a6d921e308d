import type { Context } from 'hono';
import type { z } from 'zod';
import type { VendorErrorBody } from '../admin/admin-schemas.ts';

/**
 * The error bodies of every API the sandbox serves, in one place: Trust Signals `{error, message}`
 * (docs/vendor-api.md#signal-errors), OAuth `{error, error_description}` (RFC 6749 §5.2), Admin and Log API
 * `{error: true, code, message, detail?}` (docs/vendor-api.md#admin-errors, #log-errors), and RFC 9457
 * problem+json for the sandbox's own `/sandbox/...` control API. A fault, a 404 or an unexpected
 * failure answers in the shape a client of that API parses.
 */
export type VendorApi = 'oauth' | 'signals' | 'admin' | 'logs' | 'control' | 'other';

export function apiOfPath(path: string): VendorApi {
  if (path.startsWith('/api/v1/')) return 'signals';
  if (path.startsWith('/oauth/v2/')) return 'oauth';
  if (path.startsWith('/srv/admin/v1/')) return 'admin';
  if (path.startsWith('/logs/v1/')) return 'logs';
  if (path === '/sandbox' || path.startsWith('/sandbox/')) return 'control';
  return 'other';
}

/**
 * An error with a vendor code (`40000`, `40400`, `42900`, …; the first three digits are the HTTP
 * status). The Admin and Log APIs answer it as their envelope, the control API as problem+json.
 */
export class VendorApiError extends Error {
  readonly status: number;
  readonly code: number;
  readonly detail: string | undefined;
  /** Extra response headers, e.g. `Retry-After` on 429. */
  readonly headers: Record<string, string>;
  /** The request field at fault, when one is (400s). */
  field: string | undefined;
  constructor(code: number, message: string, detail?: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'VendorApiError';
    this.code = code;
    this.status = Math.floor(code / 100);
    this.detail = detail;
    this.headers = headers;
  }

  toBody(): VendorErrorBody {
    return {
      error: true,
      code: this.code,
      message: this.message,
      ...(this.detail === undefined ? {} : { detail: this.detail }),
    };
  }
}

/** 400 / 40000 with `detail` naming the offending field. */
export function invalidParameter(field: string, why: string): VendorApiError {
  const err = new VendorApiError(40000, 'Invalid request parameters', `${field}: ${why}`);
  err.field = field;
  return err;
}

export function notFound(what: string): VendorApiError {
  return new VendorApiError(40400, 'Resource not found', what);
}

export function gone(detail: string): VendorApiError {
  return new VendorApiError(41000, 'Resource archived', detail);
}

export function tooManyRequests(retryAfterSeconds: number): VendorApiError {
  return new VendorApiError(42900, 'Too many requests', undefined, {
    'Retry-After': String(retryAfterSeconds),
  });
}

/** The first zod issue as a 400 naming its field (unknown keys by their dotted path). */
export function zodToVendorError(error: z.ZodError): VendorApiError {
  const issue = error.issues[0];
  if (!issue) return invalidParameter('body', 'invalid');
  const at = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    return invalidParameter(issue.keys.map((k) => (at ? `${at}.${k}` : k)).join(', '), 'unknown parameter');
  }
  return invalidParameter(at || 'body', issue.message);
}

const JSON_TYPE = 'application/json';
const PROBLEM_TYPE = 'application/problem+json';

function respond(status: number, body: unknown, contentType: string, headers: Record<string, string>) {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': contentType, ...headers } });
}

/** A Trust Signals error (docs/vendor-api.md#signal-errors); a 401 carries `WWW-Authenticate: Bearer`. */
export function signalsErrorResponse(
  status: number,
  error: string,
  message: string,
  headers: Record<string, string> = {},
): Response {
  const h = status === 401 ? { 'WWW-Authenticate': 'Bearer error="invalid_token"', ...headers } : headers;
  return respond(status, { error, message }, JSON_TYPE, h);
}

/** An OAuth 2.0 token endpoint error (RFC 6749 §5.2), never cached; a 401 asks for HTTP Basic. */
export function oauthErrorResponse(
  status: number,
  error: string,
  description: string,
  headers: Record<string, string> = {},
): Response {
  const h: Record<string, string> = { 'Cache-Control': 'no-store', Pragma: 'no-cache', ...headers };
  if (status === 401) h['WWW-Authenticate'] = 'Basic realm="sandbox", charset="UTF-8"';
  return respond(status, { error, error_description: description }, JSON_TYPE, h);
}

/**
 * RFC 9457 problem+json of the control API. Carries the vendor code too, so a test can tell a 404
 * user from a 404 route, and `field` for a 400.
 */
export function problemResponse(err: VendorApiError): Response {
  const body = {
    type: 'about:blank',
    title: err.message,
    status: err.status,
    ...(err.detail === undefined ? {} : { detail: err.detail }),
    ...(err.field === undefined ? {} : { field: err.field }),
    code: err.code,
  };
  return respond(err.status, body, PROBLEM_TYPE, err.headers);
}

/** `err` in the error shape of `api`. */
export function apiErrorResponse(api: VendorApi, err: VendorApiError): Response {
  switch (api) {
    case 'signals':
      return signalsErrorResponse(err.status, SIGNALS_CODES[err.status] ?? 'error', err.message, err.headers);
    case 'oauth':
      return oauthErrorResponse(
        err.status,
        OAUTH_CODES[err.status] ?? 'server_error',
        err.message,
        err.headers,
      );
    case 'admin':
    case 'logs':
      return respond(err.status, err.toBody(), JSON_TYPE, err.headers);
    default:
      return problemResponse(err);
  }
}

const SIGNALS_CODES: Record<number, string> = {
  404: 'not_found',
  405: 'method_not_allowed',
  429: 'rate_limited',
  500: 'internal_error',
  503: 'service_unavailable',
};
const OAUTH_CODES: Record<number, string> = {
  404: 'invalid_request',
  405: 'invalid_request',
  429: 'temporarily_unavailable',
  500: 'server_error',
  503: 'temporarily_unavailable',
};

/**
 * A complete error response in `api`'s shape for `status` (faults, unmatched routes, unexpected
 * failures); `headers` adds e.g. `Retry-After`. Admin and Log API codes are the status and `00`.
 */
export function vendorErrorResponse(
  api: VendorApi,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): Response {
  return apiErrorResponse(api, new VendorApiError(status * 100, message, undefined, headers));
}

/**
 * `onError` of the modules: a VendorApiError answers in the shape of the API its path belongs to
 * (control routes included); anything else is rethrown, so the sandbox's top-level handler logs it
 * and answers a bare 500 (never a stack or a secret in a response).
 */
export function handleVendorError(err: Error, c: Context): Response {
  if (err instanceof VendorApiError) return apiErrorResponse(apiOfPath(c.req.path), err);
  throw err;
}
