import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminCall,
  controlCall,
  deviceId,
  type Served,
  serveSandbox,
  userId as U,
} from './support/serve-module.ts';

const D1 = deviceId(1);
const D2 = deviceId(2);

// 31 Dec 2025 23:00 UTC: the first authentications fall in the previous month.
const START = Date.UTC(2025, 11, 31, 23, 0, 0);

describe('Admin API activity and active users', () => {
  let s: Served;
  const sec = () => s.clock.now() / 1000;
  const auth = (body: Record<string, unknown>) => controlCall(s, 'POST', '/sandbox/authentications', body);
  const stamps = { december: 0, jan1: 0, jan1b: 0, jan1c: 0, jan11: 0 };

  beforeAll(async () => {
    s = await serveSandbox({
      nowMs: START,
      scenario: {
        name: 'activity-test',
        users: [
          {
            user_id: U(1),
            username: 'ann',
            devices: [
              { device_id: D1, type: 'ios' },
              { device_id: D2, type: 'android' },
            ],
          },
          { user_id: U(2), username: 'ben', devices: [{ type: 'android' }] },
          { user_id: U(3), username: 'cy', devices: [{ type: 'ios' }] },
        ],
      },
    });
    stamps.december = sec();
    await auth({ user_id: U(1), result: 'success', device_id: D1, location: 'FR' });
    s.clock.advance(2 * 3_600_000); // 1 Jan 01:00
    stamps.jan1 = sec();
    await auth({ user_id: U(1), result: 'failure', device_id: D2, location: 'DE', reason: 'user denied' });
    s.clock.advance(60_000);
    stamps.jan1b = sec();
    await auth({ user_id: U(2), result: 'success', type: 'Transaction', location: 'DE' });
    s.clock.advance(60_000);
    stamps.jan1c = sec();
    await auth({ user_id: U(1), result: 'success', device_id: D1, location: 'FR' });
    // Ten days later for the ordering of active users.
    s.clock.advance(10 * 86_400_000);
    stamps.jan11 = sec();
    await auth({ user_id: U(3), result: 'success' });
  });
  afterAll(() => s.close());

  it('lists this month’s activity by default, ascending by timestamp', async () => {
    const r = await adminCall(s, 'GET', '/activity');
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ count: 4, total: 4, limit: 1000, offset: 0 });
    const ts = r.json.activity.map((a: { timestamp: number }) => a.timestamp);
    expect(ts).toEqual([stamps.jan1, stamps.jan1b, stamps.jan1c, stamps.jan11]);
    expect(r.json.activity[0]).toMatchObject({
      user_id: U(1),
      result: 'deny',
      factor: 'approve',
      type: 'Login',
      reason: 'user denied',
      login_device_location: 'DE',
      trusted_device: { id: D2, type: 'android' },
    });
  });

  it('reaches back with an explicit since within one month, and honours until', async () => {
    const r = await adminCall(s, 'GET', '/activity', { query: [['since', String(stamps.december)]] });
    expect(r.json.total).toBe(5);
    const until = await adminCall(s, 'GET', '/activity', {
      query: [
        ['since', String(stamps.december)],
        ['until', String(stamps.jan1b)],
      ],
    });
    expect(until.json.total).toBe(3);
  });

  it('filters by factor, result, reason (empty = none), type and location', async () => {
    const since = ['since', String(stamps.december)] as [string, string];
    const total = async (q: [string, string][]) =>
      (await adminCall(s, 'GET', '/activity', { query: [since, ...q] })).json.total;
    expect(await total([['result', 'deny']])).toBe(1);
    expect(await total([['result', 'allow']])).toBe(4);
    expect(await total([['reason', 'user denied']])).toBe(1);
    expect(await total([['reason', '']])).toBe(4);
    expect(await total([['type', 'Transaction']])).toBe(1);
    expect(await total([['location', 'FR']])).toBe(2);
    expect(await total([['factor', 'approve']])).toBe(5);
    expect(await total([['factor', 'sms']])).toBe(0);
  });

  it('returns no records but the total with limit=0, and pages with offset', async () => {
    const zero = await adminCall(s, 'GET', '/activity', { query: [['limit', '0']] });
    expect(zero.json).toMatchObject({ activity: [], count: 0, total: 4, limit: 0 });
    const page = await adminCall(s, 'GET', '/activity', {
      query: [
        ['limit', '1'],
        ['offset', '2'],
      ],
    });
    expect(page.json.activity[0].timestamp).toBe(stamps.jan1c);
  });

  it.each([
    ['since', () => String(Math.floor(START / 1000) - 40 * 86_400)],
    ['limit', () => '1001'],
    ['offset', () => '-1'],
    ['result', () => 'maybe'],
    ['until', () => '-3'],
  ])('refuses an invalid %s with 400', async (name, value) => {
    const r = await adminCall(s, 'GET', '/activity', { query: [[name, value()]] });
    expect(r.status).toBe(400);
    expect(r.json.detail).toContain(name);
  });

  it('lists a user’s activity from one month back by default, filtered by device', async () => {
    const r = await adminCall(s, 'GET', `/users/${U(1)}/activity`);
    expect(r.status).toBe(200);
    expect(r.json.count).toBe(3);
    expect(r.json.activity.map((a: { timestamp: number }) => a.timestamp)).toEqual([
      stamps.december,
      stamps.jan1,
      stamps.jan1c,
    ]);
    const d1 = await adminCall(s, 'GET', `/users/${U(1)}/activity`, { query: [['device_id', D1]] });
    expect(d1.json.count).toBe(2);
    const limited = await adminCall(s, 'GET', `/users/${U(1)}/activity`, { query: [['limit', '1']] });
    expect(limited.json.activity).toHaveLength(1);
  });

  it('refuses a user activity since older than one month (0 included), limit 0, and unknown users', async () => {
    expect((await adminCall(s, 'GET', `/users/${U(1)}/activity`, { query: [['since', '0']] })).status).toBe(
      400,
    );
    expect((await adminCall(s, 'GET', `/users/${U(1)}/activity`, { query: [['limit', '0']] })).status).toBe(
      400,
    );
    expect((await adminCall(s, 'GET', '/users/nobody/activity')).status).toBe(404);
  });

  it('lists users active this month with last_active_at, in either order', async () => {
    const asc = await adminCall(s, 'GET', '/active_users');
    expect(asc.status).toBe(200);
    expect(asc.json).toMatchObject({ count: 3, total: 3, limit: 1000, offset: 0 });
    expect(asc.json.users.map((u: { user_id: string }) => u.user_id)).toEqual([U(2), U(1), U(3)]);
    expect(asc.json.users[1].last_active_at).toBe(new Date(stamps.jan1c * 1000).toISOString());
    expect(asc.json.since).toBe(Date.UTC(2026, 0, 1) / 1000);
    expect(asc.json.until).toBe(Date.UTC(2026, 1, 1) / 1000 - 1);
    const desc = await adminCall(s, 'GET', '/active_users', { query: [['order', 'desc']] });
    expect(desc.json.users.map((u: { user_id: string }) => u.user_id)).toEqual([U(3), U(1), U(2)]);
    const window = await adminCall(s, 'GET', '/active_users', {
      query: [
        ['since', String(stamps.jan11)],
        ['until', String(stamps.jan11 + 10)],
      ],
    });
    expect(window.json.users.map((u: { user_id: string }) => u.user_id)).toEqual([U(3)]);
  });

  it('refuses active users since older than two years or until past the end of this month', async () => {
    const old = await adminCall(s, 'GET', '/active_users', {
      query: [['since', String(Math.floor(START / 1000) - 3 * 365 * 86_400)]],
    });
    expect(old.status).toBe(400);
    const late = await adminCall(s, 'GET', '/active_users', {
      query: [['until', String(Date.UTC(2026, 1, 2) / 1000)]],
    });
    expect(late.status).toBe(400);
    expect(late.json.detail).toContain('until');
  });
});
