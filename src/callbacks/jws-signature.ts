import { createHmac, timingSafeEqual } from 'node:crypto';
import { base64url } from 'jose';

/**
 * Detached JWS for Admin API callbacks (CONTRACT §2): header `{"alg":"HS256"}`, payload the raw
 * body base64url-encoded (not RFC 7797), header value `<b64url header>..<signature>`.
 */

const HS256_HEADER = base64url.encode(JSON.stringify({ alg: 'HS256' }));

function toBytes(body: string | Uint8Array): Uint8Array {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
}

function hs256(key: string, input: string): Buffer {
  return createHmac('sha256', key).update(input, 'ascii').digest();
}

/** Produces the `x-jws-signature` value for `body` with the callback signature key. */
export function signCallbackBody(body: string | Uint8Array, key: string): string {
  const input = `${HS256_HEADER}.${base64url.encode(toBytes(body))}`;
  return `${HS256_HEADER}..${base64url.encode(hs256(key, input))}`;
}

/** Why a callback signature was refused. */
export type CallbackSignatureFailure = 'MISSING' | 'MALFORMED' | 'UNSUPPORTED_ALG' | 'MISMATCH';

/**
 * Verifies `x-jws-signature` over the raw received bytes. Refuses any alg but HS256 (`none`
 * included), any attached payload and any tampering; compares in constant time.
 */
export function verifyCallbackSignature(
  headerValue: string | undefined,
  rawBody: Uint8Array,
  key: string,
): { ok: true } | { ok: false; reason: CallbackSignatureFailure } {
  if (!headerValue) return { ok: false, reason: 'MISSING' };
  const parts = headerValue.trim().split('.');
  if (parts.length !== 3 || parts[1] !== '' || !parts[0] || !parts[2])
    return { ok: false, reason: 'MALFORMED' };
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(base64url.decode(parts[0])).toString('utf8'));
  } catch {
    return { ok: false, reason: 'MALFORMED' };
  }
  if (typeof header !== 'object' || header === null || (header as { alg?: unknown }).alg !== 'HS256') {
    return { ok: false, reason: 'UNSUPPORTED_ALG' };
  }
  let given: Uint8Array;
  try {
    given = base64url.decode(parts[2]);
  } catch {
    return { ok: false, reason: 'MALFORMED' };
  }
  const expected = hs256(key, `${parts[0]}.${base64url.encode(rawBody)}`);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return { ok: false, reason: 'MISMATCH' };
  }
  return { ok: true };
}
