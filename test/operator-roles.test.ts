import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyIdOf } from '../src/edge/caller-auth.ts';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';

/**
 * Operators with names and roles (issue 25): each RISKGATE_OPS_KEYS entry `name:role:key` is a
 * person with a role (viewer < analyst < admin); a plain key keeps the admin rights it had; an
 * authenticating proxy may name the operator in a header, believed only from its addresses.
 */

const VIEWER_KEY = 'viewer-key-0123456789abcdef';
const ANALYST_KEY = 'analyst-key-0123456789abcdef';
const ADMIN_KEY = 'admin-key-0123456789abcdef';
const LEGACY_KEY = 'legacy-plain-key-0123456789';
const ALL_KEYS = [VIEWER_KEY, ANALYST_KEY, ADMIN_KEY, LEGACY_KEY, CALLER_KEY];
const OPS_KEYS = `vera:viewer:${VIEWER_KEY},ana:analyst:${ANALYST_KEY},adam:admin:${ADMIN_KEY},${LEGACY_KEY}`;
const SSO_HEADER = 'X-Forwarded-Email';

interface Answer {
  status: number;
  text: string;
  json: () => Record<string, unknown>;
}

async function send(
  url: string,
  method: string,
  path: string,
  o: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      ...(o.key !== undefined && { authorization: `Bearer ${o.key}` }),
      ...(o.body !== undefined && { 'content-type': 'application/json' }),
      ...o.headers,
    },
    ...(o.body !== undefined && { body: JSON.stringify(o.body) }),
  });
  const text = await res.text();
  // No answer ever carries a key, whatever it refuses or grants.
  for (const key of ALL_KEYS) expect(text, `${method} ${path}`).not.toContain(key);
  return { status: res.status, text, json: () => JSON.parse(text) };
}

const label = (key: string | undefined, headers?: Record<string, string>) => (url: string) =>
  send(url, 'POST', '/feedback', {
    ...(key !== undefined && { key }),
    ...(headers !== undefined && { headers }),
    body: { decisionId: randomUUID(), label: 'fraud', note: 'seen in the SOC' },
  });
const retry = (key: string | undefined, headers?: Record<string, string>) => (url: string) =>
  send(url, 'POST', `/actions/${encodeURIComponent('no-such-action')}/retry`, {
    ...(key !== undefined && { key }),
    ...(headers !== undefined && { headers }),
  });

describe('operators with names and roles', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      env: {
        RISKGATE_OPS_KEYS: OPS_KEYS,
        RISKGATE_TRUSTED_PROXIES: '127.0.0.1',
        RISKGATE_TRUSTED_IDENTITY_HEADER: SSO_HEADER,
        RISKGATE_SSO_OPERATORS: 'sam@example.com:admin,val@example.com:viewer',
      },
    });
  });
  afterAll(() => h?.stop());

  it('lets every role read the operator endpoints', async () => {
    for (const key of [VIEWER_KEY, ANALYST_KEY, ADMIN_KEY, LEGACY_KEY]) {
      expect((await send(h.url, 'GET', '/actions', { key })).status).toBe(200);
      expect((await send(h.url, 'GET', '/policies', { key })).status).toBe(200);
    }
  });

  it('refuses a viewer labels and actions: 403 naming the role needed and the operator’s', async () => {
    const labelled = await label(VIEWER_KEY)(h.url);
    expect(labelled.status).toBe(403);
    expect(labelled.json()).toMatchObject({
      code: 'RG_ERR_FORBIDDEN',
      detail: 'This needs the analyst role; operator vera has the viewer role.',
    });
    const retried = await retry(VIEWER_KEY)(h.url);
    expect(retried.status).toBe(403);
    expect(retried.json().detail).toBe('This needs the admin role; operator vera has the viewer role.');
    const dropped = await send(h.url, 'DELETE', '/actions/no-such-action', { key: VIEWER_KEY });
    expect(dropped.status).toBe(403);
  });

  it('lets an analyst label but not retry or drop', async () => {
    const labelled = await label(ANALYST_KEY)(h.url);
    expect(labelled.status).toBe(202);
    expect(labelled.json().labelledBy).toBe(keyIdOf(ANALYST_KEY));
    expect((await retry(ANALYST_KEY)(h.url)).json().detail).toBe(
      'This needs the admin role; operator ana has the analyst role.',
    );
    expect((await send(h.url, 'DELETE', '/actions/x', { key: ANALYST_KEY })).status).toBe(403);
  });

  it('lets an admin, and a plain key as before roles, label, retry and drop (404: no such action)', async () => {
    for (const key of [ADMIN_KEY, LEGACY_KEY]) {
      expect((await label(key)(h.url)).status).toBe(202);
      expect((await retry(key)(h.url)).status).toBe(404);
      expect((await send(h.url, 'DELETE', '/actions/x', { key })).status).toBe(404);
    }
  });

  it('keeps a caller key’s rights: it labels its own decisions, and never an action', async () => {
    const decision = await h.decide({ accountId: 'alice', platform: 'browser' });
    const own = await send(h.url, 'POST', '/feedback', {
      key: CALLER_KEY,
      body: { decisionId: decision.body.decisionId, label: 'legit' },
    });
    expect(own.status).toBe(202);
    expect((await retry(CALLER_KEY)(h.url)).status).toBe(401);
  });

  it('takes the operator a trusted proxy names in its header, with that operator’s role', async () => {
    const sam = { [SSO_HEADER]: 'Sam@example.com' };
    expect((await send(h.url, 'GET', '/actions', { headers: sam })).status).toBe(200);
    expect((await retry(undefined, sam)(h.url)).status).toBe(404);
    const val = { [SSO_HEADER]: 'val@example.com' };
    expect((await retry(undefined, val)(h.url)).json().detail).toBe(
      'This needs the admin role; operator val@example.com has the viewer role.',
    );
    const stranger = await send(h.url, 'GET', '/actions', { headers: { [SSO_HEADER]: 'eve@example.com' } });
    expect(stranger.status).toBe(403);
    expect(stranger.json().detail).toContain('RISKGATE_SSO_OPERATORS');
    // A wrong key is refused even from the proxy: the header is no fallback for a bad key.
    expect(
      (await send(h.url, 'GET', '/actions', { key: 'wrong-key-0123456789abc', headers: sam })).status,
    ).toBe(401);
  });
});

describe('a trusted identity header from an address that is not a trusted proxy', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      env: {
        RISKGATE_OPS_KEYS: OPS_KEYS,
        RISKGATE_TRUSTED_PROXIES: '10.9.9.9',
        RISKGATE_TRUSTED_IDENTITY_HEADER: SSO_HEADER,
        RISKGATE_SSO_OPERATORS: 'sam@example.com:admin',
      },
    });
  });
  afterAll(() => h?.stop());

  it('is ignored: the request is unauthenticated (anyone reaching the port could forge it)', async () => {
    const forged = await send(h.url, 'GET', '/actions', { headers: { [SSO_HEADER]: 'sam@example.com' } });
    expect(forged.status).toBe(401);
    expect((await retry(undefined, { [SSO_HEADER]: 'sam@example.com' })(h.url)).status).toBe(401);
  });
});
