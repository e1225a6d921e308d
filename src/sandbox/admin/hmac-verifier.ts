import type { Context } from 'hono';
import {
  buildCanonicalString,
  hexSignaturesEqual,
  parseBasicAuthorization,
  parseRfc2822,
  signCanonicalString,
} from '../../vendor-auth/hmac-signature.ts';
import { VendorApiError } from '../vendor-api-errors.ts';

/**
 * Server side of docs/vendor-api.md#signing for the emulated Admin and Log APIs: rebuilds the canonical
 * string from the request as received (Host header, raw path, query decoded from the raw URL, exact body
 * bytes) and checks the `Basic base64(<id>:<hex>)` signature against it.
 */

/** The request as it arrived, split the way the canonical string needs it. */
export interface ReceivedRequest {
  method: string;
  host: string;
  protocol: string;
  /** Path exactly as on the wire (still percent-encoded), without the query. */
  rawPath: string;
  /** Decoded query pairs in wire order. */
  query: [string, string][];
  /** Exact body bytes (POST and PUT); empty otherwise. */
  body: Uint8Array;
}

/**
 * Decodes a raw query string into pairs. A `+` stays a `+` (docs/vendor-api.md#signing sends a space as
 * `%20`, and a Log API offset `+01:00` may arrive undecoded); a malformed escape is a 400.
 */
export function parseRawQuery(rawQuery: string): [string, string][] {
  const pairs: [string, string][] = [];
  if (rawQuery === '') return pairs;
  for (const segment of rawQuery.split('&')) {
    if (segment === '') continue;
    const eq = segment.indexOf('=');
    const rawKey = eq === -1 ? segment : segment.slice(0, eq);
    const rawValue = eq === -1 ? '' : segment.slice(eq + 1);
    try {
      pairs.push([decodeURIComponent(rawKey), decodeURIComponent(rawValue)]);
    } catch {
      throw new VendorApiError(40000, 'Invalid request parameters', `malformed query parameter: ${rawKey}`);
    }
  }
  return pairs;
}

/** Splits `c.req.url` into raw path and raw query without normalising either. */
export function splitRawUrl(url: string): { protocol: string; rawPath: string; rawQuery: string } {
  const schemeEnd = url.indexOf('://');
  const protocol = schemeEnd === -1 ? 'http:' : `${url.slice(0, schemeEnd)}:`;
  const pathStart = url.indexOf('/', schemeEnd === -1 ? 0 : schemeEnd + 3);
  const rest = pathStart === -1 ? '/' : url.slice(pathStart);
  const hash = rest.indexOf('#');
  const noHash = hash === -1 ? rest : rest.slice(0, hash);
  const q = noHash.indexOf('?');
  return {
    protocol,
    rawPath: q === -1 ? noHash : noHash.slice(0, q),
    rawQuery: q === -1 ? '' : noHash.slice(q + 1),
  };
}

/** Reads what the canonical string needs from a Hono request (consumes the body once, cached). */
export async function readReceivedRequest(c: Context): Promise<ReceivedRequest> {
  const { protocol, rawPath, rawQuery } = splitRawUrl(c.req.url);
  const method = c.req.method.toUpperCase();
  const body =
    method === 'POST' || method === 'PUT' || method === 'PATCH'
      ? new Uint8Array(await c.req.arrayBuffer())
      : new Uint8Array();
  return {
    method,
    host: c.req.header('host') ?? '',
    protocol,
    rawPath,
    query: parseRawQuery(rawQuery),
    body,
  };
}

/** How to verify: which date header, which key belongs to which ID, the clock and the skew. */
export interface HmacVerifyOptions {
  /** `svc-date` for the Admin API, `date` for the Log API. */
  dateHeaderName: string;
  /** The value of that header (undefined when absent). */
  dateHeaderValue: string | undefined;
  authorization: string | undefined;
  /** The API key for an ID, or undefined when the ID is not one these credentials know. */
  keyFor(id: string): string | undefined;
  nowMs: number;
  /** Accepted clock skew, seconds (docs/vendor-api.md#signing: 300). */
  skewSeconds: number;
}

/**
 * Verifies the signature; returns the authenticated ID. Throws 401 / 40100 whose `detail` gives the
 * reason and the canonical string this server computed (never the key).
 */
export function verifyHmacRequest(req: ReceivedRequest, opts: HmacVerifyOptions): { id: string } {
  const date = opts.dateHeaderValue ?? '';
  const canonical = buildCanonicalString({
    date,
    method: req.method,
    host: req.host,
    protocol: req.protocol,
    path: req.rawPath,
    query: req.query,
    body: req.body.length > 0 ? req.body : undefined,
  });
  const fail = (reason: string): never => {
    throw new VendorApiError(
      40100,
      'Authorization data missing or invalid',
      `${reason}. Signed content (request_content) computed by the server:\n${canonical}`,
    );
  };
  if (opts.dateHeaderValue === undefined) fail(`missing ${opts.dateHeaderName} header`);
  const parsedDate = parseRfc2822(date);
  if (!parsedDate) fail(`${opts.dateHeaderName} is not an RFC 2822 date`);
  if (Math.abs(parsedDate!.getTime() - opts.nowMs) > opts.skewSeconds * 1000) {
    fail(`${opts.dateHeaderName} is more than ${opts.skewSeconds} s away from the server clock`);
  }
  const auth = parseBasicAuthorization(opts.authorization);
  if (!auth) fail('missing or malformed Authorization header (expected Basic base64(<id>:<hex>))');
  const key = opts.keyFor(auth!.id);
  if (key === undefined) fail(`unknown ID in Authorization: ${auth!.id}`);
  if (!hexSignaturesEqual(auth!.signature, signCanonicalString(canonical, key!))) {
    fail('signature mismatch');
  }
  return { id: auth!.id };
}
