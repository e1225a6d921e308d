import { createHmac } from 'node:crypto';
import { base64url, errors, flattenedVerify } from 'jose';

/**
 * Detached JWS for Admin API callbacks (docs/vendor-api.md#callbacks): header `{"alg":"HS256"}`, payload the
 * raw body base64url-encoded (not RFC 7797), header value `<b64url header>..<signature>`.
 */

/** Largest admin callback body accepted at `POST /callbacks/admin`, bytes. */
export const MAX_CALLBACK_BODY_BYTES = 64 * 1024;

const HS256_HEADER = base64url.encode(JSON.stringify({ alg: 'HS256' }));
const ALGORITHMS = ['HS256'];
const encoder = new TextEncoder();

function toBytes(body: string | Uint8Array): Uint8Array {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
}

/** Produces the `x-jws-signature` value for `body` with the callback signature key. */
export function signCallbackBody(body: string | Uint8Array, key: string): string {
  const input = `${HS256_HEADER}.${base64url.encode(toBytes(body))}`;
  const mac = createHmac('sha256', key).update(input, 'ascii').digest();
  return `${HS256_HEADER}..${base64url.encode(mac)}`;
}

/** Why a callback signature was refused. */
export type CallbackSignatureFailure = 'MISSING' | 'MALFORMED' | 'UNSUPPORTED_ALG' | 'MISMATCH';

/** Outcome of `verifyCallbackSignature`. */
export type CallbackSignatureResult =
  | {
      ok: true;
      /** The verified signature's bytes (decoded): unique per callback body, whatever its encoding. */
      signature: Uint8Array;
      /**
       * Whether the signature part was sent in its one canonical encoding: unpadded base64url
       * (RFC 7515 §2) whose unused low bits are zero (RFC 4648 §3.5). jose decodes leniently (a
       * `=` or odd trailing bits still verify), so one signature has several spellings; the vendor
       * sends only this one, and a callback in another is refused (a replay being re-spelled).
       */
      canonical: boolean;
    }
  | { ok: false; reason: CallbackSignatureFailure };

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** The bytes of a base64url string, and whether it is their one canonical spelling. */
function decodeSignature(encoded: string): { bytes: Uint8Array; canonical: boolean } {
  const bytes = new Uint8Array(Buffer.from(encoded, 'base64url'));
  return {
    bytes,
    canonical: BASE64URL.test(encoded) && Buffer.from(bytes).toString('base64url') === encoded,
  };
}

/**
 * Verifies `x-jws-signature` over the raw received bytes with jose (`flattenedVerify`, HS256 only):
 * refuses any other alg (`none` included), an attached payload, an unknown `crit` and any
 * tampering. Resolves (never rejects) with the verdict; the reason is for logs, never for the caller.
 */
export async function verifyCallbackSignature(
  headerValue: string | undefined,
  rawBody: Uint8Array,
  key: string,
): Promise<CallbackSignatureResult> {
  if (!headerValue) return { ok: false, reason: 'MISSING' };
  const parts = headerValue.trim().split('.');
  // Detached only: a payload in the header value is not what the vendor sends (docs/vendor-api.md#callbacks).
  if (parts.length !== 3 || parts[1] !== '' || !parts[0] || !parts[2]) {
    return { ok: false, reason: 'MALFORMED' };
  }
  try {
    await flattenedVerify(
      { protected: parts[0], payload: base64url.encode(rawBody), signature: parts[2] },
      encoder.encode(key),
      { algorithms: ALGORITHMS },
    );
    const { bytes, canonical } = decodeSignature(parts[2]);
    return { ok: true, signature: bytes, canonical };
  } catch (err) {
    if (err instanceof errors.JOSEAlgNotAllowed) return { ok: false, reason: 'UNSUPPORTED_ALG' };
    if (err instanceof errors.JWSSignatureVerificationFailed) return { ok: false, reason: 'MISMATCH' };
    return { ok: false, reason: 'MALFORMED' };
  }
}
