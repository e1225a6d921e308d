import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { SteppedClock } from '../src/timing/driven-clock.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * Event-history features over real HTTP: failed authentications and a reused TOTP, simulated in the
 * sandbox (its authentication API emits the Log API events), reach the follower once the Log API
 * serves them (two minutes later: the sandbox clock and the follower's move on together) and
 * become `history.*` features of the user's next decision.
 */

type Reports = Record<string, { status: string; result?: Record<string, number>; reason?: string }>;

/** riskgate's clock, stepped with the sandbox's. */
const clock = new SteppedClock();

describe('history features from the Log API', () => {
  let h: Harness;
  let bob: string;
  beforeAll(async () => {
    // Patient timeouts: a history read (50 ms in the shipped policy) late on a busy machine would
    // be unavailable, and bob's deny a degraded challenge.
    h = await startHarness({
      policy: { yaml: patientShippedPolicy() },
      deadlineMs: PATIENT_DEADLINE_MS,
      riskgate: { clock, logs: { pollIntervalMs: 50 } },
    });
    bob = (await lookUpUserIds(h.sandbox, ['bob'])).bob!;
  });
  afterAll(() => h?.stop());

  it('is available once the follower has read the last day, with its lag', async () => {
    const r = await h.decide(demoRequest('bob', bob));
    const history = (r.body.signals as Reports).history!;
    expect(history.status).toBe('ok');
    expect(history.result?.failedAuthentications1h).toBe(0);
    // At least the Log API's own two minutes, well under the policy's 600 s bound.
    expect(history.result?.lagSeconds).toBeGreaterThanOrEqual(110);
    expect(history.result?.lagSeconds).toBeLessThan(600);
  });

  it('turns failed authentications and a reused TOTP into features within the follower lag', async () => {
    for (let i = 0; i < 5; i++) {
      await h.control('POST', '/sandbox/authentications', {
        user_id: bob,
        result: 'failure',
        factor: 'passcode',
        totp_reused: i === 4,
      });
    }
    // Not yet readable: the Log API serves events two minutes old.
    const before = await h.decide(demoRequest('bob', bob));
    expect((before.body.signals as Reports).history?.result?.failedAuthentications1h).toBe(0);

    await h.control('POST', '/sandbox/clock', { advanceSeconds: 130 });
    clock.step(130_000);
    const after = await eventually(async () => {
      const r = await h.decide(demoRequest('bob', bob));
      return (r.body.signals as Reports).history?.result?.failedAuthentications1h === 5 ? r : undefined;
    });
    expect((after.body.signals as Reports).history?.result).toMatchObject({
      failedAuthentications1h: 5,
      failedAuthentications24h: 5,
      totpReuses24h: 1,
    });
    const reasons = (after.body.reasons as { id: string }[]).map((x) => x.id);
    expect(reasons).toEqual(expect.arrayContaining(['failures-before-login', 'totp-reused']));
    // bob's new browser (40) with five failures (30) and a reused code (40): a deny on score.
    expect(after.body.verdict).toBe('deny');
  });

  it('keeps other users out of it', async () => {
    const { alice } = await lookUpUserIds(h.sandbox, ['alice']);
    const r = await h.decide(demoRequest('alice', alice));
    expect((r.body.signals as Reports).history?.result).toMatchObject({
      failedAuthentications1h: 0,
      totpReuses24h: 0,
    });
  });

  it('is unavailable without a userId to key it by', async () => {
    const r = await h.decide({ accountId: 'bob' });
    expect((r.body.signals as Reports).history).toMatchObject({
      status: 'unavailable',
      reason: 'missing_identifiers',
    });
  });
});
