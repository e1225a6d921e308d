import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminCall,
  type CallResult,
  controlCall,
  type Served,
  serveSandbox,
  signedCall,
} from './support/serve-module.ts';

const NOW = Date.UTC(2026, 0, 15, 12, 0, 0);
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const unix = (ms: number) => String(Math.floor(ms / 1000));

type Scope = 'service' | 'organization';

function logCall(
  s: Served,
  scope: Scope,
  init: {
    query?: [string, string][];
    rawQuery?: string;
    pathId?: string;
    id?: string;
    key?: string;
    dateMs?: number;
    dateHeader?: 'Date' | 'SVC-Date';
  } = {},
): Promise<CallResult> {
  const c = s.config.credentials;
  const ownId = scope === 'service' ? c.serviceId : c.organizationId;
  const ownKey = scope === 'service' ? c.serviceLogApiKey : c.organizationLogApiKey;
  return signedCall(s, {
    method: 'GET',
    path: `/logs/v1/${scope}/${init.pathId ?? ownId}`,
    ...(init.query ? { query: init.query } : {}),
    ...(init.rawQuery !== undefined ? { rawQuery: init.rawQuery } : {}),
    id: init.id ?? ownId,
    key: init.key ?? ownKey,
    dateHeader: init.dateHeader ?? 'Date',
    dateMs: init.dateMs ?? s.clock.now(),
  });
}

// biome-ignore lint/suspicious/noExplicitAny: NDJSON lines are free-form events
function lines(r: CallResult): any[] {
  return r.text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));
}

/** Stores an event with an exact created_at; `marker` tells it apart from the seeded history. */
function inject(
  s: Served,
  scope: Scope,
  createdAt: string,
  type = 'test.marker',
  fields: Record<string, unknown> = {},
) {
  return controlCall(s, 'POST', '/sandbox/logs/events', {
    scope,
    type,
    created_at: createdAt,
    fields: { marker: true, ...fields },
  });
}

describe('Log API ranges and timestamp formats', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox({ nowMs: NOW });
    await inject(s, 'service', iso(NOW - 30_000), 'in.last.minute');
    await inject(s, 'service', iso(NOW - 90_000), 'in.default.window');
    await inject(s, 'service', iso(NOW - 121_000), 'before.default.window');
    // Boundary events for start-inclusive / end-exclusive, nanosecond precision.
    await inject(s, 'service', '2026-01-15T11:00:00.000000000Z', 'at.start');
    await inject(s, 'service', '2026-01-15T11:29:59.999999999Z', 'just.before.end');
    await inject(s, 'service', '2026-01-15T11:30:00.000000000Z', 'at.end');
    await inject(s, 'service', '2026-01-15T10:59:59.999999999Z', 'just.before.start');
  });
  afterAll(() => s.close());

  const types = (r: CallResult) =>
    lines(r)
      .filter((e) => e.marker === true)
      .map((e) => e.type as string)
      .sort();

  it('defaults to end = now − 1 min and start = end − 1 min, as NDJSON', async () => {
    const r = await logCall(s, 'service');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/x-ndjson');
    expect(types(r)).toEqual(['in.default.window']);
    // Nothing outside the window, seeded history included.
    for (const e of lines(r)) {
      const t = Date.parse(e.created_at);
      expect(t).toBeGreaterThanOrEqual(NOW - 120_000);
      expect(t).toBeLessThan(NOW - 60_000);
    }
  });

  it('includes the start instant and excludes the end instant', async () => {
    const r = await logCall(s, 'service', {
      query: [
        ['start', '2026-01-15T11:00:00Z'],
        ['end', '2026-01-15T11:30:00Z'],
      ],
    });
    expect(types(r)).toEqual(['at.start', 'just.before.end']);
  });

  it.each([
    ['Unix seconds', unix(Date.parse('2026-01-15T11:00:00Z')), unix(Date.parse('2026-01-15T11:30:00Z'))],
    ['ISO 8601 without offset (UTC)', '2026-01-15T11:00:00', '2026-01-15T11:30:00'],
    ['ISO 8601 with Z', '2026-01-15T11:00:00Z', '2026-01-15T11:30:00Z'],
    ['ISO 8601 with +01:00', '2026-01-15T12:00:00+01:00', '2026-01-15T12:30:00+01:00'],
    ['ISO 8601 with -01:00', '2026-01-15T10:00:00-01:00', '2026-01-15T10:30:00-01:00'],
  ])('accepts %s', async (_label, start, end) => {
    const r = await logCall(s, 'service', {
      query: [
        ['start', start],
        ['end', end],
      ],
    });
    expect(r.status).toBe(200);
    expect(types(r)).toEqual(['at.start', 'just.before.end']);
  });

  it('accepts an offset whose + arrives undecoded on the wire', async () => {
    const r = await logCall(s, 'service', {
      rawQuery: 'start=2026-01-15T12:00:00+01:00&end=2026-01-15T12:30:00+01:00',
    });
    expect(r.status).toBe(200);
    expect(types(r)).toEqual(['at.start', 'just.before.end']);
  });

  it('accepts a span of exactly 1 s and exactly 1 h, and start exactly 30 days back', async () => {
    const oneSecond = await logCall(s, 'service', {
      query: [
        ['start', '2026-01-15T11:00:00Z'],
        ['end', '2026-01-15T11:00:01Z'],
      ],
    });
    expect(types(oneSecond)).toEqual(['at.start']);
    const oneHour = await logCall(s, 'service', {
      query: [
        ['start', '2026-01-15T10:30:00Z'],
        ['end', '2026-01-15T11:30:00Z'],
      ],
    });
    expect(types(oneHour)).toEqual(['at.start', 'just.before.end', 'just.before.start']);
    const thirtyDays = await logCall(s, 'service', {
      query: [
        ['start', unix(NOW - 30 * 86_400_000)],
        ['end', unix(NOW - 30 * 86_400_000 + 60_000)],
      ],
    });
    expect(thirtyDays.status).toBe(200);
  });

  it.each([
    [
      'start more than 30 days back',
      unix(NOW - 30 * 86_400_000 - 1000),
      unix(NOW - 30 * 86_400_000 + 60_000),
      'start',
    ],
    ['end within the last minute', unix(NOW - 120_000), unix(NOW - 59_000), 'end'],
    ['end in the future', unix(NOW - 60_000), unix(NOW + 60_000), 'end'],
    ['a span under 1 s', '2026-01-15T11:00:00Z', '2026-01-15T11:00:00.5Z', 'range'],
    ['an empty span', '2026-01-15T11:00:00Z', '2026-01-15T11:00:00Z', 'range'],
    ['start after end', '2026-01-15T11:10:00Z', '2026-01-15T11:00:00Z', 'range'],
    ['a span over 1 h', '2026-01-15T10:00:00Z', '2026-01-15T11:00:01Z', 'range'],
    ['a malformed start', 'yesterday', '2026-01-15T11:00:00Z', 'start'],
    ['an impossible date', '2026-02-30T10:00:00Z', '2026-01-15T11:00:00Z', 'start'],
    ['an impossible hour', '2026-01-15T10:00:00Z', '2026-01-15T25:00:00Z', 'end'],
    ['hour 24 (no rollover to the next day)', '2026-01-14T23:30:00Z', '2026-01-14T24:00:00Z', 'end'],
    ['February 30th as end', '2026-01-15T10:00:00Z', '2024-02-30T00:00:00Z', 'end'],
  ])('answers 400 / 40000 for %s', async (_label, start, end, named) => {
    const r = await logCall(s, 'service', {
      query: [
        ['start', start],
        ['end', end],
      ],
    });
    expect(r.status).toBe(400);
    expect(r.headers['content-type']).toMatch(/application\/json/);
    expect(r.json).toMatchObject({ error: true, code: 40000 });
    expect(r.json.detail).toContain(named);
  });

  it('answers 400 / 40000 naming a repeated start rather than picking one', async () => {
    const r = await logCall(s, 'service', {
      query: [
        ['start', '2026-01-15T11:00:00Z'],
        ['start', '2026-01-15T11:30:00Z'],
        ['end', '2026-01-15T11:40:00Z'],
      ],
    });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: true, code: 40000, detail: 'start: must be given once' });
  });

  it('defaults end when only start is given, applying the span rule to it', async () => {
    const ok = await logCall(s, 'service', { query: [['start', unix(NOW - 30 * 60_000)]] });
    expect(ok.status).toBe(200);
    // 11:30:00 up to now − 1 min: the event in the last minute stays out.
    expect(types(ok)).toEqual(['at.end', 'before.default.window', 'in.default.window']);
    const tooLong = await logCall(s, 'service', { query: [['start', unix(NOW - 2 * 3_600_000)]] });
    expect(tooLong.status).toBe(400);
  });
});

describe('Log API authentication and resources', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox({ nowMs: NOW, scenario: { name: 'logs-auth', users: [] } });
  });
  afterAll(() => s.close());

  it('takes the service key on the service path and the organization key on the organization path', async () => {
    expect((await logCall(s, 'service')).status).toBe(200);
    expect((await logCall(s, 'organization')).status).toBe(200);
    const c = s.config.credentials;
    const serviceKeyOnOrg = await logCall(s, 'organization', { id: c.serviceId, key: c.serviceLogApiKey });
    expect(serviceKeyOnOrg.status).toBe(401);
    const orgKeyOnService = await logCall(s, 'service', { key: c.organizationLogApiKey });
    expect(orgKeyOnService.status).toBe(401);
    expect(orgKeyOnService.json.code).toBe(40100);
  });

  it('answers 401 / 40100 with the canonical string, never the key, on a bad signature', async () => {
    const r = await logCall(s, 'service', { key: 'wrong-key', query: [['start', unix(NOW - 120_000)]] });
    expect(r.status).toBe(401);
    expect(r.json).toMatchObject({ error: true, code: 40100 });
    expect(r.json.detail).toContain(
      `GET\n${s.host}\n/logs/v1/service/${s.config.credentials.serviceId}\nstart=${unix(NOW - 120_000)}`,
    );
    expect(r.text).not.toContain(s.config.credentials.serviceLogApiKey);
  });

  it('signs the Date header: SVC-Date or a skewed Date is refused', async () => {
    expect((await logCall(s, 'service', { dateHeader: 'SVC-Date' })).status).toBe(401);
    expect((await logCall(s, 'service', { dateMs: NOW - 301_000 })).status).toBe(401);
    expect((await logCall(s, 'service', { dateMs: NOW + 299_000 })).status).toBe(200);
  });

  it('answers 400 for a malformed path ID and 401 for one that does not match the credentials', async () => {
    const malformed = await logCall(s, 'service', { pathId: 'not-an-id!' });
    expect(malformed.status).toBe(400);
    expect(malformed.json.code).toBe(40000);
    expect(malformed.json.detail).toContain('service_id');
    const other = await logCall(s, 'service', { pathId: '11111111-2222-4333-8444-555555555555' });
    expect(other.status).toBe(401);
    expect(other.json.code).toBe(40100);
    const otherOrg = await logCall(s, 'organization', { pathId: '11111111-2222-4333-8444-555555555555' });
    expect(otherOrg.status).toBe(401);
  });

  it('answers 405 for another method and 404 for an unknown path, in the envelope', async () => {
    const c = s.config.credentials;
    const post = await signedCall(s, {
      method: 'POST',
      path: `/logs/v1/service/${c.serviceId}`,
      body: '{}',
      id: c.serviceId,
      key: c.serviceLogApiKey,
      dateHeader: 'Date',
      dateMs: NOW,
    });
    expect(post.status).toBe(405);
    expect(post.json).toMatchObject({ error: true, code: 40500 });
    const unknown = await logCall(s, 'service', { pathId: `${c.serviceId}/extra` });
    expect(unknown.status).toBe(404);
    expect(unknown.json.code).toBe(40400);
  });

  it('answers 429 with Retry-After over its configured rate limit (off by default)', async () => {
    const set = await controlCall(s, 'PUT', '/sandbox/logs/rate-limit', {
      max_requests: 2,
      window_ms: 10_000,
    });
    expect(set.status).toBe(200);
    try {
      expect((await logCall(s, 'service')).status).toBe(200);
      expect((await logCall(s, 'organization')).status).toBe(200);
      const limited = await logCall(s, 'service');
      expect(limited.status).toBe(429);
      expect(limited.json).toMatchObject({ error: true, code: 42900 });
      expect(limited.headers['retry-after']).toBe('10');
      s.clock.advance(10_000);
      expect((await logCall(s, 'service')).status).toBe(200);
    } finally {
      await controlCall(s, 'PUT', '/sandbox/logs/rate-limit', { max_requests: null });
    }
    for (let i = 0; i < 5; i++) expect((await logCall(s, 'service')).status).toBe(200);
  });
});

describe('Log API events from what happens in the sandbox', () => {
  let s: Served;
  const U1 = '00000000-0000-4000-8000-000000000001';
  const D1 = 'dddddddd-0000-4000-8000-000000000001';
  const D2 = 'dddddddd-0000-4000-8000-000000000002';
  beforeAll(async () => {
    s = await serveSandbox({
      nowMs: NOW,
      scenario: {
        name: 'logs-events',
        users: [
          {
            user_id: U1,
            username: 'eve',
            devices: [
              { device_id: D1, type: 'ios' },
              { device_id: D2, type: 'android', enrolled_days_ago: 3 },
            ],
          },
        ],
      },
    });
  });
  afterAll(() => s.close());

  const window = (fromMs: number, toMs: number): [string, string][] => [
    ['start', iso(fromMs)],
    ['end', iso(toMs)],
  ];

  it('streams Admin operations and simulated authentications with the common fields', async () => {
    const opStart = s.clock.now();
    await adminCall(s, 'PUT', `/users/${U1}`, { body: { display_name: 'Eve Example', max_attempts: 10 } });
    await adminCall(s, 'DELETE', `/devices/${D2}`);
    const created = await adminCall(s, 'POST', '/users', { body: { username: 'late-joiner' } });
    await controlCall(s, 'POST', `/sandbox/enrollments/${created.json.enrollment_id}/complete`, {});
    await controlCall(s, 'POST', '/sandbox/authentications', {
      user_id: U1,
      result: 'success',
      ip: '203.0.113.9',
    });
    await controlCall(s, 'POST', '/sandbox/authentications', {
      user_id: U1,
      result: 'failure',
      factor: 'passcode',
      totp_reused: true,
      reason: 'totp reused',
    });
    s.clock.advance(2 * 60_000);

    const r = await logCall(s, 'service', { query: window(opStart - 1000, s.clock.now() - 60_000) });
    expect(r.status).toBe(200);
    const events = lines(r);
    const byType = (t: string) => events.filter((e) => e.type === t);
    expect(byType('user.updated').find((e) => e.user_id === U1)).toMatchObject({
      display_name: 'Eve Example',
      max_attempts: '10',
      username: 'eve',
      status: 'enabled',
      allowed_factors: expect.any(Array),
    });
    expect(byType('device.updated').find((e) => e.device_id === D2)).toMatchObject({
      enrolled: false,
      archived_at: Math.floor(opStart / 1000),
      user_id: U1,
    });
    expect(byType('device.enrollment.started')[0]).toMatchObject({
      device_type: 'sdk',
      enrollment_id: created.json.enrollment_id,
    });
    expect(byType('device.enrollment.succeeded')[0]).toMatchObject({
      enrollment_id: created.json.enrollment_id,
    });
    expect(byType('device.created')).toHaveLength(1);
    expect(byType('authentication.started')).toHaveLength(2);
    expect(byType('authentication.succeeded')[0]).toMatchObject({
      user_id: U1,
      status: 'allow',
      login_device_ip_address: '203.0.113.9',
      device_id: D1,
    });
    expect(byType('authentication.failed')[0]).toMatchObject({
      user_id: U1,
      status: 'deny',
      reason: 'totp reused',
    });
    expect(byType('authentication.totp.reused')[0]).toMatchObject({
      user_id: U1,
      source_device_kind: 'mobile_totp',
    });

    const ids = new Set(events.map((e) => e.event_id));
    expect(ids.size).toBe(events.length);
    for (const e of events) {
      expect(e.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$/);
      expect(e.service_id).toBe(s.config.credentials.serviceId);
      expect(typeof e.client_ip_address).toBe('string');
      expect(typeof e.client_port).toBe('string');
    }
    // The events of one request carry the caller's address.
    expect(byType('authentication.started')[0].client_ip_address).toBe('127.0.0.1');
  });

  it('has seeded history: device.created of recent enrollments and admin-dashboard events', async () => {
    const enrolledMs = Math.floor((NOW - 3 * 86_400_000) / 1000) * 1000;
    const r = await logCall(s, 'service', { query: window(enrolledMs - 1000, enrolledMs + 1000) });
    expect(lines(r).map((e) => e.type)).toEqual(['device.created']);

    // Tile the three hours before the start with one-hour windows, as a client polls.
    const org: Record<string, unknown>[] = [];
    const svc: Record<string, unknown>[] = [];
    for (let h = 3; h >= 1; h--) {
      const q = window(NOW - h * 3_600_000, NOW - (h - 1) * 3_600_000 - 60_000);
      org.push(...lines(await logCall(s, 'organization', { query: q })));
      svc.push(...lines(await logCall(s, 'service', { query: q })));
    }
    const orgTypes = new Set(org.map((e) => e.type));
    expect(orgTypes).toContain('admin-dashboard-user.login.succeeded');
    expect(orgTypes).toContain('admin-dashboard-user.login.failed');
    expect(orgTypes).toContain('admin-dashboard.organization.secrets.retrieved');
    for (const e of org) expect(e.organization_id).toBe(s.config.credentials.organizationId);
    expect(svc.map((e) => e.type)).toContain('admin-dashboard.service.accessed');
    expect(svc.map((e) => e.type)).toContain('admin-dashboard.user.updated');
    // Both precisions occur, so clients must parse both.
    const created = org.map((e) => e.created_at as string);
    expect(created.some((c) => /T\d{2}:\d{2}:\d{2}Z$/.test(c))).toBe(true);
    expect(created.some((c) => /\.\d{9}Z$/.test(c))).toBe(true);
  });

  it('returns events in arbitrary order, not sorted by created_at', async () => {
    const base = Date.parse('2026-01-15T09:00:00Z');
    for (let i = 0; i < 30; i++) await inject(s, 'service', iso(base + i * 1000), 'ordered.marker', { i });
    const q = window(base, base + 60_000);
    const orders: string[] = [];
    for (let k = 0; k < 3; k++) {
      const r = await logCall(s, 'service', { query: q });
      const seq = lines(r).map((e) => e.i as number);
      expect([...seq].sort((a, b) => a - b)).toEqual([...Array(30).keys()]);
      orders.push(seq.join(','));
    }
    expect(orders.some((o) => o !== [...Array(30).keys()].join(','))).toBe(true);
    expect(new Set(orders).size).toBeGreaterThan(1);
  });

  it('streams the body (chunked, one line at a time)', async () => {
    const base = Date.parse('2026-01-15T09:00:00Z');
    const r = await logCall(s, 'service', { query: window(base, base + 60_000) });
    expect(r.headers['transfer-encoding']).toBe('chunked');
    expect(r.headers['content-length']).toBeUndefined();
  });

  it('ends a cut stream with a non-JSON Error line (sandbox cutStream fault)', async () => {
    const put = await controlCall(s, 'PUT', '/sandbox/faults', {
      rules: [{ route: 'GET /logs/v1/*', cutStream: { afterLines: 5 }, times: 1 }],
    });
    expect(put.status).toBe(200);
    const base = Date.parse('2026-01-15T09:00:00Z');
    const r = await logCall(s, 'service', { query: window(base, base + 60_000) });
    const raw = r.text.split('\n').filter((l) => l !== '');
    expect(raw).toHaveLength(6);
    for (const l of raw.slice(0, 5)) expect(() => JSON.parse(l)).not.toThrow();
    expect(() => JSON.parse(raw[5]!)).toThrow();
    expect(raw[5]).toContain('Error');
    // The fault was for one request: the next read of the window is whole.
    expect(lines(await logCall(s, 'service', { query: window(base, base + 60_000) }))).toHaveLength(30);
  });
});
