import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';

/**
 * The operator endpoints (issue 15, item 6): /metrics, /policies (file paths, reload errors) and
 * /openapi.json were served to anyone who could reach the /decide port.
 */

const OPS_PATHS = ['/metrics', '/policies', '/openapi.json'] as const;
const OPS_KEY = 'ops-key-0123456789abcdef';

const get = (url: string, key?: string) =>
  fetch(url, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } });

describe('on the /decide port (no ops port configured)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h?.stop());

  it('refuses the operator endpoints without a key, with a problem and WWW-Authenticate', async () => {
    for (const path of OPS_PATHS) {
      const res = await get(`${h.url}${path}`);
      expect(res.status, path).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer realm="riskgate"');
      const body = await res.text();
      expect(JSON.parse(body)).toMatchObject({ code: 'RG_ERR_UNAUTHENTICATED' });
      // Nothing of what the endpoint guards leaks into the refusal.
      expect(body).not.toMatch(/policies\/|riskgate_|openapi/);
    }
  });

  it('serves them to a caller key when no ops keys are configured', async () => {
    for (const path of OPS_PATHS) expect((await get(`${h.url}${path}`, CALLER_KEY)).status, path).toBe(200);
  });

  it('keeps liveness and readiness open for probes', async () => {
    expect((await get(`${h.url}/healthz`)).status).toBe(200);
    expect((await get(`${h.url}/readyz`)).status).toBe(200);
  });
});

describe('with RISKGATE_OPS_KEYS', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ env: { RISKGATE_OPS_KEYS: OPS_KEY } });
  });
  afterAll(() => h?.stop());

  it('takes only the ops keys: a caller key cannot read the operator endpoints', async () => {
    for (const path of OPS_PATHS) {
      expect((await get(`${h.url}${path}`, CALLER_KEY)).status, path).toBe(401);
      expect((await get(`${h.url}${path}`, OPS_KEY)).status, path).toBe(200);
    }
    // And an ops key is not a caller key.
    const res = await fetch(`${h.url}/decide`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ accountId: 'alice' }),
    });
    expect(res.status).toBe(401);
  });
});

describe('with RISKGATE_OPS_PORT', () => {
  let h: Harness;
  let ops: string;
  beforeAll(async () => {
    h = await startHarness({ env: { RISKGATE_OPS_PORT: '0' } });
    ops = h.riskgate.opsUrl!;
  });
  afterAll(() => h?.stop());

  it('serves the operator endpoints on the ops port alone, and not on the /decide port', async () => {
    expect(ops).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(h.riskgate.opsPort).not.toBe(h.riskgate.port);
    for (const path of OPS_PATHS) {
      expect((await get(`${ops}${path}`)).status, path).toBe(200);
      expect((await get(`${h.url}${path}`, CALLER_KEY)).status, path).toBe(404);
    }
    expect(await (await get(`${ops}/metrics`)).text()).toContain('riskgate_build_info');
  });

  it('does not serve /decide or callbacks on the ops port; health answers on both', async () => {
    const res = await fetch(`${ops}/decide`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(demoRequest('alice', 'DUALICE0000000000000')),
    });
    expect(res.status).toBe(404);
    for (const base of [ops, h.url]) {
      expect((await get(`${base}/healthz`)).status).toBe(200);
      expect((await get(`${base}/readyz`)).status).toBe(200);
    }
    // The service port still decides.
    expect((await h.decide({ accountId: 'alice', platform: 'browser' })).status).toBe(200);
  });
});

describe('with RISKGATE_OPS_PORT and RISKGATE_OPS_KEYS', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ env: { RISKGATE_OPS_PORT: '0', RISKGATE_OPS_KEYS: OPS_KEY } });
  });
  afterAll(() => h?.stop());

  it('asks the ops key on the ops port too', async () => {
    const ops = h.riskgate.opsUrl!;
    expect((await get(`${ops}/policies`)).status).toBe(401);
    expect((await get(`${ops}/policies`, CALLER_KEY)).status).toBe(401);
    expect((await get(`${ops}/policies`, OPS_KEY)).status).toBe(200);
  });
});
