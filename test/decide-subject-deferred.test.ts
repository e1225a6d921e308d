import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, type HarnessOptions, startHarness } from './decide-harness.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';
import { LOCK_EVERYONE_POLICY } from './support/lock-everyone-policy.ts';
import {
  oneRiskgateOn,
  postgresAvailable,
  type RunningPostgres,
  startPostgres,
} from './support/postgres-server.ts';

/**
 * Issue 22, item 5: an Admin API read outage made the subject `unverified` and the lock-out was
 * skipped (`subject_unverified`): mallory stayed enabled after the Admin API recovered. Now the
 * lock-out is deferred: kept (durably with an outbox) and carried out once its subject is verified
 * as the account's; a subject that turns out not to be the account's is never locked. Over the
 * sandbox's fault injection, in each action mode.
 */

const ADMIN_READS_FAIL = { rules: [{ route: 'GET /srv/admin/v1/users/*', errorRate: 1, errorStatus: 503 }] };
const PUT_USER = 'PUT /srv/admin/v1/users/:id';

type Mode = { name: string; env?: Record<string, string>; postgres?: boolean };
const MODES: Mode[] = [
  { name: 'the memory outbox', env: { RISKGATE_OUTBOX: 'memory' } },
  { name: 'the outbox in the SQLite database' },
  { name: 'the outbox in PostgreSQL', postgres: true },
];

describe.each(MODES)('an Admin read outage during a deny, with $name', (mode) => {
  const skip = mode.postgres === true && !postgresAvailable();
  let pg: RunningPostgres | undefined;
  let h: Harness;
  let ids: Record<string, string | undefined>;
  beforeAll(async () => {
    if (skip) return;
    pg = mode.postgres ? await startPostgres() : undefined;
    const options: HarnessOptions = {
      // Every login denied and locked out: the test is of the action path, not of risk.
      policy: { yaml: LOCK_EVERYONE_POLICY },
      env: {
        ...mode.env,
        ...(pg !== undefined && oneRiskgateOn(pg.url)),
      },
      // Retries close together, within the outbox's horizon, to outlast this test's outage.
      riskgate: { actionQueue: { baseDelayMs: 100, maxDelayMs: 1000 } },
    };
    h = await startHarness(options);
    ids = await lookUpUserIds(h.sandbox, ['mallory', 'alice']);
  });
  afterAll(async () => {
    await h?.stop();
    await pg?.stop();
  });

  it.skipIf(skip)(
    'answers the lock-out deferred, locks mallory out once the Admin API reads again, and never locks a subject that is not the account’s',
    async () => {
      const { mallory, alice } = ids as { mallory: string; alice: string };
      let confusedId: unknown;
      await h.control('PUT', '/sandbox/faults', ADMIN_READS_FAIL);
      try {
        h.riskgate.admin.invalidateUser(mallory);
        h.riskgate.admin.invalidateUser(alice);
        await h.control('POST', '/sandbox/stats/reset');
        const own = await h.decide(demoRequest('mallory', mallory));
        expect(own.status).toBe(200);
        expect(own.body.verdict).toBe('deny');
        expect(own.body.actions).toEqual([
          expect.objectContaining({
            type: 'lock_out_user',
            status: 'deferred',
            reason: 'subject_unverified',
          }),
        ]);
        // mallory's login naming alice's user id, while nobody can check whose it is.
        const confused = await h.decide(demoRequest('mallory', alice));
        expect(confused.status).toBe(200);
        confusedId = confused.body.decisionId;
        expect(confused.body.actions).toEqual([
          expect.objectContaining({
            type: 'lock_out_user',
            status: 'deferred',
            reason: 'subject_unverified',
          }),
        ]);
        // Nothing is locked while the subject cannot be verified: both attempts have run, and
        // been held back by the failing read.
        for (const decisionId of [own.body.decisionId, confusedId]) {
          await eventually(async () => {
            const [entry] = await h.queued({ decisionId });
            return entry !== undefined && entry.attempts >= 1 && entry.lastError !== undefined;
          });
        }
        expect(await h.calls(PUT_USER)).toBe(0);
      } finally {
        await h.control('DELETE', '/sandbox/faults');
      }

      await eventually(
        async () => ((await adminUserStatus(h.sandbox, mallory)) === 'locked_out' ? true : undefined),
        15_000,
      );
      // The confused action ends dropped, recorded, and alice was never touched.
      const outcome = await eventually(
        async () =>
          h.lines.find((l) => l.kind === 'action' && l.decisionId === confusedId && l.status === 'failed'),
        15_000,
      );
      expect(outcome).toMatchObject({ reason: 'subject_mismatch', target: alice });
      expect(await adminUserStatus(h.sandbox, alice)).toBe('enabled');
      expect(await h.calls(PUT_USER)).toBe(1);
    },
  );
});
