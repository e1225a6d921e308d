import { hash, timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { Cidr } from '../net/ip-cidr.ts';
import { type Operator, type OperatorRole, roleAllows } from '../operators/operator.ts';
import { parseOperatorKeyEntries } from '../operators/operator-keys.ts';
import { problemOf, problemResponse } from '../problem/problem-details.ts';
import { fromTrustedProxy } from './client-address.ts';
import { withDirectGuard } from './direct-form.ts';

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
  /** An operator's request: who (name, role). Absent for a caller. */
  operator?: Operator;
}

declare module 'hono' {
  interface ContextVariableMap {
    /** Set by the key middlewares once a request is authenticated. */
    principal: Principal;
  }
}

/**
 * Who the request of `c` acts as, in the records its changes leave (a case's assignee, a version's
 * author, a list entry's or a snooze's): the operator's name, or the key's id of a caller.
 */
export function operatorNameOf(c: Context): string {
  const principal = c.get('principal');
  return principal.operator?.name ?? principal.keyId;
}

/**
 * A key's id: `key-` and the first 12 hex digits of its SHA-256. The same on every replica and
 * across restarts (an operator computes it with `printf %s "$KEY" | sha256sum | cut -c1-12`); 48
 * bits of a hash of a 16+ character key say nothing usable about the key.
 */
export function keyIdOf(key: string): string {
  return `key-${hash('sha256', key, 'hex').slice(0, 12)}`;
}

/**
 * The SHA-256 of a presented key, what the keyrings compare. Computed once per request and handed
 * to every ring (issue 32: one one-shot hash instead of a hash object per ring). Never cached: a
 * presented key is not kept anywhere, not even as a map key.
 */
export function presentedDigest(presented: string): Buffer {
  return hash('sha256', presented, 'buffer');
}

/** Identifies a presented key's digest (`presentedDigest`) among `keys` in constant time: its id, or undefined. */
function createDigestKeyring(keys: readonly string[]): (digest: Buffer) => string | undefined {
  const known = keys.map((k) => ({ digest: presentedDigest(k), id: keyIdOf(k) }));
  return (digest) => {
    let match: string | undefined;
    for (const k of known) if (timingSafeEqual(k.digest, digest)) match = k.id;
    return match;
  };
}

/** Identifies a presented key among `keys` in constant time: its id, or undefined. */
export function createKeyring(keys: readonly string[]): (presented: string) => string | undefined {
  const identify = createDigestKeyring(keys);
  return (presented) => identify(presentedDigest(presented));
}

/**
 * Identifies a presented operator key among RISKGATE_OPS_KEYS entries (`name:role:key` or a plain
 * key: an `admin` named by its key id, src/operators/operator-keys.ts) in constant time, as
 * `createKeyring`: the operator, or undefined. Throws RG_ERR_INVALID_CONFIG on a malformed entry
 * (loadConfig refuses them first; the message never holds a key).
 */
export function createOperatorKeyring(
  entries: readonly string[],
): (presented: string) => Operator | undefined {
  const ofDigest = createOperatorDigestKeyring(entries);
  return (presented) => ofDigest(presentedDigest(presented));
}

/** `createOperatorKeyring` over a presented key's digest (`presentedDigest`). */
function createOperatorDigestKeyring(entries: readonly string[]): (digest: Buffer) => Operator | undefined {
  const { identify, byId } = operatorKeys(entries);
  return (digest) => {
    const keyId = identify(digest);
    return keyId === undefined ? undefined : byId.get(keyId);
  };
}

/** The keyring of RISKGATE_OPS_KEYS entries and each key's operator by key id. */
function operatorKeys(entries: readonly string[]) {
  const parsed = parseOperatorKeyEntries(entries);
  if (typeof parsed === 'string')
    throw new RiskgateError(ErrorCode.INVALID_CONFIG, `RISKGATE_OPS_KEYS ${parsed}`);
  const identify = createDigestKeyring(parsed.map((k) => k.key));
  const byId = new Map<string, Operator>();
  for (const k of parsed) {
    const keyId = keyIdOf(k.key);
    byId.set(keyId, { name: k.name ?? keyId, role: k.role, keyId });
  }
  return { identify, byId };
}

/**
 * An authenticating proxy in front of the operator surface (oauth2-proxy and the like): requests
 * whose socket is one of `proxies` may name their operator in `header` (RISKGATE_TRUSTED_PROXIES,
 * RISKGATE_TRUSTED_IDENTITY_HEADER, RISKGATE_SSO_OPERATORS). Anyone else's header is ignored: a
 * client reaching the port directly could write any identity into it.
 */
export interface TrustedProxy {
  proxies: readonly Cidr[];
  /** The identity header (lower case); none: the proxies only vouch for X-Forwarded-For. */
  identityHeader?: string | undefined;
  /** Identity (lower case) to role. */
  operators?: ReadonlyMap<string, OperatorRole> | undefined;
}

/**
 * The identity a trusted proxy vouches for: the operator (key id `sso`), `{ unknown }` for an
 * identity with no role, undefined when there is none (no header, or not from a trusted proxy).
 */
export function trustedIdentityOf(
  c: Context,
  trusted: TrustedProxy | undefined,
): { operator: Operator } | { unknown: string } | undefined {
  if (trusted?.identityHeader === undefined || !fromTrustedProxy(c, trusted.proxies)) return undefined;
  const claimed = c.req.header(trusted.identityHeader)?.trim();
  if (claimed === undefined || claimed === '') return undefined;
  const name = claimed.toLowerCase();
  const role = trusted.operators?.get(name);
  return role === undefined ? { unknown: claimed.slice(0, 64) } : { operator: { name, role, keyId: 'sso' } };
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

/** 403: a trusted proxy vouched for someone RISKGATE_SSO_OPERATORS does not list. */
function unknownIdentity(identity: string): Response {
  return problemResponse(
    problemOf(
      ErrorCode.FORBIDDEN,
      `The identity ${JSON.stringify(identity)} from the trusted proxy has no operator role: RISKGATE_SSO_OPERATORS lists who may operate.`,
    ),
  );
}

/**
 * Hono middleware answering 401 problem+json unless the request carries one of `caller` or
 * `operator` keys (operator entries as RISKGATE_OPS_KEYS has them); sets `principal` (the key's id
 * and role, and the operator) for the handler. With `trusted`, a request without a key from a
 * trusted proxy is the operator its identity header names (403 for an identity with no role).
 */
export function keyAuth(
  keys: { caller?: readonly string[]; operator?: readonly string[] },
  trusted?: TrustedProxy,
): MiddlewareHandler {
  const caller = createDigestKeyring(keys.caller ?? []);
  const operator = createOperatorDigestKeyring(keys.operator ?? []);
  const which = keys.caller === undefined ? 'operator' : 'caller';
  // The principal of a key, either ring's; undefined for none or another key. Both rings are
  // searched, so the time taken does not say which kind of key was sent.
  const principalOf = (key: string | undefined): Principal | undefined => {
    if (key === undefined) return undefined;
    const digest = presentedDigest(key);
    const asCaller = caller(digest);
    const asOperator = operator(digest);
    if (asOperator !== undefined) return { keyId: asOperator.keyId, role: 'operator', operator: asOperator };
    return asCaller === undefined ? undefined : { keyId: asCaller, role: 'caller' };
  };
  // Not async: hono awaits what a middleware returns, so `next()`'s own promise is enough (an
  // async layer is a promise, an await and a resume more on every request; issue 32).
  const middleware: MiddlewareHandler = (c, next) => {
    const header = c.req.header('authorization');
    const key = presentedKey(header);
    const principal = principalOf(key);
    if (principal !== undefined) {
      c.set('principal', principal);
    } else {
      // A key that does not match is refused even from the proxy: never a fallback to the header.
      const vouched = key === undefined ? trustedIdentityOf(c, trusted) : undefined;
      if (vouched === undefined) return Promise.resolve(unauthenticated(header, which));
      if ('unknown' in vouched) return Promise.resolve(unknownIdentity(vouched.unknown));
      c.set('principal', { keyId: vouched.operator.keyId, role: 'operator', operator: vouched.operator });
    }
    return next();
  };
  // Directly: a known key only (a refusal, or a proxy's identity, is hono's).
  return withDirectGuard(middleware, {
    check: (req, vars) => {
      const header = req.headers.authorization;
      vars.principal = principalOf(presentedKey(header));
      return vars.principal !== undefined;
    },
  });
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
export function operatorAuth(keys: readonly string[], trusted?: TrustedProxy): MiddlewareHandler {
  if (keys.length === 0 && trusted?.identityHeader === undefined) {
    return async () =>
      problemResponse(
        problemOf(
          ErrorCode.FORBIDDEN,
          'The operator endpoints need an operator key, and none is configured: set RISKGATE_OPS_KEYS (16+ characters each) and send it as Authorization: Bearer <key>.',
        ),
      );
  }
  return keyAuth({ operator: keys }, trusted);
}

/**
 * Hono middleware, after the key middleware: 403 problem+json unless the operator's role allows
 * `role` (src/operators/operator.ts), naming both roles (never a key). `orCaller`: a caller key
 * passes (an endpoint callers use too, where the role binds operators only). Default false.
 */
export function requireRole(role: OperatorRole, options: { orCaller?: boolean } = {}): MiddlewareHandler {
  return async (c, next) => {
    const principal = c.get('principal') as Principal | undefined;
    const operator = principal?.operator;
    if (principal?.role === 'caller' && options.orCaller === true) return next();
    if (operator === undefined || !roleAllows(operator.role, role)) {
      return problemResponse(
        problemOf(
          ErrorCode.FORBIDDEN,
          operator === undefined
            ? `This needs an operator with the ${role} role.`
            : `This needs the ${role} role; operator ${operator.name} has the ${operator.role} role.`,
        ),
      );
    }
    await next();
  };
}

/** Who an operator request is from, outside the middlewares (the console's sign-in and pages). */
export interface OperatorResolver {
  /** The operator a presented key belongs to (constant time), or undefined. */
  ofKey(key: string): Operator | undefined;
  /**
   * The operator of a request: its `Authorization: Bearer` operator key, else the identity a
   * trusted proxy vouches for (undefined also for an identity with no role).
   */
  resolve(c: Context): Operator | undefined;
  /**
   * Whether `operator` (from a session signed earlier) is still configured as it was: its key (by
   * id) or its single-sign-on identity still there, with the same name and role. A key removed or
   * a role changed ends the sessions made with them.
   */
  stillOperates(operator: Operator): boolean;
  /** What a trusted proxy vouches for on this request (`trustedIdentityOf`). */
  vouched(c: Context): ReturnType<typeof trustedIdentityOf>;
}

/** An `OperatorResolver` over RISKGATE_OPS_KEYS entries and the trusted proxy, if any. */
export function createOperatorResolver(entries: readonly string[], trusted?: TrustedProxy): OperatorResolver {
  const { identify, byId } = operatorKeys(entries);
  const ofKey = (presented: string) => {
    const keyId = identify(presentedDigest(presented));
    return keyId === undefined ? undefined : byId.get(keyId);
  };
  return {
    ofKey,
    stillOperates(operator) {
      const now =
        operator.keyId === 'sso'
          ? trusted?.operators?.get(operator.name)
          : byId.get(operator.keyId)?.name === operator.name
            ? byId.get(operator.keyId)?.role
            : undefined;
      return now === operator.role;
    },
    vouched: (c) => trustedIdentityOf(c, trusted),
    resolve(c) {
      const key = presentedKey(c.req.header('authorization'));
      if (key !== undefined) return ofKey(key);
      const vouched = trustedIdentityOf(c, trusted);
      return vouched !== undefined && 'operator' in vouched ? vouched.operator : undefined;
    },
  };
}
