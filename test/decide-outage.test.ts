import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, startHarness } from './decide-harness.ts';

/**
 * A total vendor outage with the shipped policy, over real HTTP: every Trust Signals and Admin call
 * fails (the token is already held). The worst a login gate can do then is lock everyone out; the
 * policy's outage section makes it a step-up instead, and no action reaches the Admin API.
 */

let h: Harness;
let userIds: Record<string, string | undefined>;

beforeAll(async () => {
  h = await startHarness();
  userIds = await lookUpUserIds(h.sandbox, ['alice', 'dave', 'mallory']);
});
afterAll(() => h.stop());

describe('every vendor down', () => {
  it.each(['alice', 'dave', 'mallory'])(
    '%s is challenged, never denied, and no action is taken',
    async (name) => {
      await h.control('PUT', '/sandbox/faults', {
        rules: [
          { route: '* /api/v1/*', errorRate: 1, errorStatus: 503 },
          { route: '* /srv/admin/v1/*', errorRate: 1, errorStatus: 503 },
        ],
      });
      try {
        await h.control('POST', '/sandbox/stats/reset');
        const { status, body } = await h.decide(demoRequest(name, userIds[name]));
        expect(status).toBe(200);
        expect(body.verdict).toBe('challenge');
        expect(body.degraded).toBe(true);
        expect(body.explanation).toMatchObject({
          decidedBy: 'outage',
          outage: { rule: { id: 'vendor-outage', verdict: 'challenge' } },
        });
        expect(
          (body.explanation as { outage: { unavailableInputs: number } }).outage.unavailableInputs,
        ).toBeGreaterThanOrEqual(3);
        const actions = body.actions as { type: string; status: string }[];
        expect(actions.filter((a) => a.type !== 'one_time_code')).toEqual([]);
        // The vendor was asked (and failed): this is an outage, not a short-cut.
        expect(await h.calls('GET /api/v1/signals/new-browser')).toBeGreaterThan(0);
        // Nothing queued (an action is in the outbox before the answer), so nothing can follow.
        expect(await h.queued({ decisionId: body.decisionId })).toEqual([]);
        expect(await h.calls('PUT /srv/admin/v1/users/:id')).toBe(0);
      } finally {
        await h.control('DELETE', '/sandbox/faults');
      }
    },
  );
});
