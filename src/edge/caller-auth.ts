import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { problemOf, problemResponse } from '../problem/problem-details.ts';

/**
 * Caller authentication: `Authorization: Bearer <key>` against the configured keys.
 *
 * Keys are compared as SHA-256 digests with `timingSafeEqual`, which makes every comparison the
 * same length whatever the presented key, and every configured key is compared (no early exit), so
 * the time taken says nothing about how much of a key matched or which key it was.
 *
 * A key is named in logs, decision log lines and answers by its id (`keyId`), never by itself.
 */

/** Who a request authenticated as: the key's id and whether it is an operator's or a caller's. */
export interface Principal {
  keyId: string;
  role: 'caller' | 'operator';
}

declare module 'hono' {
  interface ContextVariableMap {
    /** Set by the key middlewares once a request is authenticated. */
    principal: Principal;
  }
}

/**
 * A key's id: `key-` and the first 12 hex digits of its SHA-256. The same on every replica and
 * across restarts (an operator computes it with `printf %s "$KEY" | sha256sum | cut -c1-12`); 48
 * bits of a hash of a 16+ character key say nothing usable about the key.
 */
export function keyIdOf(key: string): string {
  return `key-${createHash('sha256').update(key, 'utf8').digest('hex').slice(0, 12)}`;
}

/** Identifies a presented key among `keys` in constant time: its id, or undefined. */
export function createKeyring(keys: readonly string[]): (presented: string) => string | undefined {
  const known = keys.map((k) => ({
    digest: createHash('sha256').update(k, 'utf8').digest(),
    id: keyIdOf(k),
  }));
  return (presented) => {
    const digest = createHash('sha256').update(presented, 'utf8').digest();
    let match: string | undefined;
    for (const k of known) if (timingSafeEqual(k.digest, digest)) match = k.id;
    return match;
  };
}

export function createKeyVerifier(keys: readonly string[]): (presented: string) => boolean {
  const identify = createKeyring(keys);
  return (presented) => identify(presented) !== undefined;
}

const BEARER = /^Bearer[ ]+(\S+)\s*$/i;

/** The key of an `Authorization: Bearer <key>` header; undefined when absent or malformed. */
export function presentedKey(header: string | undefined): string | undefined {
  return header ? BEARER.exec(header)?.[1] : undefined;
}

function unauthenticated(header: string | undefined, which: string): Response {
  return problemResponse(
    problemOf(
      ErrorCode.UNAUTHENTICATED,
      header ? `The ${which} key is not valid.` : 'Send Authorization: Bearer <key>.',
    ),
    { 'www-authenticate': 'Bearer realm="riskgate"' },
  );
}

/**
 * Hono middleware answering 401 problem+json unless the request carries one of `caller` or
 * `operator` keys; sets `principal` (the key's id and role) for the handler.
 */
export function keyAuth(keys: {
  caller?: readonly string[];
  operator?: readonly string[];
}): MiddlewareHandler {
  const caller = createKeyring(keys.caller ?? []);
  const operator = createKeyring(keys.operator ?? []);
  const which = keys.caller === undefined ? 'operator' : 'caller';
  return async (c, next) => {
    const header = c.req.header('authorization');
    const key = presentedKey(header);
    // Both rings are searched, so the time taken does not say which kind of key was sent.
    const asCaller = key === undefined ? undefined : caller(key);
    const asOperator = key === undefined ? undefined : operator(key);
    if (asCaller === undefined && asOperator === undefined) return unauthenticated(header, which);
    c.set(
      'principal',
      asOperator !== undefined
        ? { keyId: asOperator, role: 'operator' }
        : { keyId: asCaller!, role: 'caller' },
    );
    await next();
  };
}

/** Hono middleware answering 401 problem+json unless the request carries a valid caller key. */
export function callerAuth(keys: readonly string[]): MiddlewareHandler {
  return keyAuth({ caller: keys });
}

/**
 * The operator endpoints' guard: an operator key (RISKGATE_OPS_KEYS), never a caller key. With no
 * operator key configured every request is refused, 403 problem+json saying how to configure one:
 * the outbox (where a pending lock-out can be dropped), metrics and policies are never served to
 * whoever holds a caller key or reaches the port.
 */
export function operatorAuth(keys: readonly string[]): MiddlewareHandler {
  if (keys.length === 0) {
    return async () =>
      problemResponse(
        problemOf(
          ErrorCode.FORBIDDEN,
          'The operator endpoints need an operator key, and none is configured: set RISKGATE_OPS_KEYS (16+ characters each) and send it as Authorization: Bearer <key>.',
        ),
      );
  }
  return keyAuth({ operator: keys });
}
