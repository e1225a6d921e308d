/**
 * Which emulated API a path belongs to, and each API's own error body, so that a fault, a 404 or an
 * unexpected failure answers in the shape a client of that API parses (CONTRACT §3-§6).
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

/** The JSON error body `api` answers with for `status`. */
export function vendorErrorBody(api: VendorApi, status: number, message: string): Record<string, unknown> {
  switch (api) {
    case 'signals':
      return { error: SIGNALS_CODES[status] ?? 'error', message };
    case 'oauth':
      return { error: OAUTH_CODES[status] ?? 'server_error', error_description: message };
    case 'admin':
    case 'logs':
      // code: the status followed by "00" (42900, 50000, 50300, 40400).
      return { error: true, code: status * 100, message };
    default:
      return { type: 'about:blank', title: message, status };
  }
}

/** A complete error response in `api`'s shape; `headers` adds e.g. `Retry-After`. */
export function vendorErrorResponse(
  api: VendorApi,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): Response {
  const contentType = api === 'control' || api === 'other' ? 'application/problem+json' : 'application/json';
  return new Response(JSON.stringify(vendorErrorBody(api, status, message)), {
    status,
    headers: { 'Content-Type': contentType, ...headers },
  });
}
