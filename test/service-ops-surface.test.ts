import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { CALLER_KEY, type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * The operator endpoints (issue 15, item 6): /metrics, /policies (file paths, reload errors) and
 * /openapi.json were served to anyone who could reach the /decide port.
 */

const OPS_PATHS = ['/metrics', '/policies', '/openapi.json'] as const;
/** Every operator route, the outbox's included (the default outbox is SQLite: /actions is served). */
const OPERATOR_PATHS = [...OPS_PATHS, '/policies/stats', '/actions'] as const;

const get = (url: string, key?: string) =>
  fetch(url, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } });

describe('on the /decide port with no ops keys configured', () => {
  let h: Harness;
  beforeAll(async () => {
    // Not a timeout test: patient timeouts keep mallory's deny a deny on a busy machine.
    h = await startHarness({
      policy: { yaml: patientShippedPolicy() },
      deadlineMs: PATIENT_DEADLINE_MS,
      env: { RISKGATE_OPS_KEYS: '' },
    });
  });
  afterAll(() => h?.stop());

  it('refuses the operator endpoints to a caller key and to anyone: 403 saying how to configure ops keys', async () => {
    for (const path of OPERATOR_PATHS) {
      for (const key of [CALLER_KEY, undefined]) {
        const res = await get(`${h.url}${path}`, key);
        expect(res.status, path).toBe(403);
        expect(res.headers.get('content-type')).toBe('application/problem+json');
        const body = await res.text();
        expect(JSON.parse(body)).toMatchObject({ code: 'RG_ERR_FORBIDDEN', status: 403 });
        expect(JSON.parse(body).detail).toContain('RISKGATE_OPS_KEYS');
        // Nothing of what the endpoint guards leaks into the refusal, nor the key sent.
        expect(body).not.toMatch(/policies\/|riskgate_|"pending"/);
        expect(body).not.toContain(CALLER_KEY);
      }
    }
  });

  it('never lets a caller key drop or retry a pending lock-out (the issue: any caller key could DELETE one)', async () => {
    const { mallory } = await lookUpUserIds(h.sandbox, ['mallory']);
    await h.control('PUT', '/sandbox/faults', {
      rules: [{ route: 'PUT /srv/admin/v1/users/*', hang: true }],
    });
    try {
      const deny = await h.decide(demoRequest('mallory', mallory));
      expect(deny.body.verdict).toBe('deny');
      const id = `${deny.body.decisionId}:lock_out_user:${mallory}`;
      for (const [method, path] of [
        ['DELETE', `/actions/${encodeURIComponent(id)}`],
        ['POST', `/actions/${encodeURIComponent(id)}/retry`],
      ] as const) {
        const res = await fetch(`${h.url}${path}`, {
          method,
          headers: { authorization: `Bearer ${CALLER_KEY}` },
        });
        expect(res.status, method).toBe(403);
      }
      expect(h.lines.filter((l) => l.kind === 'action' && l.reason === 'dropped_by_operator')).toEqual([]);
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
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

  it('serves the operator endpoints on the ops port alone, to the ops key, and not on the /decide port', async () => {
    expect(ops).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(h.riskgate.opsPort).not.toBe(h.riskgate.port);
    for (const path of OPS_PATHS) {
      expect((await get(`${ops}${path}`, OPS_KEY)).status, path).toBe(200);
      expect((await get(`${ops}${path}`)).status, path).toBe(401);
      expect((await get(`${ops}${path}`, CALLER_KEY)).status, path).toBe(401);
      expect((await get(`${h.url}${path}`, CALLER_KEY)).status, path).toBe(404);
    }
    expect(await (await get(`${ops}/metrics`, OPS_KEY)).text()).toContain('riskgate_build_info');
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

describe('with RISKGATE_OPS_PORT and no ops keys', () => {
  let h: Harness;
  beforeAll(async () => {
    // The service port on every interface, as in a container (RISKGATE_HOST=0.0.0.0).
    h = await startHarness({
      env: { RISKGATE_OPS_PORT: '0', RISKGATE_OPS_KEYS: '' },
      riskgate: { host: '0.0.0.0' },
    });
  });
  afterAll(() => h?.stop());

  it('listens on loopback, answers probes and refuses the operator endpoints (the issue: open on 0.0.0.0)', async () => {
    const ops = h.riskgate.opsUrl!;
    // The ops port is not reachable on this machine's network address (it followed RISKGATE_HOST).
    const external = Object.values(networkInterfaces())
      .flat()
      .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal);
    if (external !== undefined) {
      const port = new URL(ops).port;
      await expect(fetch(`http://${external.address}:${port}/healthz`)).rejects.toThrow();
      // The service port, told to listen on every interface, is (the check can tell them apart).
      expect((await get(`http://${external.address}:${h.riskgate.port}/healthz`)).status).toBe(200);
    }
    expect((await get(`${ops}/healthz`)).status).toBe(200);
    expect((await get(`${ops}/readyz`)).status).toBe(200);
    for (const path of OPERATOR_PATHS) {
      expect((await get(`${ops}${path}`)).status, path).toBe(403);
      expect((await get(`${ops}${path}`, CALLER_KEY)).status, path).toBe(403);
    }
    expect(h.serviceLog).toContainEqual(
      expect.objectContaining({ level: 'warn', msg: expect.stringContaining('RISKGATE_OPS_KEYS is unset') }),
    );
  });
});

describe('an ops port beyond loopback without ops keys', () => {
  it('does not start: a configuration error names RISKGATE_OPS_KEYS', async () => {
    await expect(
      startHarness({ env: { RISKGATE_OPS_PORT: '0', RISKGATE_OPS_HOST: '0.0.0.0', RISKGATE_OPS_KEYS: '' } }),
    ).rejects.toMatchObject({
      code: 'RG_ERR_INVALID_CONFIG',
      message: expect.stringMatching(/^RISKGATE_OPS_KEYS is required/),
    });
  });
});
