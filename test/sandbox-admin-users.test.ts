import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminCall,
  controlCall,
  plainCall,
  type Served,
  serveSandbox,
  serviceEvents,
  userId as U,
} from './support/serve-module.ts';

const scenario = {
  name: 'users-test',
  users: [
    {
      user_id: U(1),
      username: 'alice.smith',
      display_name: 'Alice Smith',
      devices: [{ type: 'ios' as const }],
    },
    {
      user_id: U(2),
      username: 'Bob_Jones',
      display_name: 'bob jones',
      allowed_factors: ['approve', 'sms'],
      devices: [{ type: 'android' as const }],
    },
    {
      user_id: U(3),
      username: 'carol',
      display_name: 'Carol ALICE-Lee',
      status: 'bypass' as const,
      devices: [],
    },
    { user_id: U(4), username: 'dave', devices: [{ type: 'sms' as const, number: '+14155550100' }] },
    { user_id: U(5), username: 'erin', devices: [{ type: 'ios' as const }] },
  ],
};

describe('Admin API users lookup', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox({ scenario });
  });
  afterAll(() => s.close());

  const names = async (query: [string, string][]) => {
    const r = await adminCall(s, 'GET', '/users', { query });
    expect(r.status).toBe(200);
    return (r.json.users as { username: string }[]).map((u) => u.username);
  };

  it('matches username partially and case-sensitively', async () => {
    expect(await names([['username', 'ice.']])).toEqual(['alice.smith']);
    expect(await names([['username', 'bob']])).toEqual([]);
    expect(await names([['username', 'Bob']])).toEqual(['Bob_Jones']);
  });

  it('matches display_name partially and case-insensitively', async () => {
    expect(await names([['display_name', 'alice']])).toEqual(['alice.smith', 'carol']);
    expect(await names([['display_name', 'BOB J']])).toEqual(['Bob_Jones']);
  });

  it('requires every listed allowed factor', async () => {
    expect(await names([['allowed_factors', 'sms,approve']])).toHaveLength(5);
    expect(await names([['allowed_factors', 'mobile_totp,approve']])).toEqual([
      'alice.smith',
      'carol',
      'dave',
      'erin',
    ]);
  });

  it('filters by status and service_defined_username, combining filters with AND', async () => {
    expect(await names([['status', 'bypass']])).toEqual(['carol']);
    expect(await names([['service_defined_username', 'false']])).toEqual([]);
    expect(
      await names([
        ['status', 'enabled'],
        ['display_name', 'alice'],
      ]),
    ).toEqual(['alice.smith']);
  });

  it('sorts by username, display_name and order', async () => {
    expect(await names([['sort_by', 'username']])).toEqual([
      'Bob_Jones',
      'alice.smith',
      'carol',
      'dave',
      'erin',
    ]);
    expect(
      await names([
        ['sort_by', 'username'],
        ['order', 'desc'],
      ]),
    ).toEqual(['erin', 'dave', 'carol', 'alice.smith', 'Bob_Jones']);
    expect((await names([['sort_by', 'display_name']]))[0]).toBe('dave');
  });

  it('paginates with limit and offset and reports the total', async () => {
    const page = await adminCall(s, 'GET', '/users', {
      query: [
        ['limit', '2'],
        ['offset', '3'],
      ],
    });
    expect(page.json).toMatchObject({ count: 2, total: 5, limit: 2, offset: 3 });
    expect(page.json.users.map((u: { username: string }) => u.username)).toEqual(['dave', 'erin']);
    const zero = await adminCall(s, 'GET', '/users', { query: [['limit', '0']] });
    expect(zero.json).toMatchObject({ users: [], count: 0, total: 5, limit: 0 });
  });

  it('defaults to 25 per page', async () => {
    for (let i = 0; i < 25; i++) {
      const r = await adminCall(s, 'POST', '/users', { body: { username: `bulk${i}` } });
      expect(r.status).toBe(200);
    }
    const r = await adminCall(s, 'GET', '/users');
    expect(r.json).toMatchObject({ count: 25, total: 30, limit: 25, offset: 0 });
    const generated = await adminCall(s, 'POST', '/users', { body: {} });
    expect(generated.json.username).toMatch(/^[A-Za-z0-9._\-=@#$+]+$/);
    const sdu = await adminCall(s, 'GET', '/users', { query: [['service_defined_username', 'false']] });
    expect(sdu.json.users.map((u: { username: string }) => u.username)).toEqual([generated.json.username]);
  });

  it.each([
    ['limit', '101'],
    ['limit', '-1'],
    ['limit', 'ten'],
    ['offset', '-5'],
    ['sort_by', 'user_id'],
    ['order', 'up'],
    ['status', 'active'],
    ['allowed_factors', 'approve,soundproof'],
    ['service_defined_username', 'yes'],
  ])('refuses %s=%s with 400 naming the parameter', async (name, value) => {
    const r = await adminCall(s, 'GET', '/users', { query: [[name, value]] });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: true, code: 40000 });
    expect(r.json.detail).toContain(name);
  });

  it('refuses a repeated query parameter with 400 naming it, rather than using one of them', async () => {
    const r = await adminCall(s, 'GET', '/users', {
      query: [
        ['username', 'alice'],
        ['username', 'bob'],
      ],
    });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: true, code: 40000, detail: 'username: must be given once' });
  });
});

describe('Admin API user creation', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox({ scenario });
  });
  afterAll(() => s.close());

  it('creates a user with a mobile enrollment and every link field', async () => {
    const r = await adminCall(s, 'POST', '/users', {
      body: { username: 'newbie', display_name: 'New Bie', valid_secs: 3600, short_code: true },
    });
    expect(r.status).toBe(200);
    const b = r.json;
    for (const field of [
      'activation_code',
      'enrollment_id',
      'activation_code_uri',
      'activation_universal_link',
      'activation_code_universal_link',
      'activation_qrcode_data_uri',
      'activation_qrcode_url',
      'activation_code_short',
      'user_id',
      'username',
    ]) {
      expect(typeof b[field], field).toBe('string');
    }
    expect(b.activation_code_uri).toMatch(new RegExp(`://enroll\\?activation_code=${b.activation_code}$`));
    expect(b.activation_universal_link).toBe(b.activation_code_universal_link);
    expect(b.activation_qrcode_data_uri).toMatch(/^data:image\/png;base64,/);
    expect(b.expiration).toBe(s.clock.now() / 1000 + 3600);
    expect(b.username).toBe('newbie');

    const qr = await plainCall(s, 'GET', new URL(b.activation_qrcode_url).pathname);
    expect(qr.status).toBe(200);
    expect(qr.headers['content-type']).toBe('image/png');

    const user = await adminCall(s, 'GET', `/users/${b.user_id}`);
    expect(user.json).toMatchObject({ username: 'newbie', display_name: 'New Bie', status: 'disabled' });
    expect(user.json.service_defined_username).toBe(true);
    const enrollments = await adminCall(s, 'GET', `/users/${b.user_id}/enrollments`);
    expect(enrollments.json.count).toBe(1);
    expect(enrollments.json.enrollments[0]).toMatchObject({
      enrollment_id: b.enrollment_id,
      status: 'pending',
    });
    const started = await serviceEvents(s, 'device.enrollment.started');
    expect(started.some((e) => e.enrollment_id === b.enrollment_id && e.device_type === 'sdk')).toBe(true);
  });

  it('omits activation_code_short without short_code and defaults validity to 604800 s', async () => {
    const r = await adminCall(s, 'POST', '/users', { body: {} });
    expect(r.json.activation_code_short).toBeUndefined();
    expect(r.json.expiration).toBe(s.clock.now() / 1000 + 604_800);
  });

  it.each([59, 7_776_001, 600.5])('refuses valid_secs %s', async (valid_secs) => {
    const r = await adminCall(s, 'POST', '/users', { body: { valid_secs } });
    expect(r.status).toBe(400);
    expect(r.json.detail).toContain('valid_secs');
  });

  it('creates a user with an SMS device from a phone number', async () => {
    const r = await adminCall(s, 'POST', '/users', {
      body: { username: 'texter', phone_number: '+447700900123' },
    });
    expect(r.status).toBe(200);
    expect(Object.keys(r.json).sort()).toEqual(['device_id', 'user_id', 'username']);
    const d = await adminCall(s, 'GET', `/devices/${r.json.device_id}`);
    expect(d.json).toMatchObject({ type: 'sms', number: '+447700900123', user_id: r.json.user_id });
  });

  it('refuses an invalid phone number with 400 / 40001 and creates nothing', async () => {
    const before = (await adminCall(s, 'GET', '/users', { query: [['limit', '0']] })).json.total;
    const r = await adminCall(s, 'POST', '/users', {
      body: { username: 'badphone', phone_number: '0170 1234' },
    });
    expect(r.status).toBe(400);
    expect(r.json.code).toBe(40001);
    const after = (await adminCall(s, 'GET', '/users', { query: [['limit', '0']] })).json.total;
    expect(after).toBe(before);
  });

  it('answers FIDO with 403 / 40300', async () => {
    const fido = await adminCall(s, 'POST', '/users', { body: { fido: true } });
    expect(fido.status).toBe(403);
    expect(fido.json.code).toBe(40300);
  });

  it('refuses an hwtoken_id naming no token with 400 / 40000 and creates nothing', async () => {
    const before = (await adminCall(s, 'GET', '/users', { query: [['limit', '0']] })).json.total;
    const hw = await adminCall(s, 'POST', '/users', { body: { username: 'tokenless', hwtoken_id: 'tok-1' } });
    expect(hw.status).toBe(400);
    expect(hw.json).toMatchObject({ error: true, code: 40000 });
    expect(hw.json.detail).toContain('hwtoken_id');
    const after = (await adminCall(s, 'GET', '/users', { query: [['limit', '0']] })).json.total;
    expect(after).toBe(before);
    const forUser = await adminCall(s, 'POST', `/users/${U(1)}/devices`, { body: { hwtoken_id: 'tok-1' } });
    expect(forUser.status).toBe(400);
    expect(forUser.json).toMatchObject({ error: true, code: 40000 });
  });

  it('refuses an existing username with 400 / 40000', async () => {
    const r = await adminCall(s, 'POST', '/users', { body: { username: 'alice.smith' } });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ code: 40000 });
    expect(r.json.detail).toContain('username');
  });

  it.each([
    ['username', 'has space'],
    ['username', 'x'.repeat(101)],
    ['username', 'ümlaut'],
    ['username', 'semi;colon'],
    ['display_name', 'a<b'],
    ['display_name', 'price €5'],
    ['display_name', 'y'.repeat(101)],
    ['display_name', 'smile 🙂'],
  ])('refuses %s %j', async (field, value) => {
    const r = await adminCall(s, 'POST', '/users', { body: { [field]: value } });
    expect(r.status).toBe(400);
    expect(r.json.detail).toContain(field);
  });

  it('accepts every character the restrictions allow', async () => {
    const r = await adminCall(s, 'POST', '/users', {
      body: { username: 'a.b_c-d=e@f#g$h+I9', display_name: 'Zoë Ñandú-Łukasz (O’Neil), #1 = @x $y +z!' },
    });
    expect(r.status).toBe(200);
    const padded = await adminCall(s, 'POST', '/users', { body: { username: 'u'.repeat(100) } });
    expect(padded.status).toBe(200);
  });

  it('answers 404 / 40400 for an unknown user', async () => {
    const r = await adminCall(s, 'GET', '/users/nobody');
    expect(r.status).toBe(404);
    expect(r.json).toMatchObject({ error: true, code: 40400 });
  });
});

describe('Admin API PUT and DELETE user', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox({ scenario });
  });
  afterAll(() => s.close());

  it('answers only the updated attributes, max_attempts included when updated', async () => {
    const r = await adminCall(s, 'PUT', `/users/${U(1)}`, {
      body: { display_name: 'Alice S.', username: 'alice.smith', max_attempts: 20 },
    });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ display_name: 'Alice S.', max_attempts: 20 });
    const user = await adminCall(s, 'GET', `/users/${U(1)}`);
    expect(user.json).toMatchObject({ display_name: 'Alice S.', max_attempts: 20 });
    const updated = (await serviceEvents(s, 'user.updated')).filter((e) => e.user_id === U(1));
    expect(updated.at(-1)).toMatchObject({
      display_name: 'Alice S.',
      max_attempts: '20',
      username: 'alice.smith',
    });
  });

  it('answers 304 with an empty body when nothing changes or nothing is given', async () => {
    const same = await adminCall(s, 'PUT', `/users/${U(5)}`, { body: { username: 'erin' } });
    expect(same.status).toBe(304);
    expect(same.text).toBe('');
    const empty = await adminCall(s, 'PUT', `/users/${U(5)}`, { body: {} });
    expect(empty.status).toBe(304);
  });

  it('keeps passcode as the only factor when allowed_factors is emptied', async () => {
    const r = await adminCall(s, 'PUT', `/users/${U(5)}`, { body: { allowed_factors: [] } });
    expect(r.json).toEqual({ allowed_factors: ['passcode'] });
  });

  it('refuses an existing username, out-of-range max_attempts and unknown factors', async () => {
    for (const body of [
      { username: 'carol' },
      { max_attempts: 4 },
      { max_attempts: 41 },
      { allowed_factors: ['soundproof'] },
      { status: 'archived' },
    ]) {
      const r = await adminCall(s, 'PUT', `/users/${U(5)}`, { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.code).toBe(40000);
    }
  });

  it('answers 404 for an unknown user on PUT and DELETE', async () => {
    expect((await adminCall(s, 'PUT', '/users/nobody', { body: { display_name: 'x' } })).status).toBe(404);
    expect((await adminCall(s, 'DELETE', '/users/nobody')).status).toBe(404);
  });

  it('archives on DELETE; later PUT and DELETE answer 410 / 41000 "user already archived"', async () => {
    const del = await adminCall(s, 'DELETE', `/users/${U(4)}`);
    expect(del.status).toBe(200);
    expect(del.json).toEqual({ result: 'ok' });
    const user = await adminCall(s, 'GET', `/users/${U(4)}`);
    expect(user.json.status).toBe('archived');
    expect(user.json.archived_at).toBe(s.clock.now() / 1000);
    for (const r of [
      await adminCall(s, 'PUT', `/users/${U(4)}`, { body: { display_name: 'x' } }),
      await adminCall(s, 'DELETE', `/users/${U(4)}`),
      await adminCall(s, 'POST', `/users/${U(4)}/one_time_code`, { body: {} }),
    ]) {
      expect(r.status).toBe(410);
      expect(r.json).toMatchObject({ error: true, code: 41000, detail: 'user already archived' });
    }
  });
});

describe('Admin API user status state machine (docs/vendor-api.md#user-status)', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serveSandbox({ scenario });
  });
  afterAll(() => s.close());

  const status = async (id: string) => (await adminCall(s, 'GET', `/users/${id}`)).json;
  const put = (id: string, body: unknown) => adminCall(s, 'PUT', `/users/${id}`, { body });
  const fail = (id: string) =>
    controlCall(s, 'POST', '/sandbox/authentications', { user_id: id, result: 'failure' });

  it('enabled → locked_out on the failure after max_attempts (16th with 15), not before', async () => {
    for (let i = 1; i <= 15; i++) {
      const r = await fail(U(1));
      expect(r.json).toMatchObject({ status: 'enabled', failed_attempts: i });
    }
    const sixteenth = await fail(U(1));
    expect(sixteenth.json).toMatchObject({ result: 'deny', status: 'locked_out', failed_attempts: 16 });
    expect((await status(U(1))).status).toBe('locked_out');
    // Locked out: even a correct factor is refused until an admin resets the status.
    const ok = await controlCall(s, 'POST', '/sandbox/authentications', { user_id: U(1), result: 'success' });
    expect(ok.json).toMatchObject({ result: 'deny', status: 'locked_out' });
  });

  it('locked_out → enabled with PUT status=enabled (user has a device), removing the lock-out', async () => {
    const r = await put(U(1), { status: 'enabled' });
    expect(r.json).toEqual({ status: 'enabled' });
    expect(await status(U(1))).toMatchObject({ status: 'enabled', failed_attempts: 0 });
  });

  it('a success resets the consecutive failure count', async () => {
    await fail(U(2));
    await fail(U(2));
    const ok = await controlCall(s, 'POST', '/sandbox/authentications', { user_id: U(2), result: 'success' });
    expect(ok.json).toMatchObject({ result: 'allow', failed_attempts: 0 });
  });

  it('locks out after max_attempts of the user (5 → 6th failure)', async () => {
    await put(U(2), { max_attempts: 5 });
    for (let i = 0; i < 5; i++) expect((await fail(U(2))).json.status).toBe('enabled');
    expect((await fail(U(2))).json.status).toBe('locked_out');
  });

  it('any → bypass with PUT status=bypass, which resets the lock-out', async () => {
    const r = await put(U(2), { status: 'bypass' });
    expect(r.json).toEqual({ status: 'bypass' });
    expect(await status(U(2))).toMatchObject({ status: 'bypass', failed_attempts: 0 });
    const auth = await controlCall(s, 'POST', '/sandbox/authentications', {
      user_id: U(2),
      result: 'failure',
    });
    expect(auth.json.result).toBe('allow');
    expect(auth.json.activity.factor).toBeUndefined();
  });

  it('bypass → enabled with PUT status=enabled', async () => {
    expect((await put(U(2), { status: 'enabled' })).json).toEqual({ status: 'enabled' });
  });

  it('any → locked_out with PUT status=locked_out, until reset by bypass or enabled', async () => {
    expect((await put(U(5), { status: 'locked_out' })).json).toEqual({ status: 'locked_out' });
    const auth = await controlCall(s, 'POST', '/sandbox/authentications', {
      user_id: U(5),
      result: 'success',
    });
    expect(auth.json.result).toBe('deny');
    expect((await put(U(5), { status: 'bypass' })).json).toEqual({ status: 'bypass' });
  });

  it('PUT status=enabled on a user with no enrolled device answers disabled', async () => {
    // carol is in bypass with no device.
    const r = await put(U(3), { status: 'enabled' });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ status: 'disabled' });
    expect((await status(U(3))).status).toBe('disabled');
  });

  it('any → disabled with PUT status=disabled unenrolls every enrolled device', async () => {
    const before = await adminCall(s, 'GET', `/users/${U(5)}/devices`, { query: [['status', 'enrolled']] });
    expect(before.json.count).toBe(1);
    expect((await put(U(5), { status: 'disabled' })).json).toEqual({ status: 'disabled' });
    const enrolled = await adminCall(s, 'GET', `/users/${U(5)}/devices`, { query: [['status', 'enrolled']] });
    expect(enrolled.json.count).toBe(0);
    const unenrolled = await adminCall(s, 'GET', `/users/${U(5)}/devices`, {
      query: [['status', 'unenrolled']],
    });
    expect(unenrolled.json.count).toBe(1);
    // No enrolled device any more: enabling answers disabled, and 304 since nothing changes.
    expect((await put(U(5), { status: 'enabled' })).status).toBe(304);
  });

  it('enabled → disabled when DELETE device removes the only enrolled device (success_2fa_disabled)', async () => {
    const created = await adminCall(s, 'POST', '/users', { body: { username: 'solo' } });
    await controlCall(s, 'POST', `/sandbox/enrollments/${created.json.enrollment_id}/complete`, {
      type: 'ios',
    });
    const user = await status(created.json.user_id);
    expect(user.status).toBe('enabled');
    const devices = await adminCall(s, 'GET', `/users/${user.user_id}/devices`);
    const del = await adminCall(s, 'DELETE', `/devices/${devices.json.devices[0].device_id}`);
    expect(del.json).toEqual({ result: 'success_2fa_disabled', archived_at: s.clock.now() / 1000 });
    expect((await status(user.user_id)).status).toBe('disabled');
  });

  it('any non-archived → archived with DELETE user; no further PUT', async () => {
    expect((await adminCall(s, 'DELETE', `/users/${U(2)}`)).status).toBe(200);
    expect((await put(U(2), { status: 'enabled' })).status).toBe(410);
  });

  it('records user.updated events with max_attempts as a string for status changes', async () => {
    const updated = (await serviceEvents(s, 'user.updated')).filter((e) => e.user_id === U(1));
    expect(updated.map((e) => e.status)).toEqual(['locked_out', 'enabled']);
    expect(typeof updated[0].max_attempts).toBe('string');
  });
});
