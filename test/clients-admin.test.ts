import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { AdminClient } from '../src/admin/admin-client.ts';
import { ErrorCode } from '../src/errors/riskgate-error.ts';
import { type ClientSandbox, startClientSandbox } from './clients-sandbox.ts';

let env: ClientSandbox;
let admin: AdminClient;
beforeAll(async () => {
  env = await startClientSandbox();
  admin = env.admin();
});
afterAll(async () => {
  await env.stop();
});
beforeEach(async () => {
  await env.clearFaults();
  await env.resetStats();
});

async function userId(username: string): Promise<string> {
  const r = await admin.lookupUsers({ username });
  if (!r.ok) throw r.error;
  const u = r.value.users.find((x) => x.username === username);
  if (!u) throw new Error(`no ${username} in the scenario`);
  return u.user_id;
}

describe('Admin client against the sandbox (signed with SVC-Date)', () => {
  it('reads the service info, a user and its devices', async () => {
    const info = await admin.getInfo();
    expect(info.ok && typeof info.value.name).toBe('string');
    const id = await userId('alice');
    const user = await admin.getUser(id);
    expect(user.ok && user.value.username).toBe('alice');
    const devices = await admin.getUserDevices(id, { status: ['enrolled'] });
    expect(devices.ok).toBe(true);
    if (devices.ok) {
      expect(devices.value.count).toBe(devices.value.devices.length);
      expect(devices.value.devices.every((d) => d.user_id === id && d.enrolled)).toBe(true);
    }
  });

  it('locks a user out, then reports the same PUT as no change (304)', async () => {
    const id = await userId('trudy');
    const first = await admin.updateUser(id, { status: 'locked_out' });
    expect(first).toMatchObject({ ok: true, value: { changed: true, updated: { status: 'locked_out' } } });
    const again = await admin.updateUser(id, { status: 'locked_out' });
    expect(again).toMatchObject({ ok: true, value: { changed: false, alreadyArchived: false } });
    const user = await admin.getUser(id);
    expect(user.ok && user.value.status).toBe('locked_out');
    expect(await admin.updateUser(id, { status: 'enabled' })).toMatchObject({
      ok: true,
      value: { changed: true },
    });
    expect(await admin.updateUser(id, { allowed_factors: ['approve', 'mobile_totp'] })).toMatchObject({
      ok: true,
      value: { changed: true },
    });
  });

  it('archives a device; deleting it again is "already archived", not an error', async () => {
    const id = await userId('dave');
    const devices = await admin.getUserDevices(id);
    const deviceId = devices.ok ? devices.value.devices[0]?.device_id : undefined;
    expect(deviceId).toBeDefined();
    const first = await admin.deleteDevice(deviceId!);
    expect(first).toMatchObject({ ok: true, value: { alreadyArchived: false } });
    expect(first.ok && first.value.result).toMatch(/^success/);
    expect(await admin.deleteDevice(deviceId!)).toMatchObject({ ok: true, value: { alreadyArchived: true } });
  });

  it('a 503 on DELETE device is the answer: the delete is sent once, never retried', async () => {
    const id = await userId('carol');
    const devices = await admin.getUserDevices(id, { status: ['enrolled'] });
    const deviceId = devices.ok ? devices.value.devices[0]?.device_id : undefined;
    expect(deviceId).toBeDefined();
    await env.faults([
      { route: 'DELETE /srv/admin/v1/devices/:id', errorRate: 1, errorStatus: 503, times: 1 },
    ]);
    await env.resetStats();
    const r = await admin.deleteDevice(deviceId!);
    expect(r.ok ? 'ok' : r.error.code).toBe(ErrorCode.UPSTREAM_SERVER_ERROR);
    expect(env.count(await env.stats(), 'DELETE /srv/admin/v1/devices/:id')).toBe(1);
    // The fault is spent: the device is still there to archive.
    expect(await admin.deleteDevice(deviceId!)).toMatchObject({
      ok: true,
      value: { alreadyArchived: false },
    });
  });

  it('creates a one-time code', async () => {
    const id = await userId('carol');
    const r = await admin.createOneTimeCode(id, { length: 8, valid_secs: 300 });
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.value.one_time_code.replace(/ /g, '')).toMatch(/^\d{8}$/);
  });

  it('an unknown user is UPSTREAM_NOT_FOUND with the vendor message', async () => {
    const r = await admin.getUser('no-such-user');
    expect(r.ok ? 'ok' : r.error.code).toBe(ErrorCode.UPSTREAM_NOT_FOUND);
    expect(r.ok ? 0 : r.error.status).toBe(404);
  });

  it('a wrong key is UPSTREAM_UNAUTHORIZED (40100) and the key appears nowhere', async () => {
    const key = 'wrong-admin-key-xyz';
    const r = await env.admin({ apiKey: key }).getInfo();
    expect(r.ok ? 'ok' : r.error.code).toBe(ErrorCode.UPSTREAM_UNAUTHORIZED);
    if (!r.ok) {
      expect(r.error.upstreamMessage).toContain('40100');
      expect(`${r.error.message} ${JSON.stringify(r.error)}`).not.toContain(key);
    }
  });

  it('a 5xx is retried once, signed anew, and recovers', async () => {
    const id = await userId('bob');
    await env.faults([{ route: 'GET /srv/admin/v1/users/:id', errorRate: 1, errorStatus: 503, times: 1 }]);
    await env.resetStats();
    expect((await admin.getUser(id)).ok).toBe(true);
    const s = await env.stats();
    expect(env.count(s, 'GET /srv/admin/v1/users/:id', 503)).toBe(1);
    expect(env.count(s, 'GET /srv/admin/v1/users/:id', 200)).toBe(1);
  });

  it('cached user reads reach the sandbox once while fresh, and writes invalidate them', async () => {
    const id = await userId('bob');
    await env.resetStats();
    const c = env.admin({ cache: { user: { ttlMs: 60_000 } } });
    const rs = await Promise.all(Array.from({ length: 20 }, () => c.getUserCached(id)));
    expect(rs.every((r) => r.ok)).toBe(true);
    await c.getUserCached(id);
    expect(env.count(await env.stats(), 'GET /srv/admin/v1/users/:id')).toBe(1);
    await c.updateUser(id, { status: 'bypass' });
    const after = await c.getUserCached(id);
    expect(after.ok && after.value.status).toBe('bypass');
    expect(env.count(await env.stats(), 'GET /srv/admin/v1/users/:id')).toBe(2);
    await c.updateUser(id, { status: 'enabled' });
  });

  it('a user update drops only what it changes: not on 304, devices only when status=disabled', async () => {
    const id = await userId('mallory');
    const c = env.admin({ cache: { user: { ttlMs: 60_000 }, devices: { ttlMs: 60_000 } } });
    const USER = 'GET /srv/admin/v1/users/:id';
    const DEVICES = 'GET /srv/admin/v1/users/:id/devices';
    const readBoth = async () => {
      const [u, d] = await Promise.all([c.getUserCached(id), c.getUserDevicesCached(id)]);
      if (!u.ok || !d.ok) throw new Error('cached read failed');
      return { user: u.value, devices: d.value };
    };
    await c.updateUser(id, { status: 'enabled' });
    const before = await readBoth();
    expect(before.devices.devices.some((d) => d.enrolled)).toBe(true);
    await env.resetStats();

    expect(await c.updateUser(id, { status: 'bypass' })).toMatchObject({
      ok: true,
      value: { changed: true },
    });
    expect((await readBoth()).user.status).toBe('bypass');
    let s = await env.stats();
    expect([env.count(s, USER), env.count(s, DEVICES)]).toEqual([1, 0]);

    expect(await c.updateUser(id, { status: 'bypass' })).toMatchObject({
      ok: true,
      value: { changed: false },
    });
    await readBoth();
    s = await env.stats();
    expect([env.count(s, USER), env.count(s, DEVICES)]).toEqual([1, 0]);

    await c.updateUser(id, { status: 'disabled' });
    const after = await readBoth();
    expect(after.user.status).toBe('disabled');
    expect(after.devices.devices.some((d) => d.enrolled)).toBe(false);
    s = await env.stats();
    expect([env.count(s, USER), env.count(s, DEVICES)]).toEqual([2, 1]);
  });
});
