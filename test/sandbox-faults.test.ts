import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { FaultRule } from '../src/sandbox/faults/fault-rule.ts';
import type { StatsSnapshot } from '../src/sandbox/stats/request-stats.ts';
import { getSignal, getToken, requestToken } from './sandbox-helpers.ts';
import { eventually } from './support/eventually.ts';
import { sandboxForFile, startTestSandbox, withSandbox } from './support/test-sandbox.ts';

const sb = sandboxForFile({ scenario: 'empty' });
let token: string;
beforeAll(async () => {
  token = await getToken(sb);
});
afterEach(async () => {
  await fetch(`${sb.url}/sandbox/faults`, { method: 'DELETE' });
});

const setFaults = async (rules: FaultRule[]) => {
  const res = await fetch(`${sb.url}/sandbox/faults`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ rules }),
  });
  expect(res.status).toBe(200);
};
const stats = async () => (await (await fetch(`${sb.url}/sandbox/stats`)).json()) as StatsSnapshot;
const geolocation = () => getSignal(sb, 'geolocation', { accountId: 'a' }, token);

describe('fault injection over HTTP', () => {
  it('adds fixed latency with a timer, only on the matching route', async () => {
    await setFaults([{ route: 'GET /api/v1/signals/geolocation', latency: { kind: 'fixed', ms: 600 } }]);
    const t0 = performance.now();
    const order: string[] = [];
    const slow = geolocation().then((r) => {
      order.push('geolocation');
      return r.status;
    });
    // Another route, asked after the slow one, is answered while the slow one still waits.
    const other = await getSignal(sb, 'active-call', { accountId: 'a' }, token);
    order.push('active-call');
    expect(other.status).toBe(200);
    expect(await slow).toBe(200);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(595);
    expect(order).toEqual(['active-call', 'geolocation']);
  });

  it('answers 500 or 503 in the Trust Signals error shape', async () => {
    await setFaults([{ route: 'GET /api/v1/signals/*', errorRate: 1 }]);
    const res = await geolocation();
    expect(res.status).toBe(500);
    expect(await res.json()).toMatchObject({ error: 'internal_error', message: expect.any(String) });
    await setFaults([{ route: 'GET /api/v1/signals/*', errorRate: 1, errorStatus: 503 }]);
    expect((await geolocation()).status).toBe(503);
  });

  it('answers 429 with Retry-After in each API’s own error shape', async () => {
    await setFaults([{ route: '*', rateLimit: { rate: 1, retryAfterSeconds: 7 } }]);
    const signal = await geolocation();
    expect(signal.status).toBe(429);
    expect(signal.headers.get('retry-after')).toBe('7');
    expect(await signal.json()).toEqual({ error: 'rate_limited', message: 'Too many requests' });

    const admin = await fetch(`${sb.url}/srv/admin/v1/users`);
    expect(admin.status).toBe(429);
    expect(admin.headers.get('retry-after')).toBe('7');
    expect(await admin.json()).toEqual({ error: true, code: 42900, message: 'Too many requests' });

    const logs = await fetch(`${sb.url}/logs/v1/service/${sb.config.credentials.serviceId}`);
    expect(logs.status).toBe(429);
    expect(((await logs.json()) as { code: number }).code).toBe(42900);

    const oauth = await requestToken(sb, 'retrieval');
    expect(oauth.status).toBe(429);
    expect(((await oauth.json()) as { error: string }).error).toBe('temporarily_unavailable');
  });

  it('answers 200 with a truncated JSON body for malformedJson', async () => {
    await setFaults([{ route: 'GET /api/v1/signals/geolocation', malformedJson: true }]);
    const res = await geolocation();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const text = await res.text();
    expect(text.startsWith('{"signalType":"geolocation"')).toBe(true);
    expect(() => JSON.parse(text)).toThrow();
  });

  it('hangs until the client gives up, counted as status 0', async () => {
    await fetch(`${sb.url}/sandbox/stats/reset`, { method: 'POST' });
    await setFaults([{ route: 'GET /api/v1/signals/geolocation', hang: true, times: 1 }]);
    const t0 = performance.now();
    await expect(
      fetch(`${sb.url}/api/v1/signals/geolocation?serviceId=${sb.config.credentials.serviceId}&accountId=a`, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(200),
      }),
    ).rejects.toThrow();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    expect((await stats()).routes['GET /api/v1/signals/geolocation']).toEqual({ '0': 1 });
    // times: 1 → the next request is answered.
    expect((await geolocation()).status).toBe(200);
  });

  it('applies to the next N matching requests only with times', async () => {
    await setFaults([{ route: 'GET /api/v1/signals/geolocation', errorRate: 1, times: 2 }]);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await geolocation()).status);
    expect(statuses).toEqual([500, 500, 200]);
    expect(await (await fetch(`${sb.url}/sandbox/faults`)).json()).toEqual({ rules: [] });
  });

  it('never touches the /sandbox control routes', async () => {
    await setFaults([{ route: '*', errorRate: 1 }]);
    expect((await fetch(`${sb.url}/sandbox/stats`)).status).toBe(200);
    expect((await fetch(`${sb.url}/sandbox/faults`)).status).toBe(200);
  });
});

describe('fault waits keep nothing per request', () => {
  it('leaves no pending wait and builds no composite abort signal after many delayed requests', async () => {
    // On Node 20 a long-lived signal passed to AbortSignal.any keeps every composite made from it.
    const any = vi.spyOn(AbortSignal, 'any');
    try {
      await setFaults([
        { route: 'GET /api/v1/signals/*', latency: { kind: 'lognormal', p50Ms: 1, p99Ms: 3 } },
      ]);
      for (let round = 0; round < 10; round++) {
        const statuses = await Promise.all(
          Array.from({ length: 30 }, () => geolocation().then((r) => r.status)),
        );
        expect(statuses.every((st) => st === 200)).toBe(true);
      }
      expect(any).not.toHaveBeenCalled();
      expect(sb.sandbox.faults.pendingWaits()).toBe(0);
      expect((await stats()).routes['GET /api/v1/signals/geolocation']?.['200']).toBeGreaterThanOrEqual(300);
    } finally {
      any.mockRestore();
    }
  });

  it('drops a hang from the pending set when its client goes away', async () => {
    await setFaults([{ route: 'GET /api/v1/signals/geolocation', hang: true }]);
    const gone = new AbortController();
    const pending = getSignal(sb, 'geolocation', { accountId: 'a' }, token, undefined, gone.signal).catch(
      () => 'aborted',
    );
    await vi.waitFor(() => expect(sb.sandbox.faults.pendingWaits()).toBe(1), { timeout: 2000, interval: 10 });
    gone.abort();
    expect(await pending).toBe('aborted');
    await vi.waitFor(() => expect(sb.sandbox.faults.pendingWaits()).toBe(0), { timeout: 2000, interval: 10 });
  });
});

describe('stop()', () => {
  it('closes a hanging connection', async () => {
    const own = await startTestSandbox({
      scenario: 'empty',
      faults: [{ route: 'GET /api/v1/signals/*', hang: true }],
    });
    const t = await getToken(own);
    const pending = getSignal(own, 'geolocation', { accountId: 'a' }, t).then(
      (r) => r.status,
      () => 'closed',
    );
    // The request is hanging in the sandbox, not still on its way.
    await eventually(() => own.sandbox.faults.pendingWaits() === 1, { what: 'the request hanging' });
    const t0 = performance.now();
    await own.stop();
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(await pending).toBe('closed');
  });
});

describe('start-time faults', () => {
  it('come from options and from the scenario, and POST /sandbox/reset restores them', async () => {
    await withSandbox(
      {
        scenario: {
          name: 'faulty',
          faults: [{ route: 'GET /api/v1/signals/geovelocity', errorRate: 1, errorStatus: 503 }],
        },
        faults: [{ route: 'GET /api/v1/signals/geolocation', errorRate: 1 }],
      },
      async (own) => {
        const t = await getToken(own);
        expect((await getSignal(own, 'geovelocity', { accountId: 'a' }, t)).status).toBe(503);
        expect((await getSignal(own, 'geolocation', { accountId: 'a' }, t)).status).toBe(500);
        await fetch(`${own.url}/sandbox/faults`, { method: 'DELETE' });
        expect((await getSignal(own, 'geolocation', { accountId: 'a' }, t)).status).toBe(200);
        await fetch(`${own.url}/sandbox/reset`, { method: 'POST' });
        expect((await getSignal(own, 'geolocation', { accountId: 'a' }, t)).status).toBe(500);
      },
    );
  });
});
