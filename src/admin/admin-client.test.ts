import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../test/support/eventually.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { DrivenClock } from '../timing/driven-clock.ts';
import {
  buildCanonicalString,
  hexSignaturesEqual,
  parseBasicAuthorization,
  signCanonicalString,
} from '../vendor-auth/hmac-signature.ts';
import { type AdminClient, createAdminClient, signAdminRequest } from './admin-client.ts';

const VECTOR = {
  serviceId: '7ef5fbc3-8a0d-4a44-8a5c-3b1f2a1e9c10',
  apiKey: 'admin-api-key-example',
  date: 'Tue, 02 Jan 2024 10:00:00 +0000',
  host: 'API.Example.COM',
};
const basic = (hex: string) => `Basic ${Buffer.from(`${VECTOR.serviceId}:${hex}`).toString('base64')}`;

describe('Admin request signing (docs/vendor-api.md#signing-test-vectors)', () => {
  const signer = {
    serviceId: VECTOR.serviceId,
    apiKey: VECTOR.apiKey,
    host: VECTOR.host,
    protocol: 'https:',
  };
  it('signs the GET vector and sends the query in canonical form', () => {
    const req = signAdminRequest(
      signer,
      VECTOR.date,
      'GET',
      '/srv/admin/v1/users',
      [
        ['username', 'jo hn'],
        ['status', 'enabled'],
        ['limit', '10'],
      ],
      undefined,
    );
    expect(req.headers.authorization).toBe(
      basic('71d41fc64fcf510a63dcf1ce9df19476de521cfc41723e65f0b6eb9458b1f29c'),
    );
    expect(req.headers['svc-date']).toBe(VECTOR.date);
    expect(req.path).toBe('/srv/admin/v1/users?limit=10&status=enabled&username=jo%20hn');
  });
  it('signs the POST vector over the exact body bytes it sends', () => {
    const body = '{"display_name":"John Doe","valid_secs":600}';
    const req = signAdminRequest(signer, VECTOR.date, 'POST', '/srv/admin/v1/users', undefined, body);
    expect(req.headers.authorization).toBe(
      basic('89ecd5e391ea896889e92065c9ffbe84187cb499e3b726cd0867c2e3d886a98e'),
    );
    expect(req.body).toBe(body);
    expect(req.headers['content-type']).toBe('application/json');
  });
});

const KEY = 'admin-key-that-must-not-leak';
interface Seen {
  method: string;
  url: string;
  host: string;
  date: string;
  authorization: string;
  body: string;
}
let server: Server;
let baseUrl: string;
const seen: Seen[] = [];
let respond: (req: IncomingMessage, res: ServerResponse, n: number) => void;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      seen.push({
        method: req.method!,
        url: req.url!,
        host: req.headers.host!,
        date: String(req.headers['svc-date']),
        authorization: String(req.headers.authorization),
        body,
      });
      respond(req, res, seen.length);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});
const clients: AdminClient[] = [];
afterEach(async () => {
  seen.length = 0;
  await Promise.all(clients.splice(0).map((c) => c.close()));
});

function client(clock: Clock = systemClock, over = {}) {
  const c = createAdminClient({
    baseUrl,
    serviceId: VECTOR.serviceId,
    apiKey: KEY,
    clock,
    retry: { retryDelayMs: 1 },
    ...over,
  });
  clients.push(c);
  return c;
}

function reply(res: ServerResponse, status: number, body?: unknown) {
  res.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' });
  res.end(body === undefined ? undefined : JSON.stringify(body));
}

/** Re-derives the signature from what the server received, as a vendor would. */
function verifies(s: Seen): boolean {
  const url = new URL(s.url, 'http://x');
  const canonical = buildCanonicalString({
    date: s.date,
    method: s.method,
    host: s.host,
    protocol: 'http:',
    path: url.pathname,
    query: [...url.searchParams],
    body: s.body,
  });
  const auth = parseBasicAuthorization(s.authorization);
  return (
    auth?.id === VECTOR.serviceId && hexSignaturesEqual(auth.signature, signCanonicalString(canonical, KEY))
  );
}

const user = (id: string) => ({
  user_id: id,
  username: id,
  allowed_factors: ['passcode'],
  failed_attempts: 0,
  max_attempts: 15,
  service_defined_username: true,
  status: 'enabled',
  created_at: 1,
  updated_at: 1,
});

describe('Admin client over real HTTP', () => {
  it('re-signs every retry with a fresh SVC-Date', async () => {
    const clock = new DrivenClock({ nowMs: Date.parse('2024-01-02T10:00:00Z') });
    const c = client(clock);
    respond = (_q, res, n) => {
      clock.tick(2000); // the retry is signed 2 s later
      if (n === 1) reply(res, 503, { error: true, code: 50000, message: 'x' });
      else reply(res, 200, user('u1'));
    };
    const r = await c.getUserDevices('u1', { status: ['enrolled', 'unenrolled'] });
    expect(r.ok).toBe(false); // the body of a user is not a device list: malformed, but both attempts were made
    expect(seen).toHaveLength(2);
    expect(seen[0]!.date).not.toBe(seen[1]!.date);
    expect(seen.every(verifies)).toBe(true);
    expect(seen[0]!.url).toBe('/srv/admin/v1/users/u1/devices?status=enrolled%2Cunenrolled');
  });

  it('304 is "no change", 410 is "already archived", the body of PUT is what was signed', async () => {
    const c = client();
    respond = (_q, res) => reply(res, 304);
    expect(await c.updateUser('u1', { status: 'locked_out' })).toMatchObject({
      ok: true,
      value: { changed: false, alreadyArchived: false },
    });
    expect(JSON.parse(seen[0]!.body)).toEqual({ status: 'locked_out' });
    expect(verifies(seen[0]!)).toBe(true);
    respond = (_q, res) =>
      reply(res, 410, { error: true, code: 41000, message: 'Gone', detail: 'user already archived' });
    expect(await c.updateUser('u1', { allowed_factors: [] })).toMatchObject({
      ok: true,
      value: { changed: false, alreadyArchived: true },
    });
    expect(await c.deleteDevice('d1')).toMatchObject({ ok: true, value: { alreadyArchived: true } });
  });

  it('never retries a one-time code (a new code voids the previous one)', async () => {
    const c = client();
    respond = (_q, res) => reply(res, 503, {});
    const r = await c.createOneTimeCode('u1', { length: 8 });
    expect(r.ok ? 'ok' : r.error.code).toBe(ErrorCode.UPSTREAM_SERVER_ERROR);
    expect(seen).toHaveLength(1);
  });

  it('refuses bad arguments before any request', async () => {
    const c = client();
    await expect(c.getUser('a/b')).rejects.toMatchObject({ field: 'userId' });
    await expect(c.updateUser('u1', { status: 'archived' as 'enabled' })).rejects.toMatchObject({
      field: 'status',
    });
    await expect(c.createOneTimeCode('u1', { length: 3 })).rejects.toMatchObject({ field: 'length' });
    await expect(c.getUserDevices('u1', { type: ['fax' as 'ios'] })).rejects.toMatchObject({
      field: 'filter.type',
    });
    expect(seen).toHaveLength(0);
  });

  it('cached reads: fresh from memory, stale served while one refresh runs, misses shared', async () => {
    const clock = new DrivenClock();
    const c = client(clock, { cache: { user: { ttlMs: 5000, staleMs: 10_000 } } });
    let version = 0;
    respond = (_q, res) => setTimeout(() => reply(res, 200, { ...user('u1'), updated_at: ++version }), 5);
    const [a, b] = await Promise.all([c.getUserCached('u1'), c.getUserCached('u1')]);
    expect(seen).toHaveLength(1); // one request for concurrent misses
    expect(a.ok && b.ok && a.value.updated_at).toBe(1);
    clock.tick(4000);
    expect((await c.getUserCached('u1')).ok && seen.length).toBe(1); // fresh
    clock.tick(2000);
    const stale = await c.getUserCached('u1');
    expect(stale.ok && stale.value.updated_at).toBe(1); // answered at once with the stale value
    // Refreshed in the background: once it lands, a read at the same instant has the new value.
    await eventually(
      async () => {
        const fresh = await c.getUserCached('u1');
        return fresh.ok && fresh.value.updated_at === 2;
      },
      { intervalMs: 2, what: 'the background refresh landing' },
    );
    expect(seen).toHaveLength(2);
    clock.tick(20_000); // beyond stale: a miss again
    await c.getUserCached('u1');
    expect(seen).toHaveLength(3);
    expect(c.cacheStats()).toMatchObject({ misses: 3, refreshes: 1 });
  });

  it('a read in flight during a write never puts the old status back in the cache', async () => {
    const c = client();
    let status = 'enabled';
    const heldGets: (() => void)[] = [];
    respond = (req, res) => {
      if (req.method === 'PUT') {
        status = 'locked_out';
        reply(res, 200, { status });
        return;
      }
      const answer = { ...user('u1'), status }; // read now, answered later
      heldGets.push(() => reply(res, 200, answer));
    };
    const before = c.getUserCached('u1');
    await eventually(() => heldGets.length === 1); // the read has reached the server
    expect(await c.updateUser('u1', { status: 'locked_out' })).toMatchObject({ ok: true });
    heldGets.shift()!();
    const early = await before;
    expect(early.ok && early.value.status).toBe('enabled'); // asked before the write: its own answer
    const after = c.getUserCached('u1');
    await eventually(() => heldGets.length === 1); // a new read, not the stale one from the cache
    heldGets.shift()!();
    const r = await after;
    expect(r.ok && r.value.status).toBe('locked_out');
    expect(seen.map((x) => x.method)).toEqual(['GET', 'PUT', 'GET']);
  });

  it('user reads stay fresh 2 s and are served stale 5 s more by default (account-locked is a security rule)', async () => {
    const clock = new DrivenClock();
    const c = client(clock);
    respond = (_q, res) => reply(res, 200, user('u1'));
    expect((await c.getUserCached('u1')).ok).toBe(true);
    clock.tick(1999);
    await c.getUserCached('u1');
    expect(seen).toHaveLength(1); // fresh
    clock.tick(1);
    await c.getUserCached('u1'); // stale: answered, refreshed in the background
    await eventually(() => seen.length === 2);
    // The refresh has landed once a read at the same instant is a fresh hit.
    const fresh = c.cacheStats().fresh;
    await eventually(
      async () => {
        await c.getUserCached('u1');
        return c.cacheStats().fresh > fresh;
      },
      { intervalMs: 2, what: 'the refresh landing' },
    );
    clock.tick(7000); // 7 s after the refresh: beyond fresh + stale, a miss
    await c.getUserCached('u1');
    expect(seen).toHaveLength(3);
    expect(c.cacheStats()).toMatchObject({ misses: 2, refreshes: 1 });
  });

  it('a 401 keeps the upstream diagnostic but never the key', async () => {
    const c = client();
    respond = (_q, res) =>
      reply(res, 401, {
        error: true,
        code: 40100,
        message: 'Invalid authorization',
        detail: 'canonical: GET\n...',
      });
    const r = await c.getInfo();
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.code).toBe(ErrorCode.UPSTREAM_UNAUTHORIZED);
    expect(r.error.upstreamMessage).toContain('40100');
    expect(`${r.error.message} ${JSON.stringify(r.error)}`).not.toContain(KEY);
  });
});
