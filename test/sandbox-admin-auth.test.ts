import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuthorization, formatRfc2822 } from '../src/vendor-auth/hmac-signature.ts';
import { adminCall, plainCall, type Served, serveSandbox, signedCall } from './support/serve-module.ts';

// docs/vendor-api.md#signing-test-vectors.
const VECTOR_ID = '7ef5fbc3-8a0d-4a44-8a5c-3b1f2a1e9c10';
const VECTOR_KEY = 'admin-api-key-example';
const VECTOR_DATE = 'Tue, 02 Jan 2024 10:00:00 +0000';
const VECTOR_HOST = 'API.Example.COM';
const GET_HEX = '71d41fc64fcf510a63dcf1ce9df19476de521cfc41723e65f0b6eb9458b1f29c';
const POST_HEX = '89ecd5e391ea896889e92065c9ffbe84187cb499e3b726cd0867c2e3d886a98e';
const POST_BODY = '{"display_name":"John Doe","valid_secs":600}';

describe('Admin API HMAC authentication (docs/vendor-api.md#signing)', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox({
      nowMs: Date.parse('2024-01-02T10:00:00Z'),
      credentials: { serviceId: VECTOR_ID, adminApiKey: VECTOR_KEY },
    });
  });
  afterAll(() => s.close());

  it('accepts the GET vector signature sent over real HTTP', async () => {
    const r = await plainCall(s, 'GET', '/srv/admin/v1/users?username=jo%20hn&status=enabled&limit=10', {
      headers: {
        host: VECTOR_HOST,
        'svc-date': VECTOR_DATE,
        authorization: basicAuthorization(VECTOR_ID, GET_HEX),
      },
    });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ users: [], count: 0, total: 0, limit: 10, offset: 0 });
  });

  it('accepts the POST vector signature over the exact body bytes, hex in upper case too', async () => {
    const r = await plainCall(s, 'POST', '/srv/admin/v1/users', {
      headers: {
        host: VECTOR_HOST,
        'svc-date': VECTOR_DATE,
        'content-type': 'application/json',
        authorization: basicAuthorization(VECTOR_ID, POST_HEX.toUpperCase()),
      },
      body: POST_BODY,
    });
    expect(r.status).toBe(200);
    expect(r.json.expiration).toBe(Date.parse('2024-01-02T10:00:00Z') / 1000 + 600);
  });

  it('refuses a signature made with another key: 401 / 40100 with the canonical string and no key', async () => {
    const r = await plainCall(s, 'GET', '/srv/admin/v1/users?username=jo%20hn&status=enabled&limit=10', {
      headers: {
        host: VECTOR_HOST,
        'svc-date': VECTOR_DATE,
        authorization: basicAuthorization(VECTOR_ID, 'ab'.repeat(32)),
      },
    });
    expect(r.status).toBe(401);
    expect(r.headers['content-type']).toMatch(/application\/json/);
    expect(r.json.error).toBe(true);
    expect(r.json.code).toBe(40100);
    expect(r.json.detail).toContain(
      `${VECTOR_DATE}\nGET\napi.example.com\n/srv/admin/v1/users\nlimit=10&status=enabled&username=jo%20hn`,
    );
    expect(r.text).not.toContain(VECTOR_KEY);
  });

  it('refuses a body that differs from the signed one', async () => {
    const r = await plainCall(s, 'POST', '/srv/admin/v1/users', {
      headers: {
        host: VECTOR_HOST,
        'svc-date': VECTOR_DATE,
        'content-type': 'application/json',
        authorization: basicAuthorization(VECTOR_ID, POST_HEX),
      },
      // Same JSON meaning, other bytes: the signature covers bytes, not meaning.
      body: '{"display_name": "John Doe", "valid_secs": 600}',
    });
    expect(r.status).toBe(401);
    expect(r.json.detail).toContain('{"display_name": "John Doe", "valid_secs": 600}');
  });

  it.each([
    ['299 s behind', -299_000, 200],
    ['299 s ahead', 299_000, 200],
    ['301 s behind', -301_000, 401],
    ['301 s ahead', 301_000, 401],
  ])('treats an SVC-Date %s of the server clock as %s', async (_label, skewMs, status) => {
    const r = await signedCall(s, {
      method: 'GET',
      path: '/srv/admin/v1/server/test',
      id: VECTOR_ID,
      key: VECTOR_KEY,
      dateHeader: 'SVC-Date',
      dateMs: s.clock.now() + skewMs,
    });
    expect(r.status).toBe(status);
    if (status === 401) expect(r.json.code).toBe(40100);
  });

  it('refuses a request without SVC-Date, without Authorization, or with an unknown service ID', async () => {
    const date = formatRfc2822(new Date(s.clock.now()));
    const noDate = await plainCall(s, 'GET', '/srv/admin/v1/server/test', {
      headers: { authorization: basicAuthorization(VECTOR_ID, GET_HEX) },
    });
    const noAuth = await plainCall(s, 'GET', '/srv/admin/v1/server/test', { headers: { 'svc-date': date } });
    const otherId = await signedCall(s, {
      method: 'GET',
      path: '/srv/admin/v1/server/test',
      id: '00000000-0000-4000-8000-000000000000',
      key: VECTOR_KEY,
      dateHeader: 'SVC-Date',
      dateMs: s.clock.now(),
    });
    for (const r of [noDate, noAuth, otherId]) {
      expect(r.status).toBe(401);
      expect(r.json.code).toBe(40100);
    }
    expect(noDate.json.detail).toMatch(/SVC-Date/);
  });

  it('signs the Log API Date header, not SVC-Date, for the Admin API: a Date-only request fails', async () => {
    const r = await signedCall(s, {
      method: 'GET',
      path: '/srv/admin/v1/server/test',
      id: VECTOR_ID,
      key: VECTOR_KEY,
      dateHeader: 'Date',
      dateMs: s.clock.now(),
    });
    expect(r.status).toBe(401);
  });

  it('serves ping and api_version without authentication, and nothing else', async () => {
    const ping = await plainCall(s, 'GET', '/srv/admin/v1/server/ping');
    expect(ping.status).toBe(200);
    expect(ping.json).toEqual({ time: String(s.clock.now()) });
    const version = await plainCall(s, 'GET', '/srv/admin/v1/server/api_version');
    expect(version.json).toEqual({ api_version: '1.23.0' });
    const test = await plainCall(s, 'GET', '/srv/admin/v1/server/test');
    expect(test.status).toBe(401);
    const info = await plainCall(s, 'GET', '/srv/admin/v1/info');
    expect(info.status).toBe(401);
  });
});

describe('Admin API server endpoints and error envelope', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox();
  });
  afterAll(() => s.close());

  it('answers GET and POST /server/test with arbitrary parameters', async () => {
    const get = await adminCall(s, 'GET', '/server/test', { query: [['anything', 'a b+c']] });
    expect(get.status).toBe(200);
    expect(get.json.time).toBe(String(s.clock.now()));
    const post = await adminCall(s, 'POST', '/server/test', { body: { any: ['thing'] } });
    expect(post.status).toBe(200);
  });

  it('answers an unknown endpoint with 404 / 40400 in the envelope', async () => {
    const r = await adminCall(s, 'GET', '/no/such/thing');
    expect(r.status).toBe(404);
    expect(r.json).toMatchObject({ error: true, code: 40400 });
  });

  it('answers a wrong method on a known path with 405 / 40500', async () => {
    const r = await adminCall(s, 'DELETE', '/info');
    expect(r.status).toBe(405);
    expect(r.json).toMatchObject({ error: true, code: 40500 });
  });

  it('answers hardware token endpoints with 501 / 50100', async () => {
    const r = await adminCall(s, 'GET', '/hwtokens');
    expect(r.status).toBe(501);
    expect(r.json.code).toBe(50100);
  });

  it('refuses a PUT body that is not JSON or not an object, with 400 / 40000', async () => {
    const notJson = await signedCall(s, {
      method: 'PUT',
      path: '/srv/admin/v1/info',
      body: 'session_timeout=40',
      id: s.config.credentials.serviceId,
      key: s.config.credentials.adminApiKey,
      dateHeader: 'SVC-Date',
      dateMs: s.clock.now(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(notJson.status).toBe(400);
    expect(notJson.json).toMatchObject({ error: true, code: 40000 });
    expect(notJson.json.detail).toMatch(/Content-Type/);
    const array = await adminCall(s, 'PUT', '/info', { body: [1, 2] });
    expect(array.status).toBe(400);
    expect(array.json.detail).toMatch(/object/);
  });

  it('names an unknown body parameter in the 400 detail', async () => {
    const r = await adminCall(s, 'PUT', '/info', { body: { session_timeout: 40, colour: 'red' } });
    expect(r.status).toBe(400);
    expect(r.json.detail).toContain('colour');
  });
});
