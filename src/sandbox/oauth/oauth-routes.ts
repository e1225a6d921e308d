import { timingSafeEqual } from 'node:crypto';
import { Hono } from 'hono';
import { audienceScope } from '../../auth/token-manager.ts';
import type { SandboxCredentials } from '../sandbox-config.ts';
import { oauthErrorResponse } from '../vendor-api-errors.ts';
import type { AccessTokens } from './access-tokens.ts';
import { type OAuthClient, oauthClientsOf } from './oauth-clients.ts';

export interface OAuthRoutesDeps {
  credentials: SandboxCredentials;
  tokens: AccessTokens;
  issuer: () => string;
  /** Called once per successful token response (stats). */
  onTokenIssued?: () => void;
}

type OAuthErrorCode = 'invalid_request' | 'invalid_client' | 'unsupported_grant_type' | 'invalid_scope';

const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

/**
 * The OAuth 2.0 token endpoint (docs/vendor-api.md#oauth-token): client credentials with
 * `client_secret_basic`, form body, RFC 6749 §5.2 errors. Checks run in RFC order: client authentication
 * (401), then the request (400 invalid_request, unsupported_grant_type, invalid_scope).
 */
export function createOAuthRoutes(deps: OAuthRoutesDeps): Hono {
  const app = new Hono();
  const clients = oauthClientsOf(deps.credentials);

  const oauthError = (status: 400 | 401, error: OAuthErrorCode, description: string) =>
    oauthErrorResponse(status, error, description);

  app.post('/oauth/v2/token', async (c) => {
    const client = authenticateClient(clients, c.req.header('authorization'));
    if (!client)
      return oauthError(401, 'invalid_client', 'client authentication failed (HTTP Basic required)');

    const contentType = c.req.header('content-type') ?? '';
    if (mediaType(contentType) !== 'application/x-www-form-urlencoded') {
      return oauthError(400, 'invalid_request', 'Content-Type must be application/x-www-form-urlencoded');
    }
    const form = new URLSearchParams(await c.req.text());
    for (const name of new Set(form.keys())) {
      if (form.getAll(name).length > 1)
        return oauthError(400, 'invalid_request', `${name} given more than once`);
    }
    const grantType = form.get('grant_type');
    if (!grantType) return oauthError(400, 'invalid_request', 'grant_type is required');
    if (grantType !== 'client_credentials') {
      return oauthError(400, 'unsupported_grant_type', 'only client_credentials is supported');
    }
    const requiredUrn = audienceScope(deps.credentials.idp, client.audience);
    const requested = (form.get('scope') ?? '').split(' ').filter(Boolean);
    if (!requested.includes(requiredUrn)) {
      return oauthError(400, 'invalid_scope', `scope must contain ${requiredUrn}`);
    }
    const allowed = new Set([requiredUrn, 'openid', client.permission]);
    const unknown = requested.find((s) => !allowed.has(s));
    if (unknown !== undefined)
      return oauthError(400, 'invalid_scope', `scope ${unknown} is not granted to this client`);

    const extra = requested.includes('openid') ? ['openid'] : [];
    const { accessToken, expiresIn } = await deps.tokens.issue(client, extra);
    deps.onTokenIssued?.();
    return c.json({ access_token: accessToken, token_type: 'Bearer', expires_in: expiresIn }, 200, NO_STORE);
  });

  app.get('/oauth/v2/keys', (c) => c.json(deps.tokens.jwks()));

  app.get('/oauth/v2/.well-known/openid-configuration', (c) => {
    const issuer = deps.issuer();
    return c.json({
      issuer,
      token_endpoint: `${issuer}/token`,
      jwks_uri: `${issuer}/keys`,
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['client_secret_basic'],
      id_token_signing_alg_values_supported: ['RS256'],
    });
  });

  return app;
}

/** The media type of a Content-Type value, lower case, without parameters. */
export function mediaType(contentType: string): string {
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}

function authenticateClient(clients: OAuthClient[], header: string | undefined): OAuthClient | undefined {
  const m = header === undefined ? null : /^Basic +([A-Za-z0-9+/]+=*) *$/i.exec(header);
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) return undefined;
  // RFC 6749 §2.3.1: both parts are form-urlencoded before Base64.
  const id = formDecode(decoded.slice(0, colon));
  const secret = formDecode(decoded.slice(colon + 1));
  const client = clients.find((c) => c.clientId === id);
  if (!client) return undefined;
  return safeEqual(secret, client.clientSecret) ? client : undefined;
}

function formDecode(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return value;
  }
}

function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  if (ab.length !== bb.length) {
    timingSafeEqual(bb, bb);
    return false;
  }
  return timingSafeEqual(ab, bb);
}
