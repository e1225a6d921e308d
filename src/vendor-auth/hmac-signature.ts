import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';

/**
 * HMAC request signing shared by the Admin API and the Log API (docs/vendor-api.md#signing). This is the one
 * place the canonical form lives: the clients and the sandbox both call it, so a vendor difference is
 * fixed here once.
 */

/** What goes into the signed string. */
export interface SignableRequest {
  /** The date header value exactly as sent (`SVC-Date` for Admin, `Date` for Log), RFC 2822. */
  date: string;
  method: string;
  /** Host as in the URL; canonicalised here (lower case, default port dropped). */
  host: string;
  /** `http:` or `https:`, to know which port is the default one. Default `https:`. */
  protocol?: string;
  /** Path without the query string. */
  path: string;
  /** Query parameters for GET and DELETE, as decoded key/value pairs. */
  query?: Iterable<readonly [string, string]>;
  /** Exact body bytes for POST and PUT (never re-serialised). */
  body?: string | Uint8Array;
}

const UNRESERVED = /[^A-Za-z0-9\-._~]/g;

/** Percent-encodes everything but `A-Z a-z 0-9 - . _ ~` (a space is `%20`, never `+`). */
export function encodeRfc3986(value: string): string {
  return Buffer.from(value, 'utf8')
    .toString('latin1')
    .replace(UNRESERVED, (ch) => {
      return `%${ch.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`;
    });
}

/** The canonical query: pairs encoded, sorted by encoded key then encoded value, joined by `&`. */
export function canonicalizeQuery(query: Iterable<readonly [string, string]>): string {
  const pairs: [string, string][] = [];
  for (const [k, v] of query) pairs.push([encodeRfc3986(k), encodeRfc3986(v)]);
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

/** Lower-cased host with `:port` only when it is not the scheme's default. */
export function canonicalizeHost(host: string, protocol = 'https:'): string {
  const lower = host.toLowerCase();
  const defaultPort = protocol === 'http:' ? '80' : '443';
  const m = /^(.*):(\d+)$/.exec(lower);
  if (m && m[2] === defaultPort && !lower.endsWith(']')) return m[1]!;
  return lower;
}

/** The five-line string that is signed (docs/vendor-api.md#signing), no trailing newline. */
export function buildCanonicalString(req: SignableRequest): string {
  const method = req.method.toUpperCase();
  let params = '';
  if (method === 'POST' || method === 'PUT' || method === 'PATCH') {
    if (req.body !== undefined) {
      params = typeof req.body === 'string' ? req.body : Buffer.from(req.body).toString('utf8');
    }
  } else if (req.query) {
    params = canonicalizeQuery(req.query);
  }
  return [req.date, method, canonicalizeHost(req.host, req.protocol), req.path, params].join('\n');
}

/** An API key: its UTF-8 string, or the `KeyObject` of `createSigningKey` (imported once). */
export type SigningKey = string | KeyObject;

/**
 * The API key as a secret `KeyObject`, made once per client: `createHmac` with a string re-imports
 * the key on every call (~10% of a signature). Inspecting it never shows the key.
 */
export function createSigningKey(apiKey: string): KeyObject {
  return createSecretKey(apiKey, 'utf8');
}

/** Lower-case hex HMAC-SHA256 of the canonical string, keyed with the API key (UTF-8). */
export function signCanonicalString(canonical: string, apiKey: SigningKey): string {
  return createHmac('sha256', apiKey).update(canonical, 'utf8').digest('hex');
}

/** `Basic base64(<id>:<hex>)`. */
export function basicAuthorization(id: string, hexSignature: string): string {
  return `Basic ${Buffer.from(`${id}:${hexSignature}`, 'utf8').toString('base64')}`;
}

/** Signs a request: returns the `Authorization` header value. */
export function signRequest(req: SignableRequest, id: string, apiKey: SigningKey): string {
  return basicAuthorization(id, signCanonicalString(buildCanonicalString(req), apiKey));
}

/** Compares two hex signatures case-insensitively in constant time. */
export function hexSignaturesEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a.toLowerCase(), 'utf8');
  const bb = Buffer.from(b.toLowerCase(), 'utf8');
  if (ab.length !== bb.length) {
    // Still spend the comparison so length is the only thing the timing can tell.
    timingSafeEqual(ab, ab);
    return false;
  }
  return timingSafeEqual(ab, bb);
}

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** RFC 2822 date in UTC, e.g. `Tue, 02 Jan 2024 10:00:00 +0000`. */
export function formatRfc2822(date: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${DAYS[date.getUTCDay()]}, ${p(date.getUTCDate())} ${MONTHS[date.getUTCMonth()]} ${date.getUTCFullYear()} ${p(date.getUTCHours())}:${p(date.getUTCMinutes())}:${p(date.getUTCSeconds())} +0000`;
}

/** Parses an RFC 2822 date; `undefined` when it is not one. */
export function parseRfc2822(value: string): Date | undefined {
  if (!/^[A-Z][a-z]{2}, \d{1,2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} ([+-]\d{4}|GMT|UT|Z)$/.test(value)) {
    return undefined;
  }
  const t = Date.parse(value);
  return Number.isNaN(t) ? undefined : new Date(t);
}

/** Decodes `Basic base64(id:hex)`; `undefined` when the header is not of that form. */
export function parseBasicAuthorization(
  header: string | undefined,
): { id: string; signature: string } | undefined {
  if (!header) return undefined;
  const m = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header.trim());
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  if (i <= 0) return undefined;
  return { id: decoded.slice(0, i), signature: decoded.slice(i + 1) };
}
