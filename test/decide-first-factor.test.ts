import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecideRequest } from '../src/decide/decide-request.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * A lock-out is never a weapon (policies/README.md): the shipped policy denies mallory's
 * remote-controlled login whatever her request says about the password, but locks her account
 * out only when the login backend says the first factor passed. Over the real sandbox: its Admin
 * user is the evidence of what riskgate did.
 */

let h: Harness;
let mallory: string;
beforeAll(async () => {
  // Patient timeouts and deadline: the verdicts, not the timing, are tested (a busy machine must
  // not turn them).
  h = await startHarness({ policy: { yaml: patientShippedPolicy() }, deadlineMs: PATIENT_DEADLINE_MS });
  mallory = (await lookUpUserIds(h.sandbox, ['mallory'])).mallory!;
});
afterAll(() => h?.stop());

/** mallory's demo login with `firstFactor` as given (`undefined`: the field left out). */
function malloryLogin(firstFactor: DecideRequest['firstFactor']): DecideRequest {
  const { firstFactor: _passed, ...request } = demoRequest('mallory', mallory);
  return firstFactor === undefined ? request : { ...request, firstFactor };
}

const WITHHELD = {
  type: 'lock_out_user',
  name: 'lockOut',
  source: 'rat-confirmed',
  status: 'skipped',
  reason: 'first_factor_not_passed',
};

const decisionLine = (decisionId: unknown) =>
  eventually(async () => h.lines.find((l) => l.kind === 'decision' && l.decisionId === decisionId));

describe('a remote-controlled login and the first factor', () => {
  const withheldDecisions: unknown[] = [];

  it.each([
    ['says its first factor failed', 'failed'],
    ['does not say how its first factor went', undefined],
  ] as const)('is denied without a lock-out when it %s', async (_what, firstFactor) => {
    const { status, body } = await h.decide(malloryLogin(firstFactor));
    expect(status).toBe(200);
    expect(body.verdict).toBe('deny');
    expect((body.reasons as { id: string }[]).map((r) => r.id)).toEqual(['rat-confirmed']);
    expect(body.actions).toEqual([WITHHELD]);
    expect((body.explanation as Record<string, unknown>).suppressedActions).toEqual([
      { name: 'lockOut', type: 'lock_out_user', source: 'rat-confirmed', reason: 'first_factor_not_passed' },
    ]);
    expect(await decisionLine(body.decisionId)).toMatchObject({ actions: [WITHHELD] });
    expect(await adminUserStatus(h.sandbox, mallory)).toBe('enabled');
    withheldDecisions.push(body.decisionId);
  });

  it('locks the account out when it says its first factor passed, and only that one', async () => {
    const { body } = await h.decide(malloryLogin('passed'));
    expect(body.verdict).toBe('deny');
    expect(body.actions).toEqual([
      { type: 'lock_out_user', name: 'lockOut', source: 'rat-confirmed', status: 'queued' },
    ]);
    await eventually(async () => (await adminUserStatus(h.sandbox, mallory)) === 'locked_out');
    // One user's actions run in order: had an earlier decision queued a lock-out, its outcome
    // would be logged before this one's.
    await eventually(async () =>
      h.lines.find((l) => l.kind === 'action' && l.decisionId === body.decisionId),
    );
    expect(withheldDecisions).toHaveLength(2);
    const actionLines = h.lines.filter((l) => l.kind === 'action').map((l) => l.decisionId);
    expect(actionLines).toEqual([body.decisionId]);
  });
});
