import { randomUUID } from 'node:crypto';
import { type JWK, jwtVerify, SignJWT } from 'jose';
import { LRUCache } from 'lru-cache';
import type { SandboxClock } from '../sandbox-config.ts';
import type { OAuthClient } from './oauth-clients.ts';
import type { SigningKey } from './signing-key.ts';

/** The claims of a sandbox access token (docs/vendor-api.md#oauth-token). */
export interface AccessTokenClaims {
  iss: string;
  sub: string;
  aud: string | string[];
  exp: number;
  iat: number;
  nbf: number;
  jti: string;
  client_id: string;
  service_id: string;
  /** Space-separated. */
  scope: string;
}

/** A token that verified: its claims, with `scope` and `aud` pre-split for per-request checks. */
export interface VerifiedToken {
  claims: AccessTokenClaims;
  scopes: ReadonlySet<string>;
  audiences: readonly string[];
}

/** The outcome of checking an `Authorization` header; `message` is safe to send (no token echo). */
export type TokenVerdict = { ok: true; token: VerifiedToken } | { ok: false; message: string };

export interface AccessTokenOptions {
  key: SigningKey;
  clock: SandboxClock;
  /** The `iss` claim, e.g. `http://127.0.0.1:4010/oauth/v2`; a function because the port is known late. */
  issuer: () => string;
  serviceId: string;
  /** Token lifetime, seconds. */
  lifetimeSeconds: number;
  /** Verified tokens kept, by raw token string. Default 10,000. */
  cacheSize?: number;
}

/** Issues and verifies the sandbox's RS256 access tokens. */
export interface AccessTokens {
  issue(
    client: OAuthClient,
    extraScopes: readonly string[],
  ): Promise<{ accessToken: string; expiresIn: number }>;
  /** Checks an `Authorization: Bearer ...` header value: presence, scheme, signature, iss, exp, nbf. */
  verifyAuthorization(header: string | undefined): Promise<TokenVerdict>;
  /** The JWKS document. */
  jwks(): { keys: JWK[] };
}

const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/**
 * Creates the token service. RS256 verification costs tens of microseconds, so verified tokens are
 * cached by their raw string and only `exp`/`nbf` are re-checked against the (movable) clock on each
 * use; that keeps a signal request well inside the sandbox's 5,000 req/s budget.
 */
export function createAccessTokens(options: AccessTokenOptions): AccessTokens {
  const { key, clock } = options;
  const cache = new LRUCache<string, VerifiedToken>({ max: options.cacheSize ?? 10_000 });

  function checkTimes(claims: AccessTokenClaims): string | undefined {
    const nowS = clock.now() / 1000;
    if (claims.exp <= nowS) return 'token expired';
    if (claims.nbf > nowS) return 'token not yet valid';
    return undefined;
  }

  return {
    async issue(client, extraScopes) {
      const nowS = Math.floor(clock.now() / 1000);
      const lifetime = options.lifetimeSeconds;
      const scope = [...new Set([...extraScopes, client.permission])].join(' ');
      const accessToken = await new SignJWT({
        client_id: client.clientId,
        service_id: options.serviceId,
        scope,
      })
        .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'JWT' })
        .setIssuer(options.issuer())
        .setSubject(client.clientId)
        .setAudience(client.audience)
        .setIssuedAt(nowS)
        .setNotBefore(nowS)
        .setExpirationTime(nowS + lifetime)
        .setJti(randomUUID())
        .sign(key.privateKey);
      return { accessToken, expiresIn: Math.max(0, lifetime - 1) };
    },

    async verifyAuthorization(header) {
      if (header === undefined || header.trim() === '') {
        return { ok: false, message: 'missing Authorization header with a Bearer token' };
      }
      const m = BEARER.exec(header);
      if (!m) {
        return /^Bearer\b/i.test(header)
          ? { ok: false, message: 'malformed Bearer token' }
          : { ok: false, message: 'authorization scheme must be Bearer' };
      }
      const raw = m[1]!;
      const cached = cache.get(raw);
      if (cached) {
        const timeProblem = checkTimes(cached.claims);
        return timeProblem ? { ok: false, message: timeProblem } : { ok: true, token: cached };
      }
      try {
        const { payload } = await jwtVerify(
          raw,
          (header) => {
            if (header.kid !== key.kid) throw new Error('unknown kid');
            return key.publicKey;
          },
          {
            algorithms: ['RS256'],
            issuer: options.issuer(),
            currentDate: new Date(clock.now()),
            requiredClaims: ['exp', 'nbf', 'iat', 'sub', 'aud', 'jti'],
          },
        );
        const claims = payload as unknown as AccessTokenClaims;
        if (typeof claims.service_id !== 'string' || typeof claims.scope !== 'string') {
          return { ok: false, message: 'token lacks service_id or scope' };
        }
        const token: VerifiedToken = {
          claims,
          scopes: new Set(claims.scope.split(' ').filter(Boolean)),
          audiences: typeof claims.aud === 'string' ? [claims.aud] : claims.aud,
        };
        cache.set(raw, token);
        const timeProblem = checkTimes(claims);
        return timeProblem ? { ok: false, message: timeProblem } : { ok: true, token };
      } catch (err) {
        return { ok: false, message: describeJoseFailure(err) };
      }
    },

    jwks() {
      return { keys: [key.publicJwk] };
    },
  };
}

function describeJoseFailure(err: unknown): string {
  const code = (err as { code?: string }).code;
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return 'token expired';
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return 'token signature does not verify';
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return 'token algorithm not allowed (RS256 only)';
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      return `token claim check failed: ${(err as Error).message}`;
    case 'ERR_JWS_INVALID':
    case 'ERR_JWT_INVALID':
      return 'malformed token';
    default:
      return (err as Error)?.message === 'unknown kid' ? 'token signed by an unknown key' : 'invalid token';
  }
}
