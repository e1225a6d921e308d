import { once } from 'node:events';
import { Agent } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { describe, expect, it } from 'vitest';
import { eventually } from '../../test/support/eventually.ts';
import { postRaw } from '../../test/support/raw-post.ts';
import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import type { ActionJob } from '../actions/admin-actions.ts';
import type { AdminPort, SignalsPort } from '../decide/decide-ports.ts';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import { healthRoutes } from '../lifecycle/health-routes.ts';
import { createMetrics } from '../observability/metrics.ts';
import { metricsRoute } from '../observability/metrics-component.ts';
import { openApiRoute } from '../openapi/openapi-route.ts';
import { compilePolicy } from '../policy/policy-compiler.ts';
import { policyRoutes } from '../policy/policy-routes.ts';
import type { CompiledPolicy, PolicySignalName } from '../policy/policy-types.ts';
import { type AppDeps, createApp } from './create-app.ts';

/**
 * The HTTP surface in process, through hono's `app.request()`: no socket, no sandbox. The app is
 * built around its ports (the signal fetcher, the Admin API, the policy source, the action
 * dispatcher, the decision log) with test doubles, and a real compiled policy. Over real HTTP
 * with the real clients: test/decide-*.test.ts and test/service-*.test.ts.
 */

const CALLER = 'unit-caller-key-0123456789';
/** A browser login with the identifiers both signals need. */
const LOGIN = {
  accountId: 'alice',
  platform: 'browser',
  unitId: 'alice-web',
  verificationStatus: 'unverified',
  interactionId: 'alice-login-1',
};
const OPERATOR = 'unit-operator-key-0123456789';

/** Remote control denies, a new browser challenges; everything else allows. */
const POLICY = `apiVersion: riskgate/v1
kind: Policy
name: unit
thresholds: { challenge: 40, deny: 80 }
signals:
  remoteAccessTool: { onUnavailable: { score: 10 } }
  newBrowser: { onUnavailable: { score: 20 } }
rules:
  - { id: rat, description: remote control, when: 'signals.remoteAccessTool.success && signals.remoteAccessTool.anomaly', verdict: deny }
  - { id: new-browser, description: new browser, when: 'signals.newBrowser.success && !signals.newBrowser.known', score: 50 }
`;

function compiled(): CompiledPolicy {
  const r = compilePolicy('unit.yaml', POLICY);
  if (!r.policy) throw new Error(r.issues.map((i) => i.message).join('\n'));
  return r.policy;
}

/** What the vendor says per signal in these tests; a missing one answers as a clean login. */
type Vendor = Partial<Record<PolicySignalName, Record<string, unknown>>>;

/** The signals client as the decide room sees it: one method per signal, by the policy's name. */
function fakeSignals(vendor: Vendor): { client: SignalsPort; calls: PolicySignalName[] } {
  const calls: PolicySignalName[] = [];
  const clean: Vendor = { remoteAccessTool: { anomaly: false }, newBrowser: { known: true } };
  const client = new Proxy({} as SignalsPort, {
    get: (_t, name) => async () => {
      const signal = name as PolicySignalName;
      calls.push(signal);
      const result = vendor[signal] ?? clean[signal] ?? {};
      return { ok: true, value: { signalType: signal, success: true, result }, durationMs: 1 };
    },
  });
  return { client, calls };
}

/** This policy reads no Admin data: any call is a wiring mistake. */
const NO_ADMIN = new Proxy({} as AdminPort, {
  get: (_t, name) => () => {
    throw new Error(`unexpected Admin call ${String(name)}`);
  },
});

function build(options: { vendor?: Vendor; deps?: Partial<AppDeps> } = {}) {
  const signals = fakeSignals(options.vendor ?? {});
  const lines: Record<string, unknown>[] = [];
  const serviceLog: Record<string, unknown>[] = [];
  const submitted: ActionJob[] = [];
  const policy = compiled();
  const decisionLog: DecisionLog = {
    write: (record) => {
      lines.push(record as Record<string, unknown>);
    },
    flush: async () => {},
    close: async () => {},
    dropped: 0,
  };
  const actions: ActionDispatcher = {
    submit: async (jobs) => {
      submitted.push(...jobs);
      return jobs.map(() => 'queued' as const);
    },
    size: 0,
    drain: async () => {},
    abandon: async () => {},
  };
  const metrics = createMetrics({ runtime: false });
  const policies = {
    current: () => policy,
    status: () => ({ name: policy.name, active: { revision: policy.revision } }),
    reload: async () => ({ ok: true as const, changed: false, revision: policy.revision }),
  };
  const draining = options.deps?.isDraining;
  // The routes the components bring in a running riskgate (src/service/service-components.ts).
  const routes = [
    healthRoutes({
      health: () => ({}),
      readiness: () => {
        const checks: Record<string, boolean> = { policy: true };
        if (draining?.()) checks.draining = false;
        return { ready: Object.values(checks).every(Boolean), checks };
      },
    }),
    metricsRoute(() => metrics.collect()),
    policyRoutes({ policies }),
    openApiRoute(() => ({ openapi: '3.1.0', info: {}, paths: {} })),
  ];
  const app = createApp({
    decide: {
      signals: signals.client,
      admin: NO_ADMIN,
      policies,
      deadlineMs: 5000,
    },
    apiKeys: [CALLER],
    actions,
    decisionLog,
    metrics,
    log: (line) => {
      serviceLog.push(line);
    },
    routes,
    ops: { access: 'keys', keys: [OPERATOR] },
    ...options.deps,
  });
  const decide = (body: unknown, headers: Record<string, string> = {}) =>
    app.request('/decide', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  return { app, decide, calls: signals.calls, lines, serviceLog, submitted };
}

async function problem(res: Response): Promise<Record<string, unknown>> {
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  return (await res.json()) as Record<string, unknown>;
}

describe('createApp in process: POST /decide', () => {
  it('answers the policy’s verdict on what the signal fetcher returned, and logs the decision after', async () => {
    const t = build({ vendor: { remoteAccessTool: { anomaly: true } } });
    const res = await t.decide(LOGIN);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ verdict: 'deny', degraded: false });
    expect(res.headers.get('server-timing')).toContain('total');
    expect(t.calls.sort()).toEqual(['newBrowser', 'remoteAccessTool']);
    const line = await eventually(async () => t.lines.find((l) => l.kind === 'decision'));
    expect(line).toMatchObject({ decisionId: body.decisionId });
  });

  it('allows a clean login', async () => {
    const res = await build().decide(LOGIN);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ verdict: 'allow', score: 0, degraded: false });
  });

  it('refuses a request without a caller key 401 problem+json, before any signal is fetched', async () => {
    const t = build();
    for (const authorization of [undefined, 'Bearer not-a-key', `Bearer ${OPERATOR}`]) {
      const res = await t.app.request('/decide', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(authorization && { authorization }) },
        body: JSON.stringify({ accountId: 'alice' }),
      });
      expect(res.status, String(authorization)).toBe(401);
      expect(await problem(res), String(authorization)).toMatchObject({ code: 'RG_ERR_UNAUTHENTICATED' });
    }
    expect(t.calls).toEqual([]);
  });

  it('answers bad input 400 problem+json naming the field, never a 500', async () => {
    const t = build();
    const res = await t.decide({ accountId: 'alice', platform: 'desktop' });
    expect(res.status).toBe(400);
    expect(await problem(res)).toMatchObject({ code: 'RG_ERR_INVALID_INPUT', field: 'platform' });
    const notJson = await t.decide('{"accountId":');
    expect(notJson.status).toBe(400);
    expect(await problem(notJson)).toMatchObject({ code: 'RG_ERR_INVALID_INPUT' });
    expect(t.calls).toEqual([]);
    expect(t.serviceLog.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('refuses a body over 16 KiB 413 problem+json, by its declared length and when streamed', async () => {
    const t = build();
    const big = JSON.stringify({ accountId: 'alice', userAgent: 'x'.repeat(17 * 1024) });
    const declared = await t.decide(big, { 'content-length': String(Buffer.byteLength(big)) });
    expect(declared.status).toBe(413);
    expect(await problem(declared)).toMatchObject({ code: 'RG_ERR_PAYLOAD_TOO_LARGE' });
    const bytes = new TextEncoder().encode(big);
    const streamed = await t.app.request('/decide', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < bytes.length; i += 4096) controller.enqueue(bytes.subarray(i, i + 4096));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect(await problem(streamed)).toMatchObject({ code: 'RG_ERR_PAYLOAD_TOO_LARGE' });
    expect(t.calls).toEqual([]);
  });
});

describe('createApp in process: routing', () => {
  it('answers a known path with another method 405 problem+json and an Allow header', async () => {
    const t = build();
    const res = await t.app.request('/decide', { method: 'GET' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    expect(await problem(res)).toMatchObject({ code: 'RG_ERR_METHOD_NOT_ALLOWED' });
    const health = await t.app.request('/healthz', { method: 'DELETE' });
    expect(health.status).toBe(405);
    expect(health.headers.get('allow')).toBe('GET, HEAD');
  });

  it('answers an unknown path 404 problem+json', async () => {
    const res = await build().app.request('/nowhere');
    expect(res.status).toBe(404);
    expect(await problem(res)).toMatchObject({ code: 'RG_ERR_NOT_FOUND' });
  });

  it('serves liveness and readiness without a key; readiness turns 503 while draining', async () => {
    let draining = false;
    const t = build({ deps: { isDraining: () => draining } });
    expect((await t.app.request('/healthz')).status).toBe(200);
    const ready = await t.app.request('/readyz');
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ready: true, checks: { policy: true } });
    draining = true;
    const notReady = await t.app.request('/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.headers.get('connection')).toBe('close');
  });

  it('closes the connection of a decision answered while draining, served through the node adaptor', async () => {
    let draining = false;
    const t = build({ deps: { isDraining: () => draining } });
    const server = createAdaptorServer({ fetch: t.app.fetch });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/decide`;
    const agent = new Agent({ keepAlive: true });
    const post = () => postRaw(url, CALLER, JSON.stringify(LOGIN), agent);
    try {
      const open = await post();
      expect(open.status).toBe(200);
      expect(open.headers.connection).toBe('keep-alive');
      draining = true;
      const closing = await post();
      expect(closing.status).toBe(200);
      expect(closing.headers.connection).toBe('close');
      for (const answer of [open, closing]) {
        expect(answer.headers['content-type']).toBe('application/json');
        expect(answer.headers['content-length']).toBe(String(Buffer.byteLength(answer.text)));
        expect(answer.headers['server-timing']).toContain('total;dur=');
        expect(JSON.parse(answer.text)).toMatchObject({ verdict: 'allow' });
      }
    } finally {
      agent.destroy();
      server.close();
    }
  });

  it('serves the operator endpoints to an operator key only, never to a caller key', async () => {
    const t = build();
    const as = (key: string | undefined, path: string) =>
      t.app.request(path, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } });
    for (const path of ['/metrics', '/policies', '/openapi.json']) {
      expect((await as(OPERATOR, path)).status, path).toBe(200);
      const caller = await as(CALLER, path);
      expect(caller.status, path).toBe(401);
      expect(await problem(caller), path).toMatchObject({ code: 'RG_ERR_UNAUTHENTICATED' });
      expect((await as(undefined, path)).status, path).toBe(401);
    }
    expect(await (await as(OPERATOR, '/policies')).json()).toEqual({
      name: expect.any(String),
      active: { revision: expect.any(String) },
    });
  });

  it('refuses every operator endpoint 403 while no operator key is configured', async () => {
    const t = build({ deps: { ops: { access: 'keys', keys: [] } } });
    const res = await t.app.request('/metrics', { headers: { authorization: `Bearer ${CALLER}` } });
    expect(res.status).toBe(403);
    expect(await problem(res)).toMatchObject({ code: 'RG_ERR_FORBIDDEN' });
  });

  it('serves only health and the operator endpoints on the ops surface', async () => {
    const t = build({ deps: { surface: 'ops' } });
    const res = await t.decide({ accountId: 'alice' });
    expect(res.status).toBe(404);
    expect(t.calls).toEqual([]);
    expect((await t.app.request('/healthz')).status).toBe(200);
    const metrics = await t.app.request('/metrics', { headers: { authorization: `Bearer ${OPERATOR}` } });
    expect(metrics.status).toBe(200);
  });

  it('counts refused requests by code in the HTTP metrics', async () => {
    const t = build();
    await t.app.request('/nowhere');
    await t.decide({ accountId: 'alice' }, { authorization: 'Bearer nope' });
    const text = await (
      await t.app.request('/metrics', { headers: { authorization: `Bearer ${OPERATOR}` } })
    ).text();
    expect(text).toMatch(/RG_ERR_NOT_FOUND/);
    expect(text).toMatch(/RG_ERR_UNAUTHENTICATED/);
  });
});
