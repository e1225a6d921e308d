import { getEventListeners, once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Pool } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { eventually } from '../../test/support/eventually.ts';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import { systemClock } from '../timing/clock.ts';
import { DrivenClock } from '../timing/driven-clock.ts';
import {
  type CallInfo,
  type CallSpec,
  callUpstream,
  parseJsonBody,
  type UpstreamContext,
} from './upstream-call.ts';
import { createUpstreamPool } from './upstream-pool.ts';

type Handler = (req: IncomingMessage, res: ServerResponse, hit: number) => void;

let server: Server;
let origin: string;
let handler: Handler = (_req, res) => res.end('{}');
let hits = 0;
let pool: Pool;
const calls: CallInfo[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    hits++;
    req.resume();
    req.on('end', () => handler(req, res, hits));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  pool = createUpstreamPool(origin, { connections: 4 });
});
afterAll(async () => {
  await pool.close();
  server.closeAllConnections();
  server.close();
});
afterEach(() => {
  hits = 0;
  calls.length = 0;
});

function ctx(over: Partial<UpstreamContext> = {}): UpstreamContext {
  return {
    upstream: 'signals',
    dispatcher: pool,
    clock: systemClock,
    defaultTimeoutMs: 500,
    maxRetryWaitMs: 1000,
    retryDelayMs: 1,
    minRetryBudgetMs: 5,
    maxBodyBytes: 1024,
    // Short, so the hanging answers of the timeout tests give their sockets back quickly.
    lateAnswerGraceMs: 100,
    onCall: (i) => calls.push(i),
    ...over,
  };
}

const okSchema = z.object({ ok: z.literal(true) });
function spec(over: Partial<CallSpec<z.infer<typeof okSchema>>> = {}): CallSpec<z.infer<typeof okSchema>> {
  return {
    name: 'probe',
    build: () => ({ method: 'GET', path: '/probe', headers: { accept: 'application/json' } }),
    parse: (res) => parseJsonBody('signals', 'probe', res, okSchema),
    retry: true,
    ...over,
  };
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** A spec whose 401 hook "refreshes" and asks for the retry; counts the refreshes. */
function refreshing() {
  let n = 0;
  const s = spec({
    onUnauthorized: async () => {
      n++;
      return true;
    },
  });
  return { s, refreshes: () => n };
}

async function expectError(p: Promise<unknown>, code: string) {
  const r = (await p) as { ok: boolean; error?: UpstreamError };
  expect(r.ok).toBe(false);
  expect(r.error).toBeInstanceOf(UpstreamError);
  expect(r.error?.code).toBe(code);
  return r.error!;
}

describe('callUpstream over real HTTP', () => {
  it('parses a 200 that matches the schema and reports the call', async () => {
    handler = (_q, res) => json(res, 200, { ok: true });
    const r = await callUpstream(ctx(), spec(), undefined);
    expect(r).toMatchObject({ ok: true, value: { ok: true } });
    expect(calls).toEqual([expect.objectContaining({ name: 'probe', attempts: 1, status: 200 })]);
  });

  it('maps each error status to its code, keeping the upstream message', async () => {
    const table: [number, string][] = [
      [400, ErrorCode.UPSTREAM_BAD_REQUEST],
      [401, ErrorCode.UPSTREAM_UNAUTHORIZED],
      [403, ErrorCode.UPSTREAM_FORBIDDEN],
      [404, ErrorCode.UPSTREAM_NOT_FOUND],
      [410, ErrorCode.UPSTREAM_GONE],
      [418, ErrorCode.UPSTREAM_UNEXPECTED_STATUS],
    ];
    for (const [status, code] of table) {
      handler = (_q, res) => json(res, status, { error: 'invalid_request', message: `said ${status}` });
      const err = await expectError(callUpstream(ctx(), spec({ retry: false }), undefined), code);
      expect(err.status).toBe(status);
      expect(err.upstreamMessage).toBe(`invalid_request: said ${status}`);
    }
  });

  it('keeps the Admin/Log error envelope code and detail', async () => {
    handler = (_q, res) => json(res, 401, { error: true, code: 40100, message: 'Unauthorized', detail: 'x' });
    const err = await expectError(callUpstream(ctx(), spec(), undefined), ErrorCode.UPSTREAM_UNAUTHORIZED);
    expect(err.upstreamMessage).toBe('40100: Unauthorized: x');
  });

  it('a body that is not JSON, or JSON of the wrong shape, is malformed (never undefined)', async () => {
    handler = (_q, res) => res.end('{"ok": tru');
    await expectError(callUpstream(ctx(), spec(), undefined), ErrorCode.UPSTREAM_MALFORMED_RESPONSE);
    handler = (_q, res) => json(res, 200, { ok: 'yes' });
    const err = await expectError(
      callUpstream(ctx(), spec(), undefined),
      ErrorCode.UPSTREAM_MALFORMED_RESPONSE,
    );
    expect(err.message).toContain('at ok');
  });

  it('refuses a body over the size limit', async () => {
    handler = (_q, res) => res.end(`{"ok":true,"pad":"${'x'.repeat(5000)}"}`);
    await expectError(callUpstream(ctx(), spec(), undefined), ErrorCode.UPSTREAM_MALFORMED_RESPONSE);
  });

  it('retries a 503 once and succeeds on the second attempt', async () => {
    handler = (_q, res, hit) => (hit === 1 ? json(res, 503, {}) : json(res, 200, { ok: true }));
    const r = await callUpstream(ctx(), spec(), undefined);
    expect(r.ok).toBe(true);
    expect(hits).toBe(2);
    expect(calls[0]?.attempts).toBe(2);
  });

  it('retries at most once, and never when the call is not idempotent', async () => {
    handler = (_q, res) => json(res, 500, {});
    const err = await expectError(callUpstream(ctx(), spec(), undefined), ErrorCode.UPSTREAM_SERVER_ERROR);
    expect(err.status).toBe(500);
    expect(hits).toBe(2);
    hits = 0;
    await expectError(
      callUpstream(ctx(), spec({ retry: false }), undefined),
      ErrorCode.UPSTREAM_SERVER_ERROR,
    );
    expect(hits).toBe(1);
  });

  it('429 carries Retry-After and is retried only when the wait fits the deadline', async () => {
    handler = (_q, res, hit) =>
      hit === 1 ? json(res, 429, { error: 'rate' }, { 'retry-after': '0' }) : json(res, 200, { ok: true });
    expect((await callUpstream(ctx(), spec(), undefined)).ok).toBe(true);
    expect(hits).toBe(2);

    hits = 0;
    handler = (_q, res) => json(res, 429, {}, { 'retry-after': '2' });
    const err = await expectError(
      callUpstream(ctx(), spec(), { deadlineAt: Date.now() + 500 }),
      ErrorCode.UPSTREAM_RATE_LIMITED,
    );
    expect(err.retryAfterMs).toBe(2000);
    expect(hits).toBe(1);
  });

  it('times out on a hanging upstream at the call timeout', async () => {
    handler = () => {}; // never answers
    const t0 = performance.now();
    await expectError(
      callUpstream(ctx(), spec({ retry: false }), { timeoutMs: 60 }),
      ErrorCode.UPSTREAM_TIMEOUT,
    );
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(55);
    expect(took).toBeLessThan(400);
  });

  it('the shared decision signal releases every call at once with DEADLINE_EXCEEDED', async () => {
    handler = () => {};
    const ac = new AbortController();
    const p = Promise.all([
      callUpstream(ctx(), spec(), { signal: ac.signal, timeoutMs: 5000 }),
      callUpstream(ctx(), spec(), { signal: ac.signal, timeoutMs: 5000 }),
    ]);
    setTimeout(() => ac.abort(), 30);
    const t0 = performance.now();
    const rs = await p;
    expect(performance.now() - t0).toBeLessThan(1000);
    for (const r of rs) expect(r.ok ? undefined : r.error.code).toBe(ErrorCode.DEADLINE_EXCEEDED);
  });

  it('calls sharing a decision signal add one abort listener; one answered before the abort keeps its answer', async () => {
    handler = (req, res) => {
      if (req.url === '/answered') res.end('{"ok":true}');
    };
    const ac = new AbortController();
    const hanging = [1, 2, 3].map(() => callUpstream(ctx(), spec(), { signal: ac.signal, timeoutMs: 5000 }));
    const answered = await callUpstream(
      ctx(),
      spec({ build: () => ({ method: 'GET', path: '/answered', headers: {} }) }),
      { signal: ac.signal, timeoutMs: 5000 },
    );
    expect(answered.ok).toBe(true);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(1);
    ac.abort();
    for (const r of await Promise.all(hanging))
      expect(r.ok ? undefined : r.error.code).toBe(ErrorCode.DEADLINE_EXCEEDED);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
  });

  it('an attempt the decision signal ends first sets no timer of its own and ends at the deadline', async () => {
    handler = () => {}; // never answers
    const timers = vi.spyOn(globalThis, 'setTimeout');
    try {
      const ac = new AbortController();
      const call = callUpstream(ctx(), spec({ retry: false }), {
        signal: ac.signal,
        timeoutMs: 5000,
        signalAbortsAtMs: performance.now() + 30,
      });
      setTimeout(() => ac.abort(), 30);
      await expectError(call, ErrorCode.DEADLINE_EXCEEDED);
      expect(timers.mock.calls.filter((c) => c[1] === 5000)).toHaveLength(0);
      // Told nothing of when the signal aborts, the attempt keeps its own timer.
      const unknown = new AbortController();
      const kept = callUpstream(ctx(), spec({ retry: false }), { signal: unknown.signal, timeoutMs: 5000 });
      await eventually(() => expect(hits).toBe(2));
      unknown.abort();
      await expectError(kept, ErrorCode.DEADLINE_EXCEEDED);
      expect(timers.mock.calls.filter((c) => c[1] === 5000)).toHaveLength(1);
    } finally {
      timers.mockRestore();
    }
  });

  it('an attempt due before the decision signal aborts times out at its own timeout', async () => {
    handler = () => {};
    const ac = new AbortController();
    const t0 = performance.now();
    await expectError(
      callUpstream(ctx(), spec({ retry: false }), {
        signal: ac.signal,
        timeoutMs: 60,
        signalAbortsAtMs: performance.now() + 60_000,
      }),
      ErrorCode.UPSTREAM_TIMEOUT,
    );
    expect(performance.now() - t0).toBeGreaterThanOrEqual(55);
    expect(ac.signal.aborted).toBe(false);
  });

  it('an already aborted signal makes no request', async () => {
    const ac = new AbortController();
    ac.abort();
    await expectError(callUpstream(ctx(), spec(), { signal: ac.signal }), ErrorCode.DEADLINE_EXCEEDED);
    expect(hits).toBe(0);
  });

  it('a refused connection is UPSTREAM_UNREACHABLE', async () => {
    const dead = createServer();
    dead.listen(0, '127.0.0.1');
    await once(dead, 'listening');
    const port = (dead.address() as AddressInfo).port;
    dead.close();
    await once(dead, 'close');
    const p = createUpstreamPool(`http://127.0.0.1:${port}`);
    try {
      const err = await expectError(
        callUpstream(ctx({ dispatcher: p }), spec(), undefined),
        ErrorCode.UPSTREAM_UNREACHABLE,
      );
      expect(err.message).toContain('ECONNREFUSED');
    } finally {
      await p.close();
    }
  });

  it('on 401 calls onUnauthorized and retries once with a fresh request', async () => {
    handler = (req, res) =>
      req.headers.authorization === 'Bearer new' ? json(res, 200, { ok: true }) : json(res, 401, {});
    let token = 'old';
    let refreshes = 0;
    const s = spec({
      retry: false,
      build: () => ({ method: 'GET', path: '/p', headers: { authorization: `Bearer ${token}` } }),
      onUnauthorized: async () => {
        refreshes++;
        token = 'new';
        return true;
      },
    });
    expect((await callUpstream(ctx(), s, undefined)).ok).toBe(true);
    expect(refreshes).toBe(1);
    token = 'stale';
    handler = (_q, res) => json(res, 401, {});
    await expectError(callUpstream(ctx(), s, undefined), ErrorCode.UPSTREAM_UNAUTHORIZED);
    expect(refreshes).toBe(2);
  });

  it('a 401 then a 503 makes two attempts in all: the auth retry spends the one retry', async () => {
    handler = (_q, res, hit) =>
      hit === 1 ? json(res, 401, {}) : hit === 2 ? json(res, 503, {}) : json(res, 200, { ok: true });
    const { s, refreshes } = refreshing();
    const err = await expectError(callUpstream(ctx(), s, undefined), ErrorCode.UPSTREAM_SERVER_ERROR);
    expect(err.status).toBe(503);
    expect(hits).toBe(2);
    expect(refreshes()).toBe(1);
    expect(calls[0]?.attempts).toBe(2);
  });

  it('a 503 then a 401 makes two attempts in all: no token refresh after the 5xx retry', async () => {
    handler = (_q, res, hit) =>
      hit === 1 ? json(res, 503, {}) : hit === 2 ? json(res, 401, {}) : json(res, 200, { ok: true });
    const { s, refreshes } = refreshing();
    await expectError(callUpstream(ctx(), s, undefined), ErrorCode.UPSTREAM_UNAUTHORIZED);
    expect(hits).toBe(2);
    expect(refreshes()).toBe(0);
  });

  it('makes no 401 retry (and no refresh) when too little is left before deadlineAt', async () => {
    handler = (_q, res, hit) => (hit === 1 ? json(res, 401, {}) : json(res, 200, { ok: true }));
    const { s, refreshes } = refreshing();
    const clock = new DrivenClock();
    const at = clock.nowMs();
    // minRetryBudgetMs is 5: 4 ms left is too little.
    await expectError(
      callUpstream(ctx({ clock }), s, { deadlineAt: at + 4 }),
      ErrorCode.UPSTREAM_UNAUTHORIZED,
    );
    expect(hits).toBe(1);
    expect(refreshes()).toBe(0);
    hits = 0;
    expect((await callUpstream(ctx({ clock }), s, { deadlineAt: at + 5 })).ok).toBe(true);
    expect(hits).toBe(2);
    expect(refreshes()).toBe(1);
  });

  it('makes no 401 retry when the token refresh used up the time before deadlineAt', async () => {
    handler = (_q, res, hit) => (hit === 1 ? json(res, 401, {}) : json(res, 200, { ok: true }));
    const clock = new DrivenClock();
    const s = spec({
      onUnauthorized: async () => {
        clock.tick(50); // the refresh took 50 ms
        return true;
      },
    });
    await expectError(
      callUpstream(ctx({ clock }), s, { deadlineAt: clock.nowMs() + 30 }),
      ErrorCode.UPSTREAM_UNAUTHORIZED,
    );
    expect(hits).toBe(1);
  });

  describe('late answers keep their connection', () => {
    // Its own server (the hanging answers above are still being drained on the shared one) and one
    // connection per test, so each new connection the server sees is a socket replaced.
    let own: Server;
    let connections = 0;
    let one: Pool;
    beforeAll(async () => {
      own = createServer((req, res) => {
        hits++;
        req.resume();
        req.on('end', () => handler(req, res, hits));
      });
      own.on('connection', () => {
        connections++;
      });
      own.listen(0, '127.0.0.1');
      await once(own, 'listening');
    });
    afterAll(() => {
      own.closeAllConnections();
      own.close();
    });
    beforeEach(() => {
      one = createUpstreamPool(`http://127.0.0.1:${(own.address() as AddressInfo).port}`, { connections: 1 });
      connections = 0;
    });
    afterEach(async () => {
      await one.destroy();
    });

    it('a timed-out attempt releases its caller at once; its late answer is drained and the socket reused', async () => {
      // The first answer waits for the test: the caller must be released before it exists. The
      // timeout leaves a busy machine time to send the request (a request never sent has no late
      // answer); the answer comes only after it, however slow the machine.
      let answerLate: (() => void) | undefined;
      let lateAnswered = false;
      handler = (_q, res, hit) => {
        if (hit !== 1) return json(res, 200, { ok: true });
        res.on('finish', () => {
          lateAnswered = true;
        });
        answerLate = () => json(res, 200, { ok: true });
      };
      await expectError(
        callUpstream(ctx({ dispatcher: one, lateAnswerGraceMs: 10_000 }), spec({ retry: false }), {
          timeoutMs: 300,
        }),
        ErrorCode.UPSTREAM_TIMEOUT,
      );
      expect(lateAnswered).toBe(false);
      (await eventually(() => answerLate, { what: 'the first request at the server' }))();
      await eventually(() => lateAnswered, { what: 'the late answer sent' });
      const r = await callUpstream(ctx({ dispatcher: one }), spec(), undefined);
      expect(r.ok).toBe(true);
      expect(hits).toBe(2);
      expect(connections).toBe(1);
    });

    it('a lookup that timed out while queued for a connection is never sent, and the socket is kept', async () => {
      handler = (_q, res) => setTimeout(() => json(res, 200, { ok: true }), 60);
      const c = ctx({ dispatcher: one });
      const first = callUpstream(c, spec({ retry: false }), { timeoutMs: 1000 });
      const queued = callUpstream(c, spec({ retry: false }), { timeoutMs: 20 });
      await expectError(queued, ErrorCode.UPSTREAM_TIMEOUT);
      expect((await first).ok).toBe(true);
      expect((await callUpstream(c, spec({ retry: false }), undefined)).ok).toBe(true);
      expect(hits).toBe(2);
      expect(connections).toBe(1);
    });

    it('a late answer still missing after the grace destroys its socket', async () => {
      let closed = false;
      handler = (req) => {
        req.socket.once('close', () => {
          closed = true;
        });
      };
      // The grace on a driven clock: no stall of a busy machine can end it early or late.
      const clock = new DrivenClock();
      await expectError(
        callUpstream(ctx({ dispatcher: one, lateAnswerGraceMs: 1000, clock }), spec({ retry: false }), {
          timeoutMs: 20,
        }),
        ErrorCode.UPSTREAM_TIMEOUT,
      );
      // Kept through the grace: the late answer is being drained, its grace timer armed.
      expect(clock.pendingTimers).toBe(1);
      await clock.advance(999);
      expect(clock.pendingTimers).toBe(1);
      expect(closed).toBe(false);
      // Destroyed when the grace ends.
      await clock.advance(1);
      expect(clock.pendingTimers).toBe(0);
      await eventually(() => closed, { what: 'the socket destroyed after the grace' });
    });

    it('a grace of 0 destroys the socket of a timed-out attempt at once', async () => {
      handler = (_q, res) => setTimeout(() => json(res, 200, { ok: true }), 60);
      await expectError(
        callUpstream(ctx({ dispatcher: one, lateAnswerGraceMs: 0 }), spec({ retry: false }), {
          timeoutMs: 20,
        }),
        ErrorCode.UPSTREAM_TIMEOUT,
      );
      handler = (_q, res) => json(res, 200, { ok: true });
      expect((await callUpstream(ctx({ dispatcher: one }), spec(), undefined)).ok).toBe(true);
      expect(connections).toBeGreaterThanOrEqual(2);
    });
  });
});
