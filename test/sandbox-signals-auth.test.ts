import { generateKeyPair, SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { getSignal, getToken } from './sandbox-helpers.ts';
import { sandboxForFile, withSandbox } from './support/test-sandbox.ts';

const sb = sandboxForFile({ scenario: 'empty' });
let retrieval: string;
let collection: string;
beforeAll(async () => {
  retrieval = await getToken(sb, 'retrieval');
  collection = await getToken(sb, 'collection');
});

/** Minimal valid parameters of each GET signal. */
const SIGNALS: Record<string, Record<string, string>> = {
  geolocation: { accountId: 'acct-1' },
  geovelocity: { accountId: 'acct-1' },
  'active-call': { accountId: 'acct-1' },
  'latest-proximity': { subjectAccountId: 'acct-1' },
  'historical-proximity': { subjectAccountId: 'acct-1' },
  'new-browser': { subjectAccountId: 'acct-1' },
  'remote-access-tool': {
    accountId: 'acct-1',
    unitId: 'u1',
    verificationStatus: 'unverified',
    interactionId: 'i1',
  },
};
const NAMES = Object.keys(SIGNALS);

function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
}

async function expect401(res: Response, message: RegExp) {
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
  const body = (await res.json()) as { error: string; message: string };
  expect(body.error).toBe('invalid_token');
  expect(body.message).toMatch(message);
}

describe('Trust Signals authentication (401)', () => {
  it.each(NAMES)('%s: 401 without an Authorization header', async (name) => {
    await expect401(await getSignal(sb, name, SIGNALS[name]!, undefined), /missing/);
  });

  it.each(NAMES)('%s: 401 for another scheme', async (name) => {
    await expect401(await getSignal(sb, name, SIGNALS[name]!, undefined, 'Basic dXNlcjpwYXNz'), /scheme/);
  });

  it.each(NAMES)('%s: 401 for a malformed token', async (name) => {
    await expect401(await getSignal(sb, name, SIGNALS[name]!, 'not-a-jwt'), /malformed/);
  });

  it('401 for a token with a bad signature (same claims and kid, another key)', async () => {
    const claims = claimsOf(retrieval);
    const header = JSON.parse(Buffer.from(retrieval.split('.')[0]!, 'base64url').toString());
    const { privateKey } = await generateKeyPair('RS256');
    const forged = await new SignJWT(claims).setProtectedHeader(header).sign(privateKey);
    await expect401(await getSignal(sb, 'geolocation', SIGNALS.geolocation!, forged), /signature/);
  });

  it('401 for a token with a tampered payload', async () => {
    const [h, , s] = retrieval.split('.');
    const payload = Buffer.from(JSON.stringify({ ...claimsOf(retrieval), service_id: 'x' })).toString(
      'base64url',
    );
    await expect401(
      await getSignal(sb, 'geolocation', SIGNALS.geolocation!, `${h}.${payload}.${s}`),
      /signature/,
    );
  });

  it('401 for alg none', async () => {
    const header = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
    const payload = Buffer.from(JSON.stringify(claimsOf(retrieval))).toString('base64url');
    await expect401(await getSignal(sb, 'geolocation', SIGNALS.geolocation!, `${header}.${payload}.`), /./);
  });

  it('401 for an expired token, and 200 again for a fresh one', async () => {
    await withSandbox({ scenario: 'empty', tokenLifetimeSeconds: 60 }, async (own) => {
      const token = await getToken(own);
      await fetch(`${own.url}/sandbox/clock`, {
        method: 'POST',
        body: JSON.stringify({ advanceSeconds: 60 }),
      });
      await expect401(await getSignal(own, 'geovelocity', SIGNALS.geovelocity!, token), /expired/);
      expect((await getSignal(own, 'geovelocity', SIGNALS.geovelocity!, await getToken(own))).status).toBe(
        200,
      );
    });
  });

  it('401 for a token of another sandbox (another issuer key)', async () => {
    await withSandbox({ scenario: 'empty' }, async (other) => {
      const foreign = await getToken(other);
      await expect401(await getSignal(sb, 'geolocation', SIGNALS.geolocation!, foreign), /./);
    });
  });
});

describe('Trust Signals authorization (403)', () => {
  it.each(NAMES)('%s: 403 insufficient_scope for a Collection token', async (name) => {
    const res = await getSignal(sb, name, SIGNALS[name]!, collection);
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: string }).error).toBe('insufficient_scope');
  });

  it.each(NAMES)('%s: 403 forbidden when serviceId differs from the token’s service_id', async (name) => {
    const res = await getSignal(
      sb,
      name,
      { ...SIGNALS[name]!, serviceId: '00000000-0000-4000-8000-000000000000' },
      retrieval,
    );
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({
      error: 'forbidden',
      message: "serviceId does not match the token's service_id",
    });
  });

  it('checks in the order 401, scope 403, 400, tenant 403', async () => {
    const bad = { accountId: 'bad id!', serviceId: '00000000-0000-4000-8000-000000000000' };
    expect((await getSignal(sb, 'geolocation', bad, undefined)).status).toBe(401);
    expect((await getSignal(sb, 'geolocation', bad, collection)).status).toBe(403);
    expect((await getSignal(sb, 'geolocation', bad, retrieval)).status).toBe(400);
    expect(
      (await getSignal(sb, 'geolocation', { accountId: 'ok', serviceId: bad.serviceId }, retrieval)).status,
    ).toBe(403);
  });
});

describe('batch remote access tool authorization', () => {
  const item = (serviceId: string) => ({
    serviceId,
    accountId: 'acct-1',
    unitId: 'u1',
    verificationStatus: 'unverified',
    interactionId: 'i1',
  });
  const post = (token: string | undefined, body: unknown) =>
    fetch(`${sb.url}/api/v1/signals/remote-access-tool`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token && { authorization: `Bearer ${token}` }) },
      body: JSON.stringify(body),
    });

  it('reports a foreign serviceId as a forbidden item, not a 403', async () => {
    const res = await post(retrieval, [
      item(sb.config.credentials.serviceId),
      item('00000000-0000-4000-8000-000000000000'),
    ]);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { results: { success: boolean; reason: string; accountId: string }[] };
    expect(body.results.map((r) => r.reason)).toEqual(['insufficient_observations', 'forbidden']);
    expect(body.results[1]).toEqual({
      accountId: 'acct-1',
      unitId: 'u1',
      verificationStatus: 'unverified',
      interactionId: 'i1',
      success: false,
      reason: 'forbidden',
    });
  });

  it('gives every item forbidden for a Collection token', async () => {
    const res = await post(collection, [
      item(sb.config.credentials.serviceId),
      item(sb.config.credentials.serviceId),
    ]);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { results: { reason: string }[] };
    expect(body.results.map((r) => r.reason)).toEqual(['forbidden', 'forbidden']);
  });

  it('keeps 401 top level for a missing or expired token', async () => {
    const res = await post(undefined, [item(sb.config.credentials.serviceId)]);
    await expect401(res, /missing/);
  });
});
