import { createLocalJWKSet, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { basicAuth, getSignal, getToken, requestToken, scopeFor } from './sandbox-helpers.ts';
import { sandboxForFile, withSandbox } from './support/test-sandbox.ts';

const sb = sandboxForFile({ scenario: 'empty', tokenLifetimeSeconds: 120 });

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

describe('OAuth token endpoint', () => {
  it('issues an RS256 JWT with the contract claims that verifies against the published JWKS', async () => {
    // The claims: docs/vendor-api.md#oauth-token.
    const res = await requestToken(sb, 'retrieval');
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = (await res.json()) as { access_token: string; token_type: string; expires_in: number };
    expect(body.token_type).toBe('Bearer');
    expect(body.expires_in).toBe(119);

    const jwks = (await (await fetch(`${sb.url}/oauth/v2/keys`)).json()) as { keys: { kid: string }[] };
    expect(jwks.keys).toHaveLength(1);
    const { payload, protectedHeader } = await jwtVerify(
      body.access_token,
      createLocalJWKSet(jwks as never),
      {
        issuer: `${sb.url}/oauth/v2`,
        audience: 'riskgate-signals',
      },
    );
    expect(protectedHeader.alg).toBe('RS256');
    expect(protectedHeader.kid).toBe(jwks.keys[0]!.kid);
    const c = sb.config.credentials;
    expect(payload.sub).toBe(c.retrievalClientId);
    expect(payload.client_id).toBe(c.retrievalClientId);
    expect(payload.service_id).toBe(c.serviceId);
    expect(String(payload.scope).split(' ')).toContain('signals:read');
    expect(payload.exp! - payload.iat!).toBe(120);
    expect(payload.nbf).toBe(payload.iat);
    expect(typeof payload.jti).toBe('string');
  });

  it('passes openid through and gives the Collection client observations:write for its own audience', async () => {
    const res = await requestToken(
      sb,
      'collection',
      form({ grant_type: 'client_credentials', scope: `openid ${scopeFor(sb, 'collection')}` }),
    );
    expect(res.status).toBe(200);
    const token = ((await res.json()) as { access_token: string }).access_token;
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
    expect(claims.aud).toBe('riskgate-collection');
    expect(claims.scope.split(' ').sort()).toEqual(['observations:write', 'openid']);
  });

  it('answers 401 invalid_client with WWW-Authenticate: Basic for a wrong secret or no credentials', async () => {
    const c = sb.config.credentials;
    const wrong = await requestToken(sb, 'retrieval', undefined, basicAuth(c.retrievalClientId, 'nope'));
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toMatch(/^Basic /);
    expect(await wrong.json()).toMatchObject({ error: 'invalid_client' });
    const none = await fetch(`${sb.url}/oauth/v2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form({ grant_type: 'client_credentials', scope: scopeFor(sb, 'retrieval') }),
    });
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ error: 'invalid_client' });
  });

  it.each([
    [
      'a JSON body',
      'application/json',
      JSON.stringify({ grant_type: 'client_credentials' }),
      'invalid_request',
    ],
    ['no grant_type', 'application/x-www-form-urlencoded', 'scope=x', 'invalid_request'],
    [
      'a password grant',
      'application/x-www-form-urlencoded',
      'grant_type=password',
      'unsupported_grant_type',
    ],
    ['no scope', 'application/x-www-form-urlencoded', 'grant_type=client_credentials', 'invalid_scope'],
    [
      'the other client’s audience',
      'application/x-www-form-urlencoded',
      'grant_type=client_credentials&scope=urn:sandbox:iam:org:project:id:riskgate-collection:aud',
      'invalid_scope',
    ],
    [
      'a duplicated parameter',
      'application/x-www-form-urlencoded',
      'grant_type=client_credentials&grant_type=client_credentials',
      'invalid_request',
    ],
  ])('answers 400 for %s', async (_name, contentType, body, error) => {
    const c = sb.config.credentials;
    const res = await fetch(`${sb.url}/oauth/v2/token`, {
      method: 'POST',
      headers: {
        authorization: basicAuth(c.retrievalClientId, c.retrievalClientSecret),
        'content-type': contentType,
      },
      body,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error });
  });

  it('counts successful token responses only in tokensIssued', async () => {
    await fetch(`${sb.url}/sandbox/stats/reset`, { method: 'POST' });
    await getToken(sb);
    await requestToken(sb, 'retrieval', 'grant_type=password');
    const stats = (await (await fetch(`${sb.url}/sandbox/stats`)).json()) as {
      tokensIssued: number;
      routes: Record<string, Record<string, number>>;
    };
    expect(stats.tokensIssued).toBe(1);
    expect(stats.routes['POST /oauth/v2/token']).toEqual({ '200': 1, '400': 1 });
  });

  it('stops accepting a token once the sandbox clock passes its exp', async () => {
    const token = await getToken(sb);
    const params = { accountId: 'nobody' };
    expect((await getSignal(sb, 'geolocation', params, token)).status).toBe(200);
    await fetch(`${sb.url}/sandbox/clock`, { method: 'POST', body: JSON.stringify({ advanceSeconds: 121 }) });
    const res = await getSignal(sb, 'geolocation', params, token);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: 'invalid_token', message: 'token expired' });
    await fetch(`${sb.url}/sandbox/reset`, { method: 'POST' });
  });
});

describe('short-lived tokens', () => {
  it('expire within a second of issue when the lifetime is 1 s', async () => {
    await withSandbox({ scenario: 'empty', tokenLifetimeSeconds: 1 }, async (short) => {
      const res = await requestToken(short, 'retrieval');
      const body = (await res.json()) as { access_token: string; expires_in: number };
      expect(body.expires_in).toBe(0);
      // exp is whole seconds: the token dies within 1 s of issue (on the sandbox's clock).
      await fetch(`${short.url}/sandbox/clock`, {
        method: 'POST',
        body: JSON.stringify({ advanceSeconds: 1 }),
      });
      const after = await getSignal(short, 'geolocation', { accountId: 'a' }, body.access_token);
      expect(after.status).toBe(401);
    });
  });
});
