import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminCall,
  controlCall,
  deviceId as D,
  type Served,
  serveSandbox,
  serviceEvents,
  userId as U,
} from './support/serve-module.ts';

const scenario = {
  name: 'devices-test',
  users: [
    {
      user_id: U(1),
      username: 'two-phones',
      devices: [
        { device_id: D(1), type: 'ios' as const, display_name: 'Work iPhone' },
        { device_id: D(2), type: 'android' as const },
        { device_id: D(3), type: 'sms' as const, number: '+14155550101', enrolled: false },
      ],
    },
    { user_id: U(2), username: 'one-phone', devices: [{ device_id: D(4), type: 'android' as const }] },
    { user_id: U(3), username: 'codes', devices: [{ device_id: D(5), type: 'ios' as const }] },
  ],
};

describe('Admin API devices', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox({ scenario });
  });
  afterAll(() => s.close());

  const ids = (r: { json: { devices: { device_id: string }[] } }) => r.json.devices.map((d) => d.device_id);

  it('lists a user’s devices with status and type filters (comma-separated)', async () => {
    const all = await adminCall(s, 'GET', `/users/${U(1)}/devices`);
    expect(all.json.count).toBe(3);
    expect(ids(all)).toEqual([D(1), D(2), D(3)]);
    const mobile = await adminCall(s, 'GET', `/users/${U(1)}/devices`, { query: [['type', 'ios,android']] });
    expect(ids(mobile)).toEqual([D(1), D(2)]);
    const unenrolled = await adminCall(s, 'GET', `/users/${U(1)}/devices`, {
      query: [['status', 'unenrolled']],
    });
    expect(ids(unenrolled)).toEqual([D(3)]);
    const bad = await adminCall(s, 'GET', `/users/${U(1)}/devices`, { query: [['type', 'fido']] });
    expect(bad.status).toBe(400);
    expect((await adminCall(s, 'GET', '/users/nobody/devices')).status).toBe(404);
  });

  it('lists devices service-wide with filters and pagination', async () => {
    // The settled GET /devices: docs/vendor-api.md#admin-endpoints.
    const page = await adminCall(s, 'GET', '/devices', {
      query: [
        ['limit', '2'],
        ['offset', '1'],
      ],
    });
    expect(page.json).toMatchObject({ count: 2, total: 5, limit: 2, offset: 1 });
    expect(ids(page)).toEqual([D(2), D(3)]);
    const defaults = await adminCall(s, 'GET', '/devices');
    expect(defaults.json).toMatchObject({ limit: 25, offset: 0, total: 5 });
    const byUser = await adminCall(s, 'GET', '/devices', {
      query: [
        ['user_id', U(1)],
        ['status', 'enrolled'],
        ['type', 'android'],
      ],
    });
    expect(ids(byUser)).toEqual([D(2)]);
    expect((await adminCall(s, 'GET', '/devices', { query: [['limit', '101']] })).status).toBe(400);
  });

  it('gets one device with its fields, 404 when unknown', async () => {
    const d = await adminCall(s, 'GET', `/devices/${D(1)}`);
    expect(d.json).toMatchObject({
      device_id: D(1),
      user_id: U(1),
      type: 'ios',
      display_name: 'Work iPhone',
      enrolled: true,
      version_supported: true,
    });
    expect(d.json.capabilities).toContain('approve');
    expect(d.json.sdk_lock_config_type).toBeUndefined();
    const missing = await adminCall(s, 'GET', '/devices/nope');
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(40400);
  });

  it('renames a device, 304 when unchanged, 400 outside the display_name restriction', async () => {
    const r = await adminCall(s, 'PUT', `/devices/${D(2)}`, { body: { display_name: 'Pixel (old) 7/8 +x' } });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ display_name: 'Pixel (old) 7/8 +x' });
    expect(
      (await adminCall(s, 'PUT', `/devices/${D(2)}`, { body: { display_name: 'Pixel (old) 7/8 +x' } }))
        .status,
    ).toBe(304);
    expect((await adminCall(s, 'PUT', `/devices/${D(2)}`, { body: {} })).status).toBe(304);
    for (const bad of ['under_score', 'bang!', 'a'.repeat(101)]) {
      const res = await adminCall(s, 'PUT', `/devices/${D(2)}`, { body: { display_name: bad } });
      expect(res.status, bad).toBe(400);
      expect(res.json.detail).toContain('display_name');
    }
    const updated = await serviceEvents(s, 'device.updated');
    expect(updated.some((e) => e.device_id === D(2) && e.display_name === 'Pixel (old) 7/8 +x')).toBe(true);
  });

  it('archives on DELETE with archived_at; archived devices answer 410 naming the device', async () => {
    const del = await adminCall(s, 'DELETE', `/devices/${D(1)}`);
    expect(del.status).toBe(200);
    expect(del.json).toEqual({ result: 'success', archived_at: s.clock.now() / 1000 });
    const d = await adminCall(s, 'GET', `/devices/${D(1)}`);
    expect(d.json).toMatchObject({ enrolled: false, archived_at: s.clock.now() / 1000 });
    const archived = await adminCall(s, 'GET', `/users/${U(1)}/devices`, { query: [['status', 'archived']] });
    expect(ids(archived)).toEqual([D(1)]);
    for (const r of [
      await adminCall(s, 'DELETE', `/devices/${D(1)}`),
      await adminCall(s, 'PUT', `/devices/${D(1)}`, { body: { display_name: 'again' } }),
    ]) {
      expect(r.status).toBe(410);
      expect(r.json.code).toBe(41000);
      expect(r.json.detail).toContain('device');
      expect(r.json.detail).toContain(D(1));
    }
    const user = await adminCall(s, 'GET', `/users/${U(1)}`);
    expect(user.json.status).toBe('enabled');
    const updated = await serviceEvents(s, 'device.updated');
    expect(updated.find((e) => e.device_id === D(1) && e.archived_at !== undefined)).toMatchObject({
      enrolled: false,
      user_id: U(1),
    });
  });

  it('answers success_2fa_disabled when the only enrolled device goes, and disables the user', async () => {
    const del = await adminCall(s, 'DELETE', `/devices/${D(4)}`);
    expect(del.json.result).toBe('success_2fa_disabled');
    expect((await adminCall(s, 'GET', `/users/${U(2)}`)).json.status).toBe('disabled');
  });
});

describe('Admin API enrollments', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox({ scenario });
  });
  afterAll(() => s.close());

  it('starts an enrollment for an existing user and completes it through the control API', async () => {
    const r = await adminCall(s, 'POST', `/users/${U(2)}/devices`, { body: { valid_secs: 600 } });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ user_id: U(2), username: 'one-phone' });
    expect(typeof r.json.activation_qrcode_url).toBe('string');
    const done = await controlCall(s, 'POST', `/sandbox/enrollments/${r.json.enrollment_id}/complete`, {
      type: 'ios',
      display_name: 'New iPhone',
    });
    expect(done.status).toBe(200);
    const deviceId = done.json.device.device_id;
    const list = await adminCall(s, 'GET', `/users/${U(2)}/enrollments`);
    expect(list.json.enrollments[0]).toMatchObject({
      enrollment_id: r.json.enrollment_id,
      status: 'success',
      enrolled_device_id: deviceId,
    });
    const device = await adminCall(s, 'GET', `/devices/${deviceId}`);
    expect(device.json).toMatchObject({ enrolled: true, type: 'ios', display_name: 'New iPhone' });
    const succeeded = await serviceEvents(s, 'device.enrollment.succeeded');
    expect(succeeded.find((e) => e.enrollment_id === r.json.enrollment_id)).toMatchObject({
      device_type: 'sdk',
      device_id: deviceId,
      user_id: U(2),
    });
    const created = await serviceEvents(s, 'device.created');
    expect(created.find((e) => e.device_id === deviceId)).toMatchObject({
      enrolled: true,
      enrolled_at: s.clock.now() / 1000,
      sdk_lock_config_type: 'none',
    });
    const again = await controlCall(s, 'POST', `/sandbox/enrollments/${r.json.enrollment_id}/complete`, {});
    expect(again.status).toBe(400);
    expect(again.headers['content-type']).toMatch(/problem\+json/);
  });

  it('starts an enrollment through POST /devices with user_id in the body', async () => {
    const r = await adminCall(s, 'POST', '/devices', { body: { user_id: U(3) } });
    expect(r.status).toBe(200);
    expect(r.json.user_id).toBe(U(3));
    const missing = await adminCall(s, 'POST', '/devices', { body: {} });
    expect(missing.status).toBe(400);
    expect(missing.json.detail).toContain('user_id');
    expect((await adminCall(s, 'POST', '/devices', { body: { user_id: 'nobody' } })).status).toBe(404);
  });

  it('reports a pending enrollment past expires_at as expired; it can neither complete nor be deleted', async () => {
    const r = await adminCall(s, 'POST', `/users/${U(3)}/devices`, { body: { valid_secs: 60 } });
    s.clock.advance(61_000);
    const got = await adminCall(s, 'GET', `/enrollments/${r.json.enrollment_id}`);
    expect(got.json.status).toBe('expired');
    expect(
      (await controlCall(s, 'POST', `/sandbox/enrollments/${r.json.enrollment_id}/complete`, {})).status,
    ).toBe(400);
    expect((await adminCall(s, 'DELETE', `/enrollments/${r.json.enrollment_id}`)).status).toBe(400);
  });

  it('invalidates a pending enrollment on DELETE', async () => {
    const r = await adminCall(s, 'POST', `/users/${U(3)}/devices`, {});
    const del = await adminCall(s, 'DELETE', `/enrollments/enrollment_id/${r.json.enrollment_id}`);
    expect(del.status).toBe(200);
    expect((await adminCall(s, 'GET', `/enrollments/${r.json.enrollment_id}`)).json.status).toBe('archived');
    const invalidated = await serviceEvents(s, 'device.enrollment.invalidated');
    expect(invalidated.some((e) => e.enrollment_id === r.json.enrollment_id)).toBe(true);
  });

  it('verifies an SMS device through the control API, enrolling it', async () => {
    const r = await adminCall(s, 'POST', '/users', {
      body: { username: 'sms-only', phone_number: '+33612345678' },
    });
    expect((await adminCall(s, 'GET', `/users/${r.json.user_id}`)).json.status).toBe('disabled');
    const v = await controlCall(s, 'POST', `/sandbox/devices/${r.json.device_id}/verify`);
    expect(v.status).toBe(200);
    expect(v.json.device).toMatchObject({ enrolled: true, type: 'sms' });
    expect(v.json.user.status).toBe('enabled');
  });

  it('refuses new devices for an archived user with 410', async () => {
    const r = await adminCall(s, 'POST', '/users', { body: { username: 'gone-soon' } });
    await adminCall(s, 'DELETE', `/users/${r.json.user_id}`);
    const add = await adminCall(s, 'POST', `/users/${r.json.user_id}/devices`, { body: {} });
    expect(add.status).toBe(410);
    // Archiving the user invalidated its pending enrollment.
    expect((await adminCall(s, 'GET', `/enrollments/${r.json.enrollment_id}`)).json.status).toBe('archived');
  });
});

describe('Admin API backup codes and one-time codes', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox({ scenario });
  });
  afterAll(() => s.close());

  const authWith = (passcode: string) =>
    controlCall(s, 'POST', '/sandbox/authentications', { user_id: U(3), passcode });

  it('creates 10 single-use backup codes of 10 digits by default, spaced by 4 from the left', async () => {
    const r = await adminCall(s, 'POST', `/users/${U(3)}/backup_codes`, { body: {} });
    expect(r.status).toBe(200);
    expect(r.json.backup_codes).toHaveLength(10);
    for (const c of r.json.backup_codes) {
      expect(c.code).toMatch(/^\d{4} \d{4} \d{2}$/);
      expect(c.remaining_uses).toBe(1);
    }
    const got = await adminCall(s, 'GET', `/users/${U(3)}/backup_codes`);
    expect(got.json.backup_codes).toEqual(r.json.backup_codes);
  });

  it('replaces the whole list, and honours count, length and unlimited reuse', async () => {
    const r = await adminCall(s, 'POST', `/users/${U(3)}/backup_codes`, {
      body: { count: 2, length: 8, reuse_count: 0 },
    });
    expect(r.json.backup_codes).toHaveLength(2);
    expect(r.json.backup_codes[0]).toEqual({
      code: expect.stringMatching(/^\d{4} \d{4}$/),
      infinite_uses: true,
    });
    expect((await adminCall(s, 'GET', `/users/${U(3)}/backup_codes`)).json.backup_codes).toHaveLength(2);
    for (const body of [{ count: 11 }, { count: 0 }, { length: 7 }, { length: 21 }, { reuse_count: -1 }]) {
      expect(
        (await adminCall(s, 'POST', `/users/${U(3)}/backup_codes`, { body })).status,
        JSON.stringify(body),
      ).toBe(400);
    }
    expect((await adminCall(s, 'GET', '/users/nobody/backup_codes')).status).toBe(404);
  });

  it('consumes a finite backup code when it is used', async () => {
    const r = await adminCall(s, 'POST', `/users/${U(3)}/backup_codes`, {
      body: { count: 1, reuse_count: 2 },
    });
    const code = r.json.backup_codes[0].code as string;
    expect((await authWith(code)).json).toMatchObject({
      result: 'allow',
      activity: { reason: 'backup_code' },
    });
    const left = await adminCall(s, 'GET', `/users/${U(3)}/backup_codes`);
    expect(left.json.backup_codes[0].remaining_uses).toBe(1);
    expect((await authWith(code.replace(/ /g, ''))).json.result).toBe('allow');
    expect((await authWith(code)).json.result).toBe('deny');
    expect((await adminCall(s, 'GET', `/users/${U(3)}/backup_codes`)).json.backup_codes).toEqual([]);
  });

  it('creates a 6-digit one-time code valid 180 s by default', async () => {
    const r = await adminCall(s, 'POST', `/users/${U(3)}/one_time_code`, { body: {} });
    expect(r.status).toBe(200);
    expect(r.json.one_time_code).toMatch(/^\d{4} \d{2}$/);
    expect(r.json.expiration).toBe(s.clock.now() / 1000 + 180);
    const long = await adminCall(s, 'POST', `/users/${U(3)}/one_time_code`, {
      body: { length: 20, valid_secs: 604_800 },
    });
    expect(long.json.one_time_code).toMatch(/^\d{4} \d{4} \d{4} \d{4} \d{4}$/);
    for (const body of [{ length: 3 }, { length: 21 }, { valid_secs: 59 }, { valid_secs: 604_801 }]) {
      expect((await adminCall(s, 'POST', `/users/${U(3)}/one_time_code`, { body })).status).toBe(400);
    }
  });

  it('keeps one active one-time code per user: a new one invalidates the earlier', async () => {
    const first = (await adminCall(s, 'POST', `/users/${U(3)}/one_time_code`, { body: {} })).json
      .one_time_code;
    const second = (await adminCall(s, 'POST', `/users/${U(3)}/one_time_code`, { body: {} })).json
      .one_time_code;
    expect((await authWith(first)).json.result).toBe('deny');
    const ok = await authWith(second);
    expect(ok.json).toMatchObject({
      result: 'allow',
      activity: { factor: 'passcode', reason: 'one_time_code' },
    });
    // Single use.
    expect((await authWith(second)).json.result).toBe('deny');
  });

  it('refuses an expired one-time code', async () => {
    const code = (await adminCall(s, 'POST', `/users/${U(3)}/one_time_code`, { body: { valid_secs: 60 } }))
      .json.one_time_code;
    s.clock.advance(61_000);
    expect((await authWith(code)).json).toMatchObject({
      result: 'deny',
      activity: { reason: 'one_time_code expired' },
    });
  });
});

describe('Admin API seeded statuses follow the status table', () => {
  it('unenrolls the devices of a seeded disabled user and disables a seeded enabled user without devices', async () => {
    const s = await serveSandbox({
      scenario: {
        name: 'seeded-status',
        users: [
          { user_id: U(1), username: 'off', status: 'disabled', devices: [{ device_id: D(1), type: 'ios' }] },
          { user_id: U(2), username: 'empty', status: 'enabled' },
          {
            user_id: U(3),
            username: 'locked',
            status: 'locked_out',
            failed_attempts: 16,
            devices: [{ type: 'ios' }],
          },
        ],
      },
    });
    try {
      expect((await adminCall(s, 'GET', `/devices/${D(1)}`)).json.enrolled).toBe(false);
      expect((await adminCall(s, 'GET', `/users/${U(2)}`)).json.status).toBe('disabled');
      expect((await adminCall(s, 'GET', `/users/${U(3)}`)).json).toMatchObject({
        status: 'locked_out',
        failed_attempts: 16,
      });
      // A reset brings the scenario back after changes.
      await adminCall(s, 'PUT', `/users/${U(3)}`, { body: { status: 'enabled' } });
      expect((await controlCall(s, 'POST', '/sandbox/reset')).status).toBe(200);
      expect((await adminCall(s, 'GET', `/users/${U(3)}`)).json.status).toBe('locked_out');
    } finally {
      await s.close();
    }
  });
});
