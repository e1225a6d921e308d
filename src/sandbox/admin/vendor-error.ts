import type { Context } from 'hono';
import type { VendorErrorBody } from '../../admin/admin-schemas.ts';

/**
 * An error the emulated vendor APIs (Admin and Log) answer with the vendor envelope
 * `{ error: true, code, message, detail? }` (admin-api.md "Errors"). `code`'s first three digits are
 * the HTTP status.
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

/** Renders an error as the vendor envelope (application/json). */
export function vendorErrorResponse(c: Context, err: VendorApiError): Response {
  const res = c.json(err.toBody(), err.status as 400);
  for (const [k, v] of Object.entries(err.headers)) res.headers.set(k, v);
  return res;
}

/**
 * Error handler for the emulated APIs: vendor errors as their envelope, anything else as 500 / 50000
 * without internals (never a stack or a secret in a response).
 */
export function handleVendorError(err: Error, c: Context): Response {
  if (err instanceof VendorApiError) return vendorErrorResponse(c, err);
  return vendorErrorResponse(c, new VendorApiError(50000, 'Internal error'));
}

/**
 * RFC 9457 problem+json for the sandbox's own control routes (not part of the vendor emulation).
 * Carries the vendor code too, so a test can tell a 404 user from a 404 route.
 */
export function problemResponse(err: Error): Response {
  const e = err instanceof VendorApiError ? err : new VendorApiError(50000, 'Internal error');
  const body = {
    type: 'about:blank',
    title: e.message,
    status: e.status,
    ...(e.detail === undefined ? {} : { detail: e.detail }),
    ...(e.field === undefined ? {} : { field: e.field }),
    code: e.code,
  };
  return new Response(JSON.stringify(body), {
    status: e.status,
    headers: { 'content-type': 'application/problem+json', ...e.headers },
  });
}
