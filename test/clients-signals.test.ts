import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCode, InputError } from '../src/errors/riskgate-error.ts';
import type { RemoteAccessToolParams } from '../src/signals/signal-params.ts';
import type { CallInfo } from '../src/upstream/upstream-call.ts';
import type { UpstreamResult } from '../src/upstream/upstream-result.ts';
import { type ClientSandbox, startClientSandbox, startCountingProxy } from './clients-sandbox.ts';
import { eventually } from './support/eventually.ts';

const BATCH = 'POST /api/v1/signals/remote-access-tool';
const NEW_BROWSER = 'GET /api/v1/signals/new-browser';
const DEMO = ['alice', 'bob', 'mallory', 'trudy', 'carol', 'dave'];

let env: ClientSandbox;
beforeAll(async () => {
  env = await startClientSandbox();
});
afterAll(async () => {
  await env.stop();
});
beforeEach(async () => {
  await env.clearFaults();
  await env.resetStats();
});

function codeOf(r: UpstreamResult<unknown>): string {
  return r.ok ? 'ok' : r.error.code;
}

function rat(accountId: string, n = 1): RemoteAccessToolParams {
  return {
    accountId,
    unitId: `${accountId}-web`,
    verificationStatus: 'unverified',
    interactionId: `${accountId}-login-${n}`,
  };
}

describe('Trust Signals client against the sandbox', () => {
  it('calls every endpoint with valid parameters and parses each envelope', async () => {
    const tokens = env.tokens();
    const c = env.signals(tokens);
    const single = { accountId: 'alice' };
    const paired = { subjectAccountId: 'alice' };
    const rs = await Promise.all([
      c.geolocation(single),
      c.geovelocity(single),
      c.activeCall({ accountId: 'bob', unitId: 'bob-app' }),
      c.latestProximity(paired),
      c.historicalProximity({ ...paired, supportingSignal: 'locationOverlap' }),
      c.newBrowser({
        ...paired,
        subjectUnitId: 'alice-web',
        matchScope: 'browser_profile',
        cooldownSeconds: 0,
      }),
      c.remoteAccessToolSingle(rat('mallory')),
      c.remoteAccessTool(rat('alice')),
    ]);
    expect(rs.map(codeOf)).toEqual(Array(8).fill('ok'));
    expect(rs.map((r) => (r.ok ? r.value.signalType : ''))).toEqual([
      'geolocation',
      'geovelocity',
      'active_call',
      'latest_proximity',
      'historical_proximity',
      'new_browser',
      'remote_access_tool',
      'remote_access_tool',
    ]);
  });

  it('rejects invalid parameters before any network call', async () => {
    const c = env.signals(env.tokens());
    await expect(c.newBrowser({ subjectAccountId: 'a', subjectInteractionId: 'x' })).rejects.toBeInstanceOf(
      InputError,
    );
    await expect(c.remoteAccessTool({ ...rat('alice'), accountId: 'not valid!' })).rejects.toMatchObject({
      field: 'accountId',
    });
    await expect(
      c.geovelocity({
        accountId: 'alice',
        windowStart: '2024-01-01T00:00:00Z',
        windowEnd: '2024-03-01T00:00:00Z',
      }),
    ).rejects.toMatchObject({ field: 'windowStart' });
    const s = await env.stats();
    expect(s.routes).toEqual({});
    expect(s.tokensIssued).toBe(0);
  });

  it('coalesces 1,000 concurrent remote-access-tool lookups into at most 15 batch calls, each caller getting its own answer', async () => {
    const tokens = env.tokens();
    await tokens.start();
    const c = env.signals(tokens);
    const params = Array.from({ length: 1000 }, (_, i) =>
      rat(DEMO[i % DEMO.length]!, Math.floor(i / DEMO.length) + 1),
    );
    const rs = await Promise.all(params.map((p) => c.remoteAccessTool(p)));
    const s = await env.stats();
    expect(env.count(s, BATCH)).toBeLessThanOrEqual(15);
    expect(s.ratBatchSizes.reduce((a, b) => a + b, 0)).toBe(1000);
    expect(Math.max(...s.ratBatchSizes)).toBeLessThanOrEqual(100);
    rs.forEach((r, i) => {
      expect(r.ok).toBe(true);
      if (!r.ok) return;
      expect([r.value.unitId, r.value.interactionId]).toEqual([params[i]!.unitId, params[i]!.interactionId]);
    });
    // The scenario's known outcomes reach the right callers (mallory's login is remote-controlled).
    const anomalies = rs.slice(0, DEMO.length).map((r) => (r.ok ? r.value.result?.anomaly : 'error'));
    expect(anomalies).toEqual([false, false, true, undefined, undefined, false]);
    // Each caller's answer is the one the single endpoint gives for that very item.
    const sample = [0, 1, 2, 3, 4, 5, 6, 500, 997, 999];
    const singles = await Promise.all(sample.map((i) => c.remoteAccessToolSingle(params[i]!)));
    sample.forEach((i, k) => {
      const b = rs[i]!;
      const one = singles[k]!;
      expect(b.ok && one.ok).toBe(true);
      if (b.ok && one.ok) {
        expect({ success: b.value.success, reason: b.value.reason, result: b.value.result }).toEqual({
          success: one.value.success,
          reason: one.value.reason,
          result: one.value.result,
        });
      }
    });
  });

  it('sends identical items in one batch once', async () => {
    const calls: CallInfo[] = [];
    const c = env.signals(env.tokens(), { onCall: (i) => calls.push(i) });
    const rs = await Promise.all(
      Array.from({ length: 300 }, (_, i) => c.remoteAccessTool(rat(DEMO[i % 3]!))),
    );
    expect(rs.every((r) => r.ok)).toBe(true);
    const s = await env.stats();
    expect(s.ratBatchSizes).toEqual([3]);
    expect(c.stats()).toMatchObject({ lookups: 300, deduplicated: 297, batches: 1, items: 3 });
    expect(calls).toEqual([
      expect.objectContaining({ name: 'remote-access-tool-batch', items: 3, status: 200 }),
    ]);
  });

  it('a failed batch fails each of its callers with the typed error', async () => {
    await env.faults([{ route: BATCH, errorRate: 1, errorStatus: 503 }]);
    const c = env.signals(env.tokens());
    const rs = await Promise.all([c.remoteAccessTool(rat('alice')), c.remoteAccessTool(rat('bob'))]);
    expect(rs.map(codeOf)).toEqual([ErrorCode.UPSTREAM_SERVER_ERROR, ErrorCode.UPSTREAM_SERVER_ERROR]);
    expect(rs.map((r) => (r.ok ? 0 : r.error.status))).toEqual([503, 503]);
    expect(env.count(await env.stats(), BATCH)).toBe(2); // one retry of the (read-only) batch
  });

  it('caches settled remote-access-tool answers by default, never unsettled ones', async () => {
    const c = env.signals(env.tokens());
    // alice-login-1 is scored (settled); trudy-login-1 has too few events (may still change).
    const settled = await c.remoteAccessTool(rat('alice'));
    expect(settled.ok && settled.value.success).toBe(true);
    expect((await c.remoteAccessTool(rat('alice'))).ok).toBe(true);
    expect(c.stats().cacheHits).toBe(1);
    const unsettled = await c.remoteAccessTool(rat('trudy'));
    expect(unsettled.ok && unsettled.value.reason).toBe('insufficient_observations');
    await c.remoteAccessTool(rat('trudy'));
    expect(c.stats().cacheHits).toBe(1);
    expect(env.count(await env.stats(), BATCH)).toBe(3);
  });

  it('never caches a failed lookup, and a cache ttl of 0 turns the cache off', async () => {
    const c = env.signals(env.tokens());
    await env.faults([{ route: BATCH, errorRate: 1, errorStatus: 500, times: 2 }]);
    expect(codeOf(await c.remoteAccessTool(rat('bob')))).toBe(ErrorCode.UPSTREAM_SERVER_ERROR);
    expect(codeOf(await c.remoteAccessTool(rat('bob')))).toBe('ok');
    expect(codeOf(await c.remoteAccessTool(rat('bob')))).toBe('ok');
    expect(c.stats().cacheHits).toBe(1);

    const off = env.signals(env.tokens(), { cache: { ttlMs: 0 } });
    await env.resetStats();
    await off.remoteAccessTool(rat('alice'));
    await off.remoteAccessTool(rat('alice'));
    expect(off.stats().cacheHits).toBe(0);
    expect(env.count(await env.stats(), BATCH)).toBe(2);
  });
});

describe('typed errors from injected faults', () => {
  it('timeout: a slow answer past the call timeout is UPSTREAM_TIMEOUT', async () => {
    await env.faults([{ route: NEW_BROWSER, latency: { kind: 'fixed', ms: 400 } }]);
    const c = env.signals(env.tokens());
    const r = await c.newBrowser(
      { subjectAccountId: 'alice' },
      { timeoutMs: 80, deadlineAt: Date.now() + 120 },
    );
    expect(codeOf(r)).toBe(ErrorCode.UPSTREAM_TIMEOUT);
    expect(r.durationMs).toBeLessThan(300);
  });

  it('timed-out calls keep their connections: late answers are drained, the sockets reused', async () => {
    const proxy = await startCountingProxy(env.url);
    try {
      const c = env.signals(env.tokens(), { baseUrl: `${proxy.url}/api/v1`, connections: 4 });
      const o = { timeoutMs: 30 };
      await env.faults([{ route: NEW_BROWSER, latency: { kind: 'fixed', ms: 120 } }]);
      for (let round = 0; round < 3; round++) {
        const rs = await Promise.all(DEMO.slice(0, 4).map((a) => c.newBrowser({ subjectAccountId: a }, o)));
        expect(rs.map(codeOf)).toEqual(Array(4).fill(ErrorCode.UPSTREAM_TIMEOUT));
        // The late answers arrive and are drained before the next round.
        await eventually(() => c.stats().lateAnswers === 0, { what: 'the late answers drained' });
      }
      await env.clearFaults();
      for (let round = 0; round < 3; round++) {
        const rs = await Promise.all(DEMO.slice(0, 4).map((a) => c.newBrowser({ subjectAccountId: a })));
        expect(rs.map(codeOf)).toEqual(Array(4).fill('ok'));
      }
      // 12 timed-out calls (each retried once) and 12 answered ones over the first 4 connections.
      expect(proxy.connections()).toBeLessThanOrEqual(4);
    } finally {
      await proxy.stop();
    }
  });

  it('5xx: retried once, then UPSTREAM_SERVER_ERROR with the status', async () => {
    await env.faults([{ route: NEW_BROWSER, errorRate: 1, errorStatus: 500 }]);
    const c = env.signals(env.tokens());
    const r = await c.newBrowser({ subjectAccountId: 'alice' });
    expect(codeOf(r)).toBe(ErrorCode.UPSTREAM_SERVER_ERROR);
    expect(r.ok ? 0 : r.error.status).toBe(500);
    expect(env.count(await env.stats(), NEW_BROWSER, 500)).toBe(2);
  });

  it('5xx once: the single retry recovers', async () => {
    await env.faults([{ route: NEW_BROWSER, errorRate: 1, errorStatus: 503, times: 1 }]);
    const calls: CallInfo[] = [];
    const c = env.signals(env.tokens(), { onCall: (i) => calls.push(i) });
    expect(codeOf(await c.newBrowser({ subjectAccountId: 'alice' }))).toBe('ok');
    expect(calls.at(-1)).toMatchObject({ name: 'new-browser', attempts: 2, status: 200 });
  });

  it('429: Retry-After is honoured when it fits the deadline, reported when it does not', async () => {
    const c = env.signals(env.tokens());
    await env.faults([{ route: NEW_BROWSER, rateLimit: { rate: 1, retryAfterSeconds: 0 }, times: 1 }]);
    expect(codeOf(await c.newBrowser({ subjectAccountId: 'alice' }, { deadlineAt: Date.now() + 500 }))).toBe(
      'ok',
    );

    await env.faults([{ route: NEW_BROWSER, rateLimit: { rate: 1, retryAfterSeconds: 2 } }]);
    await env.resetStats();
    const r = await c.newBrowser({ subjectAccountId: 'alice' }, { deadlineAt: Date.now() + 500 });
    expect(codeOf(r)).toBe(ErrorCode.UPSTREAM_RATE_LIMITED);
    expect(r.ok ? 0 : r.error.retryAfterMs).toBe(2000);
    expect(env.count(await env.stats(), NEW_BROWSER)).toBe(1);
  });

  it('malformed JSON is UPSTREAM_MALFORMED_RESPONSE, never a silent undefined', async () => {
    await env.faults([{ route: NEW_BROWSER, malformedJson: true }]);
    const c = env.signals(env.tokens());
    const r = await c.newBrowser({ subjectAccountId: 'alice' });
    expect(codeOf(r)).toBe(ErrorCode.UPSTREAM_MALFORMED_RESPONSE);
  });

  it('hang: the decision deadline releases every caller on time, batched ones included', async () => {
    await env.faults([
      { route: 'GET /api/v1/signals/*', hang: true },
      { route: BATCH, hang: true },
    ]);
    const c = env.signals(env.tokens(), { defaultTimeoutMs: 5000, batch: { timeoutMs: 300 } });
    const ac = new AbortController();
    const t0 = performance.now();
    setTimeout(() => ac.abort(), 60);
    const o = { signal: ac.signal };
    const rs = await Promise.all([
      c.newBrowser({ subjectAccountId: 'alice' }, o),
      c.geovelocity({ accountId: 'alice' }, o),
      c.remoteAccessTool(rat('alice'), o),
      c.remoteAccessTool(rat('bob'), o),
    ]);
    const took = performance.now() - t0;
    expect(rs.map(codeOf)).toEqual(Array(4).fill(ErrorCode.DEADLINE_EXCEEDED));
    expect(took).toBeGreaterThanOrEqual(55);
    expect(took).toBeLessThan(500);
  });

  it('refused connection is UPSTREAM_UNREACHABLE', async () => {
    const dead = createServer().listen(0, '127.0.0.1');
    await once(dead, 'listening');
    const port = (dead.address() as AddressInfo).port;
    dead.close();
    await once(dead, 'close');
    const c = env.signals(env.tokens(), { baseUrl: `http://127.0.0.1:${port}/api/v1` });
    const r = await c.geolocation({ accountId: 'alice' });
    expect(codeOf(r)).toBe(ErrorCode.UPSTREAM_UNREACHABLE);
  });
});
