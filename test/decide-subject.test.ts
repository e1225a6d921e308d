import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * Subject binding (issue 15, item 1: the confused deputy), over real HTTP. A key holder sending
 * mallory's remote-controlled browser with dave's userId used to get dave locked out; carol's body
 * with alice's userId rewrote alice's allowed factors. riskgate acts only on the identity it
 * scored: the Admin user must be the account's (username = accountId), a device must be that
 * user's; otherwise 400 naming the field, and nothing happens to anyone.
 */

let h: Harness;
let ids: Record<string, string | undefined>;

beforeAll(async () => {
  // Patient timeouts: mallory's deny rests on her signals, however busy the machine.
  h = await startHarness({ policy: { yaml: patientShippedPolicy() }, deadlineMs: PATIENT_DEADLINE_MS });
  ids = await lookUpUserIds(h.sandbox, ['alice', 'carol', 'dave', 'mallory']);
});
afterAll(() => h.stop());

const adminStatus = async (userId: string) => {
  h.riskgate.admin.invalidateUser(userId);
  const r = await h.riskgate.admin.getUser(userId, { timeoutMs: 2000 });
  if (!r.ok) throw r.error;
  return r.value;
};

describe('subject binding', () => {
  it("refuses mallory's login naming dave's userId: 400 naming userId, dave is not locked out", async () => {
    await h.control('POST', '/sandbox/stats/reset');
    const { status, headers, body } = await h.decide({
      ...demoRequest('mallory', ids.mallory),
      userId: ids.dave,
    });
    expect(status).toBe(400);
    expect(headers.get('content-type')).toBe('application/problem+json');
    expect(body).toMatchObject({ code: 'RG_ERR_INVALID_INPUT', field: 'userId' });
    // Nothing reveals whose account dave's id is.
    expect(JSON.stringify(body)).not.toContain('dave');
    // A refused request queues nothing: an action is in the outbox before any answer.
    expect(await h.queued({ target: ids.dave })).toEqual([]);
    expect(await h.calls('PUT /srv/admin/v1/users/:id')).toBe(0);
    expect(await h.calls('POST /srv/admin/v1/users/:id/one_time_code')).toBe(0);
    expect((await adminStatus(ids.dave!)).status).toBe('enabled');
  });

  it("refuses carol's login naming alice's userId: alice's allowed factors stay as they were", async () => {
    const before = await adminStatus(ids.alice!);
    const carol = {
      accountId: 'carol',
      userId: ids.alice,
      platform: 'mobile',
      unitId: 'carol-app',
      verificationStatus: 'unverified',
      interactionId: 'carol-login-1',
      baseline: { unitId: 'carol-app', verificationStatus: 'verified' },
    };
    const { status, body } = await h.decide(carol);
    expect(status).toBe(400);
    expect(body).toMatchObject({ field: 'userId' });
    expect(await h.queued({ target: ids.alice })).toEqual([]);
    expect((await adminStatus(ids.alice!)).allowed_factors).toEqual(before.allowed_factors);
  });

  it("refuses a deviceId that is not one of the user's devices", async () => {
    const { status, body } = await h.decide({
      ...demoRequest('alice', ids.alice),
      deviceId: 'DPNOTALICESDEVICE000',
    });
    expect(status).toBe(400);
    expect(body).toMatchObject({ field: 'deviceId' });
  });

  it('acts when the user is the account’s, and takes no action while the user cannot be read', async () => {
    const ok = await h.decide(demoRequest('alice', ids.alice));
    expect(ok.status).toBe(200);
    // mallory's own login while the Admin user read fails: denied, nobody locked out while it fails
    // (the lock-out is deferred until the user is verified: test/decide-subject-deferred.test.ts).
    await h.control('PUT', '/sandbox/faults', {
      rules: [{ route: 'GET /srv/admin/v1/users/*', errorRate: 1, errorStatus: 503 }],
    });
    try {
      h.riskgate.admin.invalidateUser(ids.mallory!);
      await h.control('POST', '/sandbox/stats/reset');
      const { status, body } = await h.decide(demoRequest('mallory', ids.mallory));
      expect(status).toBe(200);
      expect(body.verdict).toBe('deny');
      expect(body.actions).toContainEqual(
        expect.objectContaining({ type: 'lock_out_user', status: 'deferred', reason: 'subject_unverified' }),
      );
      // Its attempt has run and been held back by the failing read: no lock-out call was made.
      const decisionId = body.decisionId;
      const tried = await eventually(async () => {
        const [entry] = await h.queued({ decisionId });
        return entry !== undefined && entry.attempts >= 1 && entry.lastError !== undefined && entry;
      });
      expect(tried.spec).toMatchObject({ type: 'lock_out_user', verifySubject: { userId: ids.mallory } });
      expect(await h.calls('PUT /srv/admin/v1/users/:id')).toBe(0);
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
  });
});
