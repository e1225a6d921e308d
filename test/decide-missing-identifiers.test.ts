import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { DecideRequest } from '../src/decide/decide-request.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * A login that leaves out an identifier a signal needs must not switch that signal off: over real
 * HTTP with the shipped policy, the signal is unavailable (`missing_identifiers`), the policy's
 * onUnavailable applies and the decision is degraded. Only a platform the signal does not cover
 * makes it `not_applicable`. The shipped policy runs with patient timeouts: a signal a busy machine
 * answers late must not be what makes a decision here degraded.
 */

interface Treatment {
  onUnavailable: 'ignore' | { score?: number; verdict?: string };
}
const POLICY = patientShippedPolicy();
const shipped = parse(POLICY) as {
  signals: Record<string, Treatment>;
  admin: Record<string, Treatment>;
  thresholds: { challenge: number; deny: number };
};

let h: Harness;
let userIds: Record<string, string | undefined>;
beforeAll(async () => {
  h = await startHarness({ policy: { yaml: POLICY }, deadlineMs: PATIENT_DEADLINE_MS });
  userIds = await lookUpUserIds(h.sandbox, ['alice', 'mallory', 'trudy']);
  await h.decide(demoRequest('alice', userIds.alice)); // warm up both processes
});
afterAll(() => h?.stop());

const without = (request: DecideRequest, ...fields: (keyof DecideRequest)[]): DecideRequest => {
  const copy = { ...request };
  for (const f of fields) delete copy[f];
  return copy;
};

describe('missing identifiers', () => {
  it('mallory on a browser without interactionId is no longer allowed: remote access is unavailable, not skipped', async () => {
    const { status, body } = await h.decide(
      without(demoRequest('mallory', userIds.mallory), 'interactionId'),
    );
    expect(status).toBe(200);
    const treatment = shipped.signals.remoteAccessTool!.onUnavailable;
    expect(treatment).toEqual({ score: 40 }); // what the verdict below relies on
    expect(body.signals).toMatchObject({
      remoteAccessTool: { status: 'unavailable', reason: 'missing_identifiers', treatment: 'score:40' },
    });
    expect(body.degraded).toBe(true);
    expect(body.verdict).not.toBe('allow');
    expect(body.verdict).toBe('challenge');
    expect(body.score as number).toBeGreaterThanOrEqual(shipped.thresholds.challenge);
    // The proximity offset reads the remote access tool too: not counted, and the answer says so.
    expect(body.explanation).toMatchObject({
      decidedBy: 'score',
      skipped: expect.arrayContaining([
        { id: 'near-enrolled-phone', reason: 'remoteAccessTool unavailable (missing_identifiers)' },
      ]),
    });
  });

  it('the same without a platform is treated alike (the platform could be a browser)', async () => {
    const { body } = await h.decide(
      without(demoRequest('mallory', userIds.mallory), 'interactionId', 'platform'),
    );
    expect(body.signals).toMatchObject({
      remoteAccessTool: { status: 'unavailable', reason: 'missing_identifiers' },
    });
    expect(body).toMatchObject({ degraded: true, verdict: 'challenge' });
  });

  it('a login without userId is degraded: the Admin user is unavailable and its onUnavailable applies', async () => {
    const { body } = await h.decide(demoRequest('alice', undefined));
    const score = (shipped.admin.user!.onUnavailable as { score: number }).score;
    expect(body.signals).toMatchObject({
      adminUser: { status: 'unavailable', reason: 'missing_identifiers', treatment: `score:${score}` },
    });
    expect(body.degraded).toBe(true);
    // alice's own login scores -30 (near her phone); the missing user adds the policy's score.
    const withUser = await h.decide(demoRequest('alice', userIds.alice));
    expect(withUser.body.degraded).toBe(false);
    expect(body.score).toBe((withUser.body.score as number) + score);
  });

  it('a browser-only signal on a mobile login is still not applicable, and not degraded for it', async () => {
    const { body } = await h.decide({
      accountId: 'trudy',
      userId: userIds.trudy!,
      platform: 'mobile',
      unitId: 'trudy-app',
      verificationStatus: 'unverified',
      interactionId: 'trudy-login-1',
      baseline: { unitId: 'trudy-app', verificationStatus: 'verified' },
    });
    expect(body.signals).toMatchObject({
      remoteAccessTool: { status: 'unavailable', reason: 'not_applicable', treatment: 'ignore' },
      newBrowser: { status: 'unavailable', reason: 'not_applicable', treatment: 'ignore' },
    });
    expect(body.degraded, JSON.stringify(body.signals)).toBe(false);
  });
});
