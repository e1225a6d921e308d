import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signCallbackBody } from '../src/callbacks/jws-signature.ts';
import { decideResponseSchema } from '../src/decide/decide-response.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { postRaw } from './support/raw-post.ts';
import { signatureRespellings as respellings } from './support/signature-respellings.ts';

/** Everything around /decide, over real HTTP against riskgate on the sandbox. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.stop());

const get = (path: string) => fetch(`${h.url}${path}`);

const ops = (path: string) => h.ops(path);

describe('service endpoints', () => {
  it('GET /healthz says the process is alive', async () => {
    const res = await get('/healthz');
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      status: 'ok',
      vendor: { token: { valid: true, expiresInSeconds: expect.any(Number), consecutiveFailures: 0 } },
    });
  });

  it('GET /readyz is ready once the policy is loaded and the inputs it reads are warm', async () => {
    const res = await get('/readyz');
    expect(res.status).toBe(200);
    // The shipped policy reads signals (the token), the event history and the runtime lists.
    expect(await res.json()).toEqual({
      ready: true,
      checks: { policy: true, token: true, history: true, lists: true },
      inputs: { token: { state: 'warm' }, history: { state: 'warm' }, lists: { state: 'warm' } },
    });
  });

  it('GET /policies names the active policy, its revision and when it was loaded', async () => {
    const body = (await (await ops('/policies')).json()) as Record<string, unknown>;
    expect(body).toMatchObject({ name: 'login', revision: expect.stringMatching(/^[0-9a-f]+$/) });
    expect(Number.isNaN(Date.parse(String(body.loadedAt)))).toBe(false);
    expect(body).not.toHaveProperty('lastError');
  });

  it('answers a decision that matches the published contract, with Server-Timing', async () => {
    const answer = await h.decide(demoRequest('alice', undefined));
    expect(answer.status).toBe(200);
    expect(decideResponseSchema.safeParse(answer.body).error).toBeUndefined();
    const timing = answer.headers.get('server-timing') ?? '';
    expect(timing).toMatch(/^total;dur=\d+(\.\d)?/);
    expect(timing).toMatch(/signals-newBrowser;dur=/);
    expect(timing).toMatch(/policy;dur=/);
    // The wait between reading the request and its handler, which the deadline counts.
    expect(timing).toMatch(/queue;dur=\d+(\.\d)?$/);
  });

  it('answers a decision as JSON of its exact length, with Server-Timing, on a kept-alive connection', async () => {
    const body = JSON.stringify(demoRequest('alice', undefined));
    const answer = await postRaw(`${h.url}/decide`, CALLER_KEY, body);
    expect(answer.status).toBe(200);
    const headers = new Map<string, string>();
    for (let i = 0; i < answer.rawHeaders.length; i += 2)
      headers.set(answer.rawHeaders[i]!.toLowerCase(), answer.rawHeaders[i + 1]!);
    expect([...headers.keys()].sort()).toEqual([
      'connection',
      'content-length',
      'content-type',
      'date',
      'keep-alive',
      'server-timing',
    ]);
    expect(headers.get('content-type')).toBe('application/json');
    expect(headers.get('content-length')).toBe(String(Buffer.byteLength(answer.text)));
    expect(headers.get('connection')).toBe('keep-alive');
    expect(headers.get('server-timing')).toMatch(/^total;dur=.*queue;dur=\d+(\.\d)?$/);
    expect(decideResponseSchema.safeParse(JSON.parse(answer.text)).error).toBeUndefined();
  });

  it('writes a replayable decision log line for it, off the response path', async () => {
    const answer = await h.decide(demoRequest('alice', undefined));
    await new Promise((r) => setImmediate(r));
    const line = h.lines.find((l) => l.decisionId === answer.body.decisionId);
    expect(line).toMatchObject({
      kind: 'decision',
      request: { accountId: 'alice', unitId: 'alice-web' },
      policy: answer.body.policy,
      outcome: { verdict: answer.body.verdict, score: answer.body.score },
      inputs: { signals: { newBrowser: { status: expect.any(String) } } },
      timings: { totalMs: expect.any(Number), calls: expect.any(Array) },
    });
  });

  it('GET /metrics exposes decisions, latency and upstream calls as Prometheus text', async () => {
    await h.decide(demoRequest('alice', undefined));
    await new Promise((r) => setImmediate(r));
    const res = await ops('/metrics');
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(text).toMatch(/^riskgate_decisions_total\{verdict="\w+",degraded="(true|false)"\} [1-9]/m);
    expect(text).toMatch(/^riskgate_decision_duration_seconds_bucket\{verdict="\w+",le="\+Inf"\} [1-9]/m);
    expect(text).toMatch(
      /^riskgate_upstream_call_duration_seconds_count\{upstream="signals",operation="new-browser"\} [1-9]/m,
    );
    expect(text).toMatch(/^riskgate_token_refreshes_total\{outcome="ok"\} 1$/m);
    expect(text).toMatch(/^riskgate_action_queue_size 0$/m);
  });

  it('GET /metrics reports the runtime, the edge and the build: loop delay, memory, GC, in-flight, 4xx by code, build info', async () => {
    // A refused request of each kind the edge counts: no key (401) and a malformed body (400).
    expect((await fetch(`${h.url}/decide`, { method: 'POST', body: '{}' })).status).toBe(401);
    expect((await h.decide('{"accountId": 7}')).status).toBe(400);
    // Short-lived garbage (tens of MB) makes the young generation collect: a pause to show.
    let kept = 0;
    for (let i = 0; i < 200; i++) kept += new Array(50_000).fill(i).length;
    expect(kept).toBe(10_000_000);
    // The GC observer reports after the pause: scraped until it shows, not after a guessed wait.
    const gcSeen = /^riskgate_gc_duration_seconds_count\{kind="(minor|major|incremental|weakcb)"\} [1-9]/m;
    const text = await eventually(
      async () => {
        const scraped = await (await ops('/metrics')).text();
        return gcSeen.test(scraped) ? scraped : undefined;
      },
      { what: 'a GC pause in /metrics' },
    );
    const value = (pattern: RegExp) => Number(pattern.exec(text)?.[1]);
    expect(value(/^riskgate_event_loop_delay_p99_seconds ([\d.e+-]+)$/m)).toBeGreaterThan(0);
    expect(value(/^riskgate_event_loop_delay_max_seconds ([\d.e+-]+)$/m)).toBeGreaterThan(0);
    expect(value(/^riskgate_event_loop_utilization_ratio ([\d.e+-]+)$/m)).toBeGreaterThanOrEqual(0);
    expect(value(/^nodejs_heap_size_used_bytes ([\d.e+]+)$/m)).toBeGreaterThan(1e6);
    expect(value(/^process_resident_memory_bytes ([\d.e+]+)$/m)).toBeGreaterThan(
      value(/^nodejs_heap_size_used_bytes ([\d.e+]+)$/m),
    );
    expect(text).toMatch(
      /^riskgate_gc_duration_seconds_count\{kind="(minor|major|incremental|weakcb)"\} [1-9]/m,
    );
    // This very scrape is in flight while the gauge is read.
    expect(value(/^riskgate_http_requests_in_flight ([\d]+)$/m)).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/^riskgate_http_errors_total\{status="401",code="RG_ERR_UNAUTHENTICATED"\} [1-9]/m);
    expect(text).toMatch(/^riskgate_http_errors_total\{status="400",code="RG_ERR_INVALID_INPUT"\} [1-9]/m);
    const revision = h.riskgate.policies.current()!.revision;
    expect(text).toContain(
      `riskgate_build_info{version="0.0.0",node_version="${process.versions.node}",policy_revision="${revision}"} 1`,
    );
    // Running totals are counters: the dropped decision log records too.
    expect(text).toMatch(/^# TYPE riskgate_decision_log_dropped_records_total counter$/m);
  });

  it('GET /openapi.json describes POST /decide from the request and response schemas', async () => {
    const doc = (await (await ops('/openapi.json')).json()) as {
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths['/decide'] ?? {})).toEqual(['post']);
    expect(doc.components.schemas.DecideRequest?.required).toEqual(['accountId']);
    expect(Object.keys(doc.components.schemas.DecideRequest?.properties ?? {})).toContain('baseline');
    expect(Object.keys(doc.components.schemas.DecideResponse?.properties ?? {})).toEqual(
      Object.keys(decideResponseSchema.shape),
    );
  });
});

describe('POST /callbacks/admin', () => {
  const ACTIVATION_CODE = 'act-4f9a1c77e2b0';
  const key = () => h.sandbox.config.credentials.callbackSignatureKey;
  const enrollment = JSON.stringify({
    user_id: 'u-1',
    username: 'alice',
    enrollment_id: 'e-1',
    activation_code: ACTIVATION_CODE,
    device_id: 'd-1',
    result: 'success',
  });
  const post = (body: string, signature: string | undefined) =>
    fetch(`${h.url}/callbacks/admin`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(signature === undefined ? {} : { 'x-jws-signature': signature }),
      },
      body,
    });

  it('accepts a callback signed with the callback key over the raw body', async () => {
    const res = await post(enrollment, signCallbackBody(enrollment, key()));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ received: true });
    const line = h.serviceLog.find((l) => l.msg === 'admin callback' && l.enrollment_id === 'e-1');
    expect(line).toEqual({
      level: 'info',
      msg: 'admin callback',
      callback: 'enrollment',
      user_id: 'u-1',
      device_id: 'd-1',
      enrollment_id: 'e-1',
    });
    // The activation code is a secret: no log line carries it, under any key.
    expect(JSON.stringify(h.serviceLog)).not.toContain(ACTIVATION_CODE);
  });

  it('logs an accounts migration callback as such', async () => {
    const migration = JSON.stringify({
      user_id: 'u-1',
      device_id: 'd-1',
      migrated_to_device_id: 'd-2',
      migrated_at: 1,
    });
    const res = await post(migration, signCallbackBody(migration, key()));
    expect(res.status).toBe(200);
    expect(h.serviceLog).toContainEqual(
      expect.objectContaining({ msg: 'admin callback', callback: 'migration' }),
    );
  });

  it('refuses a replayed callback with 409 and does not process it again (the issue: 3 of 3 accepted)', async () => {
    const body = JSON.stringify({
      user_id: 'u-9',
      username: 'carol',
      enrollment_id: 'e-replay',
      activation_code: 'act-replay',
      device_id: 'd-9',
      result: 'success',
    });
    const signature = signCallbackBody(body, key());
    expect((await post(body, signature)).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const again = await post(body, signature);
      expect(again.status).toBe(409);
      expect(again.headers.get('content-type')).toBe('application/problem+json');
      expect(await again.json()).toMatchObject({ code: 'RG_ERR_CALLBACK_REPLAYED', status: 409 });
    }
    const processed = h.serviceLog.filter(
      (l) => l.msg === 'admin callback' && l.enrollment_id === 'e-replay',
    );
    expect(processed).toHaveLength(1);
    expect(h.serviceLog.filter((l) => l.msg === 'admin callback replayed')).toHaveLength(3);
    // The next genuine callback (another body, so another signature) is still taken.
    const next = body.replace('e-replay', 'e-next');
    expect((await post(next, signCallbackBody(next, key()))).status).toBe(200);
  });

  it('refuses a replay re-spelled (a = pad, other unused low bits) as a replay: one signature, processed once', async () => {
    const body = JSON.stringify({
      user_id: 'u-8',
      username: 'dave',
      enrollment_id: 'e-respelled',
      activation_code: 'act-respelled',
      device_id: 'd-8',
      result: 'success',
    });
    const signature = signCallbackBody(body, key());
    const [header, mac] = signature.split('..') as [string, string];
    expect((await post(body, signature)).status).toBe(200);
    const respelled = respellings(mac);
    for (const other of respelled) {
      const again = await post(body, `${header}..${other}`);
      expect(again.status, other).toBe(409);
      expect(await again.json()).toMatchObject({ code: 'RG_ERR_CALLBACK_REPLAYED' });
    }
    const processed = h.serviceLog.filter(
      (l) => l.msg === 'admin callback' && l.enrollment_id === 'e-respelled',
    );
    expect(processed).toHaveLength(1);
  });

  it('refuses a fresh callback in a spelling the vendor never sends (401), and takes it canonical after', async () => {
    const body = JSON.stringify({ user_id: 'u-7', enrollment_id: 'e-padded', result: 'success' });
    const [header, mac] = signCallbackBody(body, key()).split('..') as [string, string];
    const padded = await post(body, `${header}..${mac}=`);
    expect(padded.status).toBe(401);
    expect(await padded.json()).toMatchObject({ code: 'RG_ERR_INVALID_SIGNATURE' });
    expect(h.serviceLog).toContainEqual(
      expect.objectContaining({ msg: 'admin callback refused', reason: 'NON_CANONICAL_SIGNATURE' }),
    );
    // Not remembered: the canonical delivery of the same callback is processed.
    expect((await post(body, `${header}..${mac}`)).status).toBe(200);
  });

  it('refuses a tampered body, a wrong key and a missing signature with 401', async () => {
    const signature = signCallbackBody(enrollment, key());
    const tampered = enrollment.replace('"u-1"', '"u-2"');
    for (const [body, sig] of [
      [tampered, signature],
      [enrollment, signCallbackBody(enrollment, 'another-key')],
      [enrollment, undefined],
      [enrollment, 'eyJhbGciOiJub25lIn0..'],
    ] as const) {
      const res = await post(body, sig);
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ code: 'RG_ERR_INVALID_SIGNATURE' });
    }
  });
});
