import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyCallbackSignature } from '../src/callbacks/jws-signature.ts';
import {
  adminCall,
  controlCall,
  plainCall,
  type Served,
  serveModules,
  serveSandbox,
} from './support/serve-module.ts';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
}

/** A local callback receiver; `statuses` are answered in turn (then 200). */
async function receiver(statuses: number[] = []) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers, raw: Buffer.concat(chunks) });
      res.statusCode = statuses.shift() ?? 200;
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const U1 = '00000000-0000-4000-8000-000000000001';
const scenario = {
  name: 'callbacks-test',
  users: [
    { user_id: U1, username: 'migrant', devices: [{ type: 'ios' as const }, { type: 'android' as const }] },
  ],
};

describe('Admin API callbacks', () => {
  let s: Served;
  let hook: Awaited<ReturnType<typeof receiver>>;
  beforeAll(async () => {
    s = await serveSandbox({ scenario });
    hook = await receiver();
  });
  afterAll(async () => {
    await s.close();
    await hook.close();
  });

  it('POSTs the enrollment success callback with a verifying x-jws-signature', async () => {
    const created = await adminCall(s, 'POST', '/users', {
      body: { username: 'enrollee', success_callback_url: `${hook.url}/enrolled?token=single-use-123` },
    });
    expect(created.status).toBe(200);
    const done = await controlCall(
      s,
      'POST',
      `/sandbox/enrollments/${created.json.enrollment_id}/complete`,
      {},
    );
    expect(done.json.callback).toMatchObject({ status: 'delivered', attempts: 1, response_status: 200 });

    const cb = hook.received.find((r) => r.path.startsWith('/enrolled'))!;
    expect(cb.path).toBe('/enrolled?token=single-use-123');
    expect(cb.headers['content-type']).toBe('application/json');
    const verdict = await verifyCallbackSignature(
      cb.headers['x-jws-signature'] as string,
      cb.raw,
      s.config.credentials.callbackSignatureKey,
    );
    expect(verdict).toMatchObject({ ok: true });
    expect(
      (await verifyCallbackSignature(cb.headers['x-jws-signature'] as string, cb.raw, 'other-key')).ok,
    ).toBe(false);
    expect(JSON.parse(cb.raw.toString('utf8'))).toEqual({
      user_id: created.json.user_id,
      username: 'enrollee',
      enrollment_id: created.json.enrollment_id,
      activation_code: created.json.activation_code,
      device_id: done.json.device.device_id,
      result: 'success',
    });

    const log = await controlCall(s, 'GET', '/sandbox/callbacks');
    const entry = log.json.callbacks.find((c: { kind: string }) => c.kind === 'enrollment_success');
    expect(entry.status).toBe('delivered');
    // The application's single-use token is not echoed by the inspection route.
    expect(JSON.stringify(log.json)).not.toContain('single-use-123');
  });

  it('sends no callback for an enrollment without success_callback_url', async () => {
    const before = hook.received.length;
    const created = await adminCall(s, 'POST', '/users', { body: { username: 'quiet' } });
    const done = await controlCall(
      s,
      'POST',
      `/sandbox/enrollments/${created.json.enrollment_id}/complete`,
      {},
    );
    expect(done.json.callback).toBeUndefined();
    expect(hook.received.length).toBe(before);
  });

  it('sends one accounts-migration callback per migrated account', async () => {
    const put = await adminCall(s, 'PUT', '/info', {
      body: { accounts_migration_callback_url: `${hook.url}/migrated` },
    });
    expect(put.status).toBe(200);
    expect(put.json).toEqual({
      accounts_migration_callback_url: `${hook.url}/migrated`,
      session_timeout: 60,
    });
    const before = await adminCall(s, 'GET', `/users/${U1}/devices`);
    const oldIds = before.json.devices.map((d: { device_id: string }) => d.device_id);

    const m = await controlCall(s, 'POST', '/sandbox/migrations', { user_id: U1 });
    expect(m.status).toBe(200);
    expect(m.json.migrations).toHaveLength(2);
    const now = s.clock.now() / 1000;
    const calls = hook.received.filter((r) => r.path === '/migrated');
    expect(calls).toHaveLength(2);
    for (const c of calls) {
      expect(
        (
          await verifyCallbackSignature(
            c.headers['x-jws-signature'] as string,
            c.raw,
            s.config.credentials.callbackSignatureKey,
          )
        ).ok,
      ).toBe(true);
    }
    const bodies = calls.map((c) => JSON.parse(c.raw.toString('utf8')));
    expect(bodies.map((b) => b.device_id).sort()).toEqual([...oldIds].sort());
    for (const b of bodies) {
      expect(b).toEqual({
        user_id: U1,
        device_id: b.device_id,
        migrated_to_device_id: expect.any(String),
        migrated_at: now,
      });
      const old = await adminCall(s, 'GET', `/devices/${b.device_id}`);
      expect(old.json).toMatchObject({ migrated_to_device_id: b.migrated_to_device_id, migrated_at: now });
      const fresh = await adminCall(s, 'GET', `/devices/${b.migrated_to_device_id}`);
      expect(fresh.json).toMatchObject({ migrated_from_device_id: b.device_id, enrolled: true, user_id: U1 });
    }
    expect((await adminCall(s, 'GET', `/users/${U1}`)).json.status).toBe('enabled');
  });

  it('answers PUT /info with 304 when unchanged and 400 for invalid values', async () => {
    const info = await adminCall(s, 'GET', '/info');
    expect(info.json).toMatchObject({ name: expect.any(String), trial: false, session_timeout: 60 });
    expect((await adminCall(s, 'PUT', '/info', { body: { session_timeout: 60 } })).status).toBe(304);
    expect((await adminCall(s, 'PUT', '/info', { body: {} })).status).toBe(304);
    for (const body of [
      { session_timeout: 29 },
      { session_timeout: 121 },
      { accounts_migration_callback_url: 42 },
      { accounts_migration_callback_url: 'ftp://example.com/x' },
    ]) {
      const r = await adminCall(s, 'PUT', '/info', { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
    const changed = await adminCall(s, 'PUT', '/info', { body: { session_timeout: 90 } });
    expect(changed.json.session_timeout).toBe(90);
  });

  it('stores, serves and deletes the logo', async () => {
    expect((await adminCall(s, 'GET', '/logo')).status).toBe(404);
    const png =
      'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';
    expect(
      (await adminCall(s, 'POST', '/logo', { body: { logo: Buffer.from('GIF89a').toString('base64') } }))
        .status,
    ).toBe(400);
    expect((await adminCall(s, 'POST', '/logo', { body: {} })).status).toBe(400);
    const posted = await adminCall(s, 'POST', '/logo', { body: { logo: png } });
    expect(posted.status).toBe(200);
    const got = await adminCall(s, 'GET', '/logo');
    expect(got.json.logo_url).toBe(posted.json.logo_url);
    const image = await plainCall(s, 'GET', new URL(got.json.logo_url).pathname);
    expect(image.status).toBe(200);
    expect((await adminCall(s, 'DELETE', '/logo')).json).toEqual({ result: 'ok' });
    expect((await adminCall(s, 'DELETE', '/logo')).status).toBe(404);
  });
});

describe('Admin API callback delivery: retries and URL rules', () => {
  it('keeps only the most recent delivery records', async () => {
    const hook2 = await receiver();
    const s = await serveModules({
      scenario: { name: 'capped', users: [] },
      admin: { callbackHistoryLimit: 2 },
    });
    try {
      const enrollmentIds: string[] = [];
      for (let i = 0; i < 3; i++) {
        const created = await adminCall(s, 'POST', '/users', {
          body: { success_callback_url: `${hook2.url}/cb${i}` },
        });
        enrollmentIds.push(created.json.enrollment_id);
        await controlCall(s, 'POST', `/sandbox/enrollments/${created.json.enrollment_id}/complete`, {});
      }
      expect(hook2.received.map((r) => r.path)).toEqual(['/cb0', '/cb1', '/cb2']);
      const log = await controlCall(s, 'GET', '/sandbox/callbacks');
      expect(log.json.count).toBe(2);
      expect(log.json.callbacks.map((c: { url: string }) => c.url)).toEqual([
        `${hook2.url}/cb1`,
        `${hook2.url}/cb2`,
      ]);
      expect(
        log.json.callbacks.map((c: { body: { enrollment_id: string } }) => c.body.enrollment_id),
      ).toEqual(enrollmentIds.slice(1));
    } finally {
      await s.close();
      await hook2.close();
    }
  });

  it('retries a failing receiver a bounded number of times', async () => {
    const flaky = await receiver([500, 503]);
    const s = await serveModules({
      scenario: { name: 'retry', users: [] },
      admin: { callbackRetryDelayMs: 5 },
    });
    try {
      const created = await adminCall(s, 'POST', '/users', {
        body: { success_callback_url: `${flaky.url}/cb` },
      });
      const done = await controlCall(
        s,
        'POST',
        `/sandbox/enrollments/${created.json.enrollment_id}/complete`,
        {},
      );
      expect(done.json.callback).toMatchObject({ status: 'delivered', attempts: 3, response_status: 200 });
      expect(flaky.received).toHaveLength(3);
      // Every attempt carries the same verifying signature.
      for (const r of flaky.received) {
        expect(
          (
            await verifyCallbackSignature(
              r.headers['x-jws-signature'] as string,
              r.raw,
              s.config.credentials.callbackSignatureKey,
            )
          ).ok,
        ).toBe(true);
      }

      const down = await receiver([500, 500, 500, 500]);
      const again = await adminCall(s, 'POST', '/users', {
        body: { success_callback_url: `${down.url}/cb` },
      });
      const failed = await controlCall(
        s,
        'POST',
        `/sandbox/enrollments/${again.json.enrollment_id}/complete`,
        {},
      );
      expect(failed.json.callback).toMatchObject({ status: 'failed', attempts: 3, error: 'HTTP 500' });
      expect(down.received).toHaveLength(3);
      await down.close();
    } finally {
      await s.close();
      await flaky.close();
    }
  });

  it('enforces https, FQDN and port 443 when insecure callbacks are not allowed', async () => {
    const s = await serveModules({
      scenario: { name: 'strict', users: [] },
      admin: { allowInsecureCallbacks: false },
    });
    try {
      for (const url of [
        'http://127.0.0.1:8080/cb',
        'http://hooks.example.com/cb',
        'https://10.0.0.1/cb',
        'https://hooks.example.com:8443/cb',
        'https://localhost/cb',
        'not a url',
      ]) {
        const r = await adminCall(s, 'POST', '/users', { body: { success_callback_url: url } });
        expect(r.status, url).toBe(400);
        expect(r.json.detail).toContain('success_callback_url');
      }
      const ok = await adminCall(s, 'POST', '/users', {
        body: { success_callback_url: 'https://hooks.example.com/cb' },
      });
      expect(ok.status).toBe(200);
      const info = await adminCall(s, 'PUT', '/info', {
        body: { accounts_migration_callback_url: 'http://localhost:9000/m' },
      });
      expect(info.status).toBe(400);
    } finally {
      await s.close();
    }
  });
});
