import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { problemOf, problemResponse } from './problem-details.ts';

/**
 * Caller authentication: `Authorization: Bearer <key>` against the configured keys.
 *
 * Keys are compared as SHA-256 digests with `timingSafeEqual`, which makes every comparison the
 * same length whatever the presented key, and every configured key is compared (no early exit), so
 * the time taken says nothing about how much of a key matched or which key it was.
 */
export function createKeyVerifier(keys: readonly string[]): (presented: string) => boolean {
  const digests = keys.map((k) => createHash('sha256').update(k, 'utf8').digest());
  return (presented) => {
    const digest = createHash('sha256').update(presented, 'utf8').digest();
    let match = false;
    for (const d of digests) match = timingSafeEqual(d, digest) || match;
    return match;
  };
}

const BEARER = /^Bearer[ ]+(\S+)\s*$/i;

/** The key of an `Authorization: Bearer <key>` header; undefined when absent or malformed. */
export function presentedKey(header: string | undefined): string | undefined {
  return header ? BEARER.exec(header)?.[1] : undefined;
}

/** Hono middleware answering 401 problem+json unless the request carries a valid caller key. */
export function callerAuth(keys: readonly string[]): MiddlewareHandler {
  const verify = createKeyVerifier(keys);
  return async (c, next) => {
    const header = c.req.header('authorization');
    const key = presentedKey(header);
    if (key === undefined || !verify(key)) {
      return problemResponse(
        problemOf(
          ErrorCode.UNAUTHENTICATED,
          header ? 'The caller key is not valid.' : 'Send Authorization: Bearer <key>.',
        ),
        { 'www-authenticate': 'Bearer realm="riskgate"' },
      );
    }
    await next();
  };
}
