import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecideRequest } from '../src/decide/decide-request.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * A login the vendor has no telemetry for, over real HTTP with the shipped policy: a made-up unitId
 * makes every browser signal answer `insufficient_observations`. Unseen is not clean: it is
 * challenged, so inventing a unit buys an attacker nothing over sending none (also challenged).
 */

const RANK = { allow: 1, challenge: 2, deny: 3 } as const;
const DEMO = ['alice', 'bob', 'dave'];

let h: Harness;
let userIds: Record<string, string | undefined>;

beforeAll(async () => {
  // Not a timeout test: patient timeouts keep the signals answered on a busy machine.
  h = await startHarness({ policy: { yaml: patientShippedPolicy() }, deadlineMs: PATIENT_DEADLINE_MS });
  userIds = await lookUpUserIds(h.sandbox, DEMO);
});
afterAll(() => h.stop());

/** The demo login of `name` from a browser unit no SDK ever reported. */
function madeUpUnit(name: string): DecideRequest {
  const unit = `web-${randomUUID()}`;
  return { ...demoRequest(name, userIds[name]), unitId: unit, interactionId: `${unit}-login` };
}

/** The demo login of `name` with no unit identifiers at all. */
function noUnit(name: string): DecideRequest {
  const {
    unitId: _u,
    verificationStatus: _v,
    interactionId: _i,
    baseline: _b,
    ...rest
  } = demoRequest(name, userIds[name]);
  return rest;
}

describe('a browser login with no vendor telemetry', () => {
  it.each(DEMO)('%s from a made-up unitId is challenged by no-telemetry, not degraded', async (name) => {
    const { status, body } = await h.decide(madeUpUnit(name));
    expect(status, JSON.stringify(body)).toBe(200);
    const signals = body.signals as Record<string, { status: string; success?: boolean; reason?: string }>;
    expect(signals.newBrowser).toMatchObject({
      status: 'ok',
      success: false,
      reason: 'insufficient_observations',
    });
    expect(body.verdict).toBe('challenge');
    expect((body.reasons as { id: string }[]).map((r) => r.id)).toContain('no-telemetry');
    expect(body.degraded).toBe(false);
  });

  it('buys nothing over sending no unit ids: a made-up unit is answered at least as carefully', async () => {
    for (const name of DEMO) {
      const invented = await h.decide(madeUpUnit(name));
      const none = await h.decide(noUnit(name));
      const inventedVerdict = invented.body.verdict as keyof typeof RANK;
      const noneVerdict = none.body.verdict as keyof typeof RANK;
      expect(noneVerdict, `${name} without unit ids`).not.toBe('allow');
      expect(RANK[inventedVerdict], name).toBeGreaterThanOrEqual(RANK[noneVerdict]);
    }
  });

  it('challenges a stuffing run of made-up units from its first attempt', async () => {
    for (let i = 0; i < 5; i++) {
      const name = DEMO[i % DEMO.length]!;
      const { body } = await h.decide({ ...madeUpUnit(name), ip: '192.0.2.77' });
      expect(body.verdict, `attempt ${i + 1} (${name})`).toBe('challenge');
    }
  });
});

describe('a deployment without the Log API', () => {
  let bare: Harness;
  beforeAll(async () => {
    bare = await startHarness({
      policy: { yaml: patientShippedPolicy() },
      deadlineMs: PATIENT_DEADLINE_MS,
      sharedSandbox: h.sandbox,
      withoutLogApi: true,
    });
  });
  afterAll(() => bare.stop());

  it('says so once at start-up, and does not mark every decision degraded', async () => {
    const warnings = bare.serviceLog.filter((l) => /Log API is not configured/.test(String(l.msg)));
    expect(warnings).toHaveLength(1);
    const { body } = await bare.decide(demoRequest('alice', userIds.alice));
    expect(body.signals).toMatchObject({ history: { status: 'unavailable', reason: 'not_configured' } });
    expect(body).toMatchObject({ verdict: 'allow', degraded: false });
    expect((body.explanation as Record<string, unknown>).degraded).toBeUndefined();
  });
});
