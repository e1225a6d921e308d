import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecideRequest } from '../src/decide/decide-request.ts';
import { DEMO_ACCOUNTS, demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { createLogClient } from '../src/logs/log-client.ts';
import type { LogEvent } from '../src/logs/log-event.ts';
import { SteppedClock } from '../src/timing/driven-clock.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * The product, end to end: riskgate with the shipped policy (policies/), the real clients and the
 * real sandbox with its default scenario, over HTTP on port 0. Each demo account's login (the
 * requests `npm start` prints) gets its verdict with the expected reasons, and a deny's lock-out
 * reaches the Admin API and its event the Log API. The policy's timeouts are patient ones
 * (test/support/patient-policy.ts): a signal a busy machine answers late would make a decision
 * correct but degraded, and the verdicts are what is tested here.
 */

let h: Harness;
let userIds: Record<string, string | undefined>;
beforeAll(async () => {
  h = await startHarness({ policy: { yaml: patientShippedPolicy() }, deadlineMs: PATIENT_DEADLINE_MS });
  userIds = await lookUpUserIds(h.sandbox, ['alice', 'bob', 'mallory', 'trudy', 'carol', 'dave']);
  // Warm up both processes: a cold first call is the slowest.
  for (const login of [demoRequest('alice', undefined), appLogin('dave')]) await h.decide(login);
});
afterAll(() => h?.stop());

type Reason = { id: string };
type Action = { type: string; status: string; oneTimeCode?: string; expiresAt?: number };

const reasonIds = (body: Record<string, unknown>) => (body.reasons as Reason[]).map((r) => r.id).sort();
const actions = (body: Record<string, unknown>) => body.actions as Action[];

/**
 * A mobile-app login of `name` (the scenario's `<name>-app` unit), compared for proximity with the
 * app's own verified history: without a baseline, proximity would be unavailable (degraded).
 */
function appLogin(name: string): DecideRequest {
  return {
    accountId: name,
    userId: userIds[name]!,
    platform: 'mobile',
    unitId: `${name}-app`,
    verificationStatus: 'unverified',
    interactionId: `${name}-login-1`,
    baseline: { unitId: `${name}-app`, verificationStatus: 'verified' },
  };
}

/** A decision over HTTP that must not be degraded (the message names what was unavailable). */
async function decideHealthy(request: DecideRequest): Promise<Record<string, unknown>> {
  const { status, body } = await h.decide(request);
  expect(status).toBe(200);
  expect(body.degraded, JSON.stringify(body.signals)).toBe(false);
  return body;
}

async function adminUser(userId: string): Promise<{ status: string }> {
  const answer = await h.riskgate.admin.getUser(userId, { timeoutMs: 2000 });
  if (!answer.ok) throw answer.error;
  return answer.value;
}

describe('the demo accounts, as npm start prints them', () => {
  it('every printed account has an Admin user id', () => {
    for (const { username } of DEMO_ACCOUNTS) expect(userIds[username], username).toBeDefined();
  });

  it('alice is allowed: a known browser next to her enrolled phone', async () => {
    const body = await decideHealthy(demoRequest('alice', userIds.alice));
    expect(body).toMatchObject({ verdict: 'allow', actions: [] });
    expect(reasonIds(body)).toEqual(['near-enrolled-phone']);
    expect(body.signals).toMatchObject({ newBrowser: { status: 'ok', result: { known: true } } });
  });

  it('answers the fields a policy uses, not the vendor’s whole answer, and how the verdict came about', async () => {
    const body = await decideHealthy(demoRequest('alice', userIds.alice));
    const signals = body.signals as Record<string, Record<string, unknown>>;
    // Echoed identifiers and per-unit times are the vendor's business; supporting signals are
    // compacted to the types that matched, as a policy reads them (matchedSignals).
    expect(Object.keys(signals.remoteAccessTool!).sort()).toEqual([
      'observationTime',
      'result',
      'status',
      'success',
    ]);
    expect(signals.latestProximity).toEqual({
      status: 'ok',
      success: true,
      observationTime: expect.any(String),
      result: {
        proximityConfidence: expect.any(Number),
        matchedSignals: expect.arrayContaining(['wifiNetworkOverlap']),
      },
    });
    expect(signals.adminUser).toEqual({
      status: 'ok',
      result: { status: 'enabled', failed_attempts: expect.any(Number), max_attempts: expect.any(Number) },
    });
    expect(signals.adminDevices).toEqual({ status: 'ok', result: { count: 1 } });
    // Rules for the other platform (geovelocity, active call) are not listed as skipped.
    expect(body.explanation).toEqual({ thresholds: { challenge: 40, deny: 80 }, decidedBy: 'score' });
    // The decision log keeps the vendor's whole answer for replay.
    await new Promise((r) => setImmediate(r));
    const line = h.lines.find((l) => l.decisionId === body.decisionId) as {
      inputs: { signals: { latestProximity: { response: { result: { supportingSignals: unknown[] } } } } };
    };
    expect(line.inputs.signals.latestProximity.response.result.supportingSignals[0]).toHaveProperty(
      'details',
    );
    expect(JSON.stringify(body)).not.toContain('supportingSignals');
  });

  it('bob is challenged for a new browser on another OS, with a one-time code to step up', async () => {
    const body = await decideHealthy(demoRequest('bob', userIds.bob));
    expect(body.verdict).toBe('challenge');
    expect(reasonIds(body)).toEqual(['new-browser', 'new-browser-os-changed']);
    const [otc] = actions(body);
    expect(otc).toMatchObject({ type: 'one_time_code', status: 'done' });
    expect(otc?.oneTimeCode).toMatch(/^\d{4} \d{4}$/); // the policy asks for 8 digits
    expect(otc?.expiresAt).toBeGreaterThan(Date.now() / 1000);
    // A secret: the decision log keeps only that one was issued.
    await new Promise((r) => setImmediate(r));
    const line = h.lines.find((l) => l.decisionId === body.decisionId);
    expect(JSON.stringify(line)).not.toContain(otc!.oneTimeCode!);
  });

  it('mallory is denied for a remote-controlled browser, and the lock-out reaches the Admin and Log APIs', async () => {
    const decidedAt = Date.now();
    const body = await decideHealthy(demoRequest('mallory', userIds.mallory));
    expect(body.verdict).toBe('deny');
    expect(reasonIds(body)).toEqual(['rat-confirmed']);
    expect(actions(body)).toEqual([expect.objectContaining({ type: 'lock_out_user', status: 'queued' })]);

    const locked = await eventually(async () => {
      const user = await adminUser(userIds.mallory!);
      return user.status === 'locked_out' ? user : undefined;
    });
    expect(locked.status).toBe('locked_out');
    await eventually(async () =>
      h.lines.find((l) => l.kind === 'action' && l.decisionId === body.decisionId),
    ).then((line) => expect(line).toMatchObject({ type: 'lock_out_user', status: 'done', attempts: 1 }));

    // The Log API serves events once they are a minute old: move the sandbox clock past that.
    await h.control('POST', '/sandbox/clock', { advanceSeconds: 120 });
    const creds = h.sandbox.config.credentials;
    const logs = createLogClient({
      baseUrl: h.sandbox.url,
      service: { id: creds.serviceId, apiKey: creds.serviceLogApiKey },
      clock: new SteppedClock(120_000),
    });
    const events: LogEvent[] = [];
    const read = await logs.readWindow(
      'service',
      {
        start: Math.floor(decidedAt / 1000) * 1000 - 5000,
        end: Math.floor(decidedAt / 1000) * 1000 + 55_000,
      },
      (e) => events.push(e),
    );
    await logs.close();
    expect(read.ok).toBe(true);
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'user.updated', user_id: userIds.mallory, status: 'locked_out' }),
    );

    const metrics = await (await h.ops('/metrics')).text();
    expect(metrics).toMatch(/^riskgate_action_outcomes_total\{type="lock_out_user",status="done"\} [1-9]/m);
    expect(metrics).toMatch(/^riskgate_remote_access_tool_batch_size_count [1-9]/m);
  });

  it('a second deny of a locked-out user still counts its lock-out done (304 is success)', async () => {
    // mallory is locked out now: the shipped policy denies on the account status too.
    const { body } = await h.decide(demoRequest('mallory', userIds.mallory));
    expect(body.verdict).toBe('deny');
    expect(reasonIds(body)).toContain('account-locked');
    const line = await eventually(async () =>
      h.lines.find((l) => l.kind === 'action' && l.decisionId === body.decisionId),
    );
    expect(line).toMatchObject({ type: 'lock_out_user', status: 'done' });
  });
});

describe('an action the Admin API keeps refusing', () => {
  it('is retried over its horizon, then dead-lettered and logged as failed with the reason: never dropped silently', async () => {
    // Its own riskgate, with a 2-second horizon (the default is 24 h).
    const short = await startHarness({
      policy: { yaml: patientShippedPolicy() },
      deadlineMs: PATIENT_DEADLINE_MS,
      env: { RISKGATE_OUTBOX_HORIZON_SECONDS: '2' },
    });
    try {
      await short.control('PUT', '/sandbox/faults', {
        rules: [{ route: 'PUT /srv/admin/v1/users/*', errorRate: 1, errorStatus: 503 }],
      });
      const { body } = await short.decide(appLogin('carol'));
      expect(actions(body)).toContainEqual(
        expect.objectContaining({ type: 'restrict_factors', status: 'queued' }),
      );
      const line = await eventually(
        async () => short.lines.find((l) => l.kind === 'action' && l.decisionId === body.decisionId),
        10_000,
      );
      expect(line).toMatchObject({
        type: 'restrict_factors',
        target: userIds.carol,
        status: 'failed',
        reason: 'horizon_exhausted:RG_ERR_UPSTREAM_SERVER_ERROR',
      });
      expect(line?.attempts).toBeGreaterThanOrEqual(1);
      const dead = await short.riskgate.outbox!.store.list({ status: 'dead' });
      expect(dead.map((e) => e.spec.decisionId)).toEqual([body.decisionId]);
    } finally {
      await short.stop();
    }
  });
});

describe('the other scenario accounts', () => {
  it('trudy is denied for impossible travel on her phone', async () => {
    const body = await decideHealthy(appLogin('trudy'));
    expect(body.verdict).toBe('deny');
    expect(reasonIds(body)).toEqual(['impossible-travel', 'impossible-travel-extreme']);
    expect(body.signals).toMatchObject({
      remoteAccessTool: { status: 'unavailable', reason: 'not_applicable' },
    });
    // The fastest pair, flattened: what the policy's geovelocity fields read.
    expect((body.signals as Record<string, unknown>).geovelocity).toEqual({
      status: 'ok',
      success: true,
      observationTime: expect.any(String),
      result: {
        anomaly: true,
        maxSpeedKmh: expect.any(Number),
        thresholdKmh: expect.any(Number),
        distanceKm: expect.any(Number),
        elapsedSeconds: expect.any(Number),
      },
    });
  });

  it('carol is challenged while on a phone call: push only, and no one-time code to read aloud', async () => {
    const body = await decideHealthy(appLogin('carol'));
    expect(body.verdict).toBe('challenge');
    expect(reasonIds(body)).toEqual(['on-active-call']);
    // The rule withholds the step-up code the challenge verdict would bring (suppressActions).
    expect(actions(body).map((a) => [a.type, a.status])).toEqual([['restrict_factors', 'queued']]);
    expect(body.explanation).toMatchObject({
      decidedBy: 'score',
      suppressedActions: [
        { name: 'stepUp', type: 'one_time_code', reason: 'suppressed_by_rule', by: 'on-active-call' },
      ],
    });
  });

  it('dave is allowed: his browser is next to his phone', async () => {
    const body = await decideHealthy(demoRequest('dave', userIds.dave));
    expect(body.verdict).toBe('allow');
    expect(reasonIds(body)).toEqual(['near-enrolled-phone']);
  });
});
