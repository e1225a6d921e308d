import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { eventually } from '../../test/support/eventually.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { DrivenClock } from '../timing/driven-clock.ts';
import { audienceScope, createTokenManager, refreshDelayMs, type TokenManager } from './token-manager.ts';

const SECRET = 's3cr3t-value-never-shown';
let server: Server;
let authUrl: string;
let requests = 0;
let lastBody = '';
let lastAuth = '';
let answer: (res: ServerResponse, n: number) => void;

function tokenAnswer(expiresIn: number) {
  return (res: ServerResponse, n: number) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ access_token: `tok-${n}`, token_type: 'Bearer', expires_in: expiresIn }));
  };
}

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      requests++;
      lastBody = body;
      lastAuth = req.headers.authorization ?? '';
      // Answer on a later turn so concurrent callers really overlap the request.
      setImmediate(() => answer(res, requests));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  authUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

const managers: TokenManager[] = [];
afterEach(async () => {
  await Promise.all(managers.splice(0).map((m) => m.stop()));
  requests = 0;
});

function manager(over: Partial<Parameters<typeof createTokenManager>[0]> = {}) {
  const m = createTokenManager({
    authUrl,
    clientId: 'client-1',
    clientSecret: SECRET,
    audience: 'riskgate-signals',
    idp: 'sandbox',
    ...over,
  });
  managers.push(m);
  return m;
}

describe('token manager', () => {
  it('refreshes before expires_in − 60 s or 80% of the lifetime, whichever is first, never before half', () => {
    expect(refreshDelayMs(43_199_000)).toBe(0.8 * 43_199_000);
    expect(refreshDelayMs(200_000)).toBe(140_000);
    expect(refreshDelayMs(4_000)).toBe(2_000);
  });

  it('asks with client_secret_basic, a form body and the audience URN scope', async () => {
    answer = tokenAnswer(3600);
    const m = manager();
    const r = await m.getToken();
    expect(r).toMatchObject({ ok: true, value: 'tok-1' });
    const form = new URLSearchParams(lastBody);
    expect(form.get('grant_type')).toBe('client_credentials');
    expect(form.get('scope')).toBe(audienceScope('sandbox', 'riskgate-signals'));
    expect(Buffer.from(lastAuth.replace('Basic ', ''), 'base64').toString()).toBe(`client-1:${SECRET}`);
  });

  it('200 concurrent callers without a token cause exactly one token request', async () => {
    answer = tokenAnswer(3600);
    const m = manager();
    const results = await Promise.all(Array.from({ length: 200 }, () => m.getToken()));
    expect(requests).toBe(1);
    expect(new Set(results.map((r) => (r.ok ? r.value : r.error.code)))).toEqual(new Set(['tok-1']));
    expect(m.stats().refreshes).toBe(1);
  });

  it('refreshes in the background ahead of expiry, so callers never wait', async () => {
    // 100 s lifetime: each refresh timer is due half-way, 50 s on the driven clock.
    answer = tokenAnswer(100);
    const clock = new DrivenClock();
    const m = manager({ expiryMarginMs: 10, clock });
    await m.start();
    expect(m.peekToken()).toBe('tok-1');
    for (const next of ['tok-2', 'tok-3']) {
      await clock.advance(49_000);
      expect(m.peekToken()).not.toBe(next); // not before its time
      await clock.advance(1_000);
      // The current token is served all the while the refresh is out; then the new one.
      await eventually(() => m.peekToken() === next, { what: `${next} refreshed in the background` });
    }
    expect(m.stats()).toMatchObject({ refreshes: 3, failures: 0 });
  });

  it('with the endpoint down, keeps the current token while valid and reports unready only after', async () => {
    const clock = new DrivenClock();
    answer = tokenAnswer(100);
    const m = manager({ clock, backoffInitialMs: 1000 });
    expect((await m.getToken()).ok).toBe(true);
    answer = (res) => {
      res.writeHead(503);
      res.end();
    };
    clock.tick(70_000); // past the refresh point, still valid
    const held = await m.getToken();
    expect(held).toMatchObject({ ok: true, value: 'tok-1' });
    // The background refresh (and its one retry) fails: one failure.
    await eventually(() => m.stats().failures >= 1, { what: 'the background refresh failing' });
    expect(m.stats().failures).toBe(1);
    expect(m.isReady()).toBe(true);
    expect((await m.getToken()).ok).toBe(true);

    clock.tick(40_000); // expired
    expect(m.isReady()).toBe(false);
    const before = requests;
    const failed = await m.getToken();
    expect(failed.ok ? 'ok' : failed.error.code).toBe(ErrorCode.TOKEN_UNAVAILABLE);
    expect(requests).toBeGreaterThan(before);
    // Inside the backoff window, further callers fail fast without a request of their own.
    const n = requests;
    const again = await Promise.all([m.getToken(), m.getToken()]);
    expect(again.every((r) => !r.ok)).toBe(true);
    expect(requests).toBe(n);
    clock.tick(5_000);
    answer = tokenAnswer(100);
    expect(await m.getToken()).toMatchObject({ ok: true });
    expect(m.isReady()).toBe(true);
  });

  it('invalidate drops only the current token, so stale 401s cause no second refresh', async () => {
    answer = tokenAnswer(3600);
    const m = manager();
    const first = await m.getToken();
    m.invalidate(first.ok ? first.value : '');
    const [a, b] = await Promise.all([m.getToken(), m.getToken()]);
    expect(a).toMatchObject({ value: 'tok-2' });
    expect(b).toMatchObject({ value: 'tok-2' });
    m.invalidate('tok-1'); // a late 401 for the old token
    expect(m.peekToken()).toBe('tok-2');
    expect(requests).toBe(2);
  });

  it('never puts the client secret in an error, a message or the stats', async () => {
    answer = (res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'invalid_client', error_description: 'client authentication failed' }));
    };
    const m = manager();
    const r = await m.getToken();
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.code).toBe(ErrorCode.TOKEN_UNAVAILABLE);
    expect(r.error.status).toBe(401);
    expect(r.error.upstreamMessage).toBe('invalid_client: client authentication failed');
    const dump = `${r.error.message} ${JSON.stringify(r.error)} ${String(r.error.cause)} ${JSON.stringify(m.stats())}`;
    expect(dump).not.toContain(SECRET);
    expect(dump).not.toContain(Buffer.from(`client-1:${SECRET}`).toString('base64'));
  });

  it('a caller whose deadline passes is released while the refresh goes on', async () => {
    // The token endpoint answers when the test says: the caller is released before it has.
    let release: (() => void) | undefined;
    answer = (res, n) => {
      release = () => tokenAnswer(3600)(res, n);
    };
    const m = manager();
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 20);
    const r = await m.getToken(ac.signal);
    expect(r.ok ? 'ok' : r.error.code).toBe(ErrorCode.DEADLINE_EXCEEDED);
    (await eventually(() => release, { what: 'the refresh reaching the endpoint' }))();
    expect(await m.getToken()).toMatchObject({ ok: true, value: 'tok-1' });
    expect(requests).toBe(1);
  });

  it('retries a failing endpoint in the background with capped exponential backoff', async () => {
    answer = (res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'invalid_scope' })); // not retried inside a call: one request per refresh
    };
    const m = manager({ backoffInitialMs: 100, backoffMaxMs: 400, random: () => 0.999_999 });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      await m.start();
      expect(requests).toBe(1);
      const untilRequests = async (n: number) => {
        // I/O is real: spin on setImmediate (not faked) until the request arrived.
        for (let i = 0; i < 2000 && requests < n; i++) await new Promise((r) => setImmediate(r));
        for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
      };
      for (const [n, delay] of [
        [2, 100],
        [3, 200],
        [4, 400],
        [5, 400],
      ] as const) {
        vi.advanceTimersByTime(delay - 2);
        await untilRequests(n);
        expect(requests).toBe(n - 1); // not yet
        vi.advanceTimersByTime(2);
        await untilRequests(n);
        expect(requests).toBe(n);
      }
      expect(m.stats()).toMatchObject({
        failures: 5,
        consecutiveFailures: 5,
        lastErrorCode: 'RG_ERR_UPSTREAM_BAD_REQUEST',
      });
      expect(m.isReady()).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });

  it('refuses a configuration without scope or idp', () => {
    expect(() =>
      createTokenManager({ authUrl, clientId: 'a', clientSecret: SECRET, audience: 'x' }),
    ).toThrowError(/idp/);
  });

  it('a refresh that rejects (a throwing onCall hook) answers every waiter with RG_ERR_INTERNAL and frees the next refresh', async () => {
    answer = tokenAnswer(3600);
    const clock = new DrivenClock();
    let throwOnce = true;
    const m = manager({
      clock,
      random: () => 1,
      backoffInitialMs: 100,
      onCall: () => {
        if (throwOnce) {
          throwOnce = false;
          throw new Error('hook bug');
        }
      },
    });
    const rs = await Promise.all([m.getToken(), m.getToken()]);
    expect(rs.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual([ErrorCode.INTERNAL, ErrorCode.INTERNAL]);
    expect(requests).toBe(1);
    expect(m.stats()).toMatchObject({ failures: 1, consecutiveFailures: 1 });
    clock.tick(150); // past the backoff
    const again = await m.getToken();
    expect(again.ok && again.value).toBe('tok-2');
    expect(m.stats()).toMatchObject({ refreshes: 1, consecutiveFailures: 0 });
  });
});
