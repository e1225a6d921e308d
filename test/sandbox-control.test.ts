import { beforeAll, describe, expect, it } from 'vitest';
import type { StatsSnapshot } from '../src/sandbox/stats/request-stats.ts';
import { collect, getSignal, getToken } from './sandbox-helpers.ts';
import { sandboxForFile, withSandbox } from './support/test-sandbox.ts';

const sb = sandboxForFile({ scenario: 'empty' });
let token: string;
beforeAll(async () => {
  token = await getToken(sb);
});

const control = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${sb.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    json: (await res.json()) as Record<string, unknown>,
  };
};

describe('GET /sandbox/stats', () => {
  it('counts vendor-API requests by METHOD and route pattern and status, but not control calls', async () => {
    await control('POST', '/sandbox/stats/reset');
    await getSignal(sb, 'geolocation', { accountId: 'a' }, token);
    await getSignal(sb, 'geolocation', { accountId: 'a' }, token);
    await getSignal(sb, 'geolocation', { accountId: 'bad id' }, token);
    await getSignal(sb, 'geovelocity', { accountId: 'a' }, undefined);
    await fetch(`${sb.url}/api/v1/nope`);
    await control('GET', '/sandbox/faults');
    const stats = (await control('GET', '/sandbox/stats')).json as unknown as StatsSnapshot;
    expect(stats.routes).toEqual({
      'GET /api/v1/signals/geolocation': { '200': 2, '400': 1 },
      'GET /api/v1/signals/geovelocity': { '401': 1 },
      'GET (unmatched)': { '404': 1 },
    });
    expect(stats.tokensIssued).toBe(0);
    expect(stats.ratBatchSizes).toEqual([]);
  });

  it('POST /sandbox/stats/reset zeroes it', async () => {
    await getSignal(sb, 'geolocation', { accountId: 'a' }, token);
    const reset = await control('POST', '/sandbox/stats/reset');
    expect(reset.json).toEqual({ routes: {}, tokensIssued: 0, ratBatchSizes: [] });
  });
});

describe('/sandbox/faults', () => {
  it('PUT replaces, POST adds, GET lists, DELETE clears', async () => {
    const a = { route: 'GET /api/v1/signals/*', errorRate: 0.5 };
    const b = { route: '*', latency: { kind: 'fixed', ms: 1 } };
    expect((await control('PUT', '/sandbox/faults', { rules: [a] })).json).toEqual({ rules: [a] });
    expect((await control('POST', '/sandbox/faults', b)).status).toBe(201);
    expect((await control('GET', '/sandbox/faults')).json).toEqual({ rules: [a, b] });
    expect((await control('PUT', '/sandbox/faults', { rules: [b] })).json).toEqual({ rules: [b] });
    expect((await control('DELETE', '/sandbox/faults')).json).toEqual({ rules: [] });
    expect((await control('GET', '/sandbox/faults')).json).toEqual({ rules: [] });
  });

  it('answers 400 problem+json naming the field for a bad rule', async () => {
    const res = await control('PUT', '/sandbox/faults', { rules: [{ route: '*', errorRate: 2 }] });
    expect(res.status).toBe(400);
    expect(res.type).toBe('application/problem+json');
    expect(res.json).toMatchObject({ status: 400, field: 'rules.0.errorRate' });
    const notJson = await control('POST', '/sandbox/faults', '{');
    expect(notJson.status).toBe(400);
    expect(notJson.json.field).toBe('body');
    expect((await control('GET', '/sandbox/faults')).json).toEqual({ rules: [] });
  });
});

describe('POST /sandbox/clock', () => {
  it('moves the clock forward for observations and windows', async () => {
    const writer = await getToken(sb, 'collection');
    const obs = {
      accountId: 'clocked',
      unitId: 'u',
      verificationStatus: 'verified',
      interactionId: 'i',
      platform: 'mobile',
      onCall: true,
    };
    expect((await collect(sb, writer, [obs])).status).toBe(200);
    expect(
      (
        (await (await getSignal(sb, 'active-call', { accountId: 'clocked' }, token)).json()) as {
          success: boolean;
        }
      ).success,
    ).toBe(true);
    // 32 days later the observation has left the default 31-day window (and the old token expired).
    const moved = await control('POST', '/sandbox/clock', { advanceSeconds: 32 * 86_400 });
    expect(moved.status).toBe(200);
    expect(moved.json.offsetMs).toBe(32 * 86_400_000);
    expect((await getSignal(sb, 'active-call', { accountId: 'clocked' }, token)).status).toBe(401);
    const fresh = await getToken(sb);
    const later = (await (await getSignal(sb, 'active-call', { accountId: 'clocked' }, fresh)).json()) as {
      reason: string;
    };
    expect(later.reason).toBe('insufficient_observations');
    await control('POST', '/sandbox/reset');
  });

  it('refuses to move backwards', async () => {
    const res = await control('POST', '/sandbox/clock', { advanceSeconds: -5 });
    expect(res.status).toBe(400);
    expect(res.json.field).toBe('advanceSeconds');
  });
});

describe('POST /sandbox/reset', () => {
  it('drops collected observations, reseeds the scenario, zeroes stats and the clock offset', async () => {
    await withSandbox({}, async (own) => {
      const t = await getToken(own);
      const writer = await getToken(own, 'collection');
      const obs = {
        accountId: 'extra',
        unitId: 'u',
        verificationStatus: 'verified',
        interactionId: 'i',
        platform: 'mobile',
        onCall: false,
      };
      await collect(own, writer, [obs]);
      const before = (await (await fetch(`${own.url}/sandbox/info`)).json()) as { observations: number };
      await fetch(`${own.url}/sandbox/clock`, {
        method: 'POST',
        body: JSON.stringify({ advanceSeconds: 10 }),
      });
      const info = (await (await fetch(`${own.url}/sandbox/reset`, { method: 'POST' })).json()) as {
        observations: number;
        clockOffsetMs: number;
      };
      expect(info.observations).toBe(before.observations - 1);
      expect(info.clockOffsetMs).toBe(0);
      const gone = (await (await getSignal(own, 'active-call', { accountId: 'extra' }, t)).json()) as {
        reason: string;
      };
      expect(gone.reason).toBe('insufficient_observations');
      // Tokens issued before the reset stay valid (same key pair).
      expect((await getSignal(own, 'active-call', { accountId: 'carol' }, t)).status).toBe(200);
      const stats = (await (await fetch(`${own.url}/sandbox/stats`)).json()) as StatsSnapshot;
      expect(stats.routes['POST /api/v1/collections']).toBeUndefined();
    });
  });
});

describe('control API errors', () => {
  const problemOf = (status: number, field: string) => ({
    type: 'about:blank',
    title: 'Invalid request parameters',
    status,
    detail: expect.stringMatching(new RegExp(`^${field.replaceAll('.', '\\.')}: `)),
    field,
    code: status * 100,
  });

  it.each([
    ['PUT', '/sandbox/faults', 'rules.0.errorRate', { rules: [{ route: '*', errorRate: 2 }] }],
    ['POST', '/sandbox/clock', 'advanceSeconds', { advanceSeconds: 'soon' }],
    ['POST', '/sandbox/clock', 'extra', { advanceSeconds: 1, extra: true }],
    ['PUT', '/sandbox/logs/rate-limit', 'max_requests', { max_requests: -1, window_ms: 1000 }],
    ['POST', '/sandbox/logs/events', 'scope', { scope: 'galaxy', type: 't' }],
    ['POST', '/sandbox/logs/events', 'body', '{'],
    ['POST', '/sandbox/authentications', 'result', { username: 'alice', result: 'maybe' }],
    ['POST', '/sandbox/migrations', 'nobody', { nobody: true }],
    ['POST', '/sandbox/migrations', 'device_id', { device_id: 'd', user_id: 'u' }],
  ])('%s %s answers one problem+json shape naming %s', async (method, path, field, body) => {
    const res = await control(method, path, body);
    expect(res.status).toBe(400);
    expect(res.type).toBe('application/problem+json');
    expect(res.json).toEqual(problemOf(400, field));
  });

  it('answers a bad GET /sandbox/logs/events query and unknown control paths as problem+json', async () => {
    const bad = await control('GET', '/sandbox/logs/events?scope=galaxy');
    expect(bad.type).toBe('application/problem+json');
    expect(bad.json).toEqual(problemOf(400, 'scope'));
    const missing = await control('GET', '/sandbox/nothing-here');
    expect(missing.status).toBe(404);
    expect(missing.type).toBe('application/problem+json');
    expect(missing.json).toMatchObject({ type: 'about:blank', status: 404, code: 40400 });
    const user = await control('POST', '/sandbox/devices/no-such-device/verify');
    expect(user.status).toBe(404);
    expect(user.type).toBe('application/problem+json');
    expect(user.json).toMatchObject({ status: 404, code: 40400 });
  });
});
