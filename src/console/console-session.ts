import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { OPERATOR_ROLES, type Operator } from '../operators/operator.ts';

/**
 * The console's session: after sign-in with an operator key, a cookie holding an HMAC-signed
 * token (the operator's name, role and key id, and an expiry), never the key itself. Every replica
 * verifies it with the same key: RISKGATE_CONSOLE_SESSION_KEY, or one derived from the operator
 * keys (so changing the keys ends every session). Each form carries a CSRF token: an HMAC of the
 * session token (of a random pre-session nonce on the sign-in form), checked on every POST.
 */

/** The session cookie's name (Path=/console). */
export const SESSION_COOKIE = 'riskgate_console';
/** The sign-in form's nonce cookie (the CSRF token of a form posted before any session). */
export const SIGN_IN_COOKIE = 'riskgate_console_sign_in';
/** The form field carrying the CSRF token. */
export const CSRF_FIELD = 'csrf';

const sessionPayload = z.strictObject({
  n: z.string().min(1).max(64),
  r: z.enum(OPERATOR_ROLES),
  k: z.string().min(1).max(64),
  /** Expiry, epoch seconds. */
  e: z.number().int(),
});

export interface SessionOptions {
  /** RISKGATE_CONSOLE_SESSION_KEY; without it, a key derived from `operatorKeys`. */
  sessionKey?: string | undefined;
  /** The operator keys (only hashed, into the derived session key). */
  operatorKeys: readonly string[];
  /** How long a session lasts, minutes. Default 480 (a working day). */
  sessionMinutes?: number;
}

export interface SignedSession {
  operator: Operator;
  /** Expiry, epoch milliseconds. */
  expiresAtMs: number;
}

/** Signs and verifies session tokens and CSRF tokens with one key. */
export class SessionSigner {
  readonly #key: Buffer;
  readonly sessionMs: number;

  constructor(o: SessionOptions) {
    // Derived through a hash of every key, sorted: each replica with the same keys agrees, and the
    // session key says nothing about any operator key.
    // With neither (single sign-on alone), a random key: derived from nothing it would be a
    // constant anyone could sign sessions with; sessions then last one process.
    this.#key =
      o.sessionKey !== undefined
        ? createHash('sha256').update(`riskgate console session\0${o.sessionKey}`).digest()
        : o.operatorKeys.length === 0
          ? randomBytes(32)
          : createHash('sha256')
              .update(`riskgate console session (derived)\0${[...o.operatorKeys].sort().join('\0')}`)
              .digest();
    this.sessionMs = (o.sessionMinutes ?? 480) * 60_000;
  }

  #mac(purpose: string, data: string): string {
    return createHmac('sha256', this.#key).update(`${purpose}\0${data}`).digest('base64url');
  }

  /** A token for `operator`, valid `sessionMs` from `nowMs`. */
  sign(operator: Operator, nowMs = Date.now()): string {
    const payload = {
      n: operator.name,
      r: operator.role,
      k: operator.keyId,
      e: Math.floor((nowMs + this.sessionMs) / 1000),
    };
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${body}.${this.#mac('session', body)}`;
  }

  /** The session of `token` when its signature holds and it has not expired; undefined otherwise. */
  verify(token: string | undefined, nowMs = Date.now()): SignedSession | undefined {
    if (token === undefined || token.length > 1024) return undefined;
    const [body, mac, ...rest] = token.split('.');
    if (body === undefined || mac === undefined || rest.length > 0) return undefined;
    if (!sameText(mac, this.#mac('session', body))) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    } catch {
      return undefined;
    }
    const payload = sessionPayload.safeParse(parsed);
    if (!payload.success || payload.data.e * 1000 <= nowMs) return undefined;
    const { n, r, k, e } = payload.data;
    return { operator: { name: n, role: r, keyId: k }, expiresAtMs: e * 1000 };
  }

  /** The CSRF token of the forms of the session `token` (or of a sign-in nonce). */
  csrfFor(token: string): string {
    return this.#mac('csrf', token);
  }

  /** Whether `presented` is the CSRF token of `token` (constant time). */
  csrfMatches(token: string | undefined, presented: unknown): boolean {
    if (token === undefined || typeof presented !== 'string') return false;
    return sameText(presented, this.csrfFor(token));
  }
}

/** A fresh random nonce for the sign-in form. */
export function signInNonce(): string {
  return randomBytes(18).toString('base64url');
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A `Set-Cookie` value of the console (HttpOnly, SameSite=Strict, Path=/console). */
export function consoleCookie(
  name: string,
  value: string,
  o: { maxAgeSeconds: number; secure: boolean },
): string {
  const parts = [
    `${name}=${value}`,
    'Path=/console',
    'HttpOnly',
    'SameSite=Strict',
    `Max-Age=${Math.max(0, Math.floor(o.maxAgeSeconds))}`,
  ];
  if (o.secure) parts.push('Secure');
  return parts.join('; ');
}
