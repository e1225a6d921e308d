import { DatabaseSync } from 'node:sqlite';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { stateFiles } from '../src/database/state-files.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { collectingEventSink, type RiskgateEvent } from '../src/events/riskgate-event.ts';
import type { LockoutView } from '../src/lockouts/lockout-record.ts';
import { UNLOCK_ANSWERED_FAILED, UNLOCK_LOST_RACE } from '../src/lockouts/lockout-routes.ts';
import type { OutboxEntryView } from '../src/outbox/outbox-view.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';
import { type MemoryAuditTrail, memoryAuditTrail } from './support/memory-audit-trail.ts';
import { describeOnPostgres, oneRiskgateOn, type RunningPostgres } from './support/postgres-server.ts';

/**
 * Issue 30 (review): what an operator unlock answers is what happened. The unlock is queued in the
 * outbox (durable) with its record change, and the Admin API call follows: 202, the audit outcome
 * `queued`, `lockout.ended` once that transaction committed; the sandbox's Admin API failing keeps
 * it queued (retried) and it is made once the Admin API answers. A lock-out that ended first (a lost
 * race, an unlock asked twice, its end come inside the unlock's own transaction: its entry dropped
 * there) is a 409 refused; an outbox that did not take the unlock durably in
 * time (its database held by another writer) is a 503 with Retry-After, audited failed, and the
 * held write, landing later, changes nothing. Over real HTTP, the real sandbox; on SQLite and on a
 * real PostgreSQL (another writer's lock holds the outbox's writes; a trigger ends the lock-out
 * inside the unlock's transaction).
 */

const POLICY = `apiVersion: riskgate/v1
kind: Policy
name: unlock-answers
description: a lasting lock-out for each account of the test
thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: lasting-lockout, description: permanent, when: 'request.accountId in ["alice", "dave", "trudy", "mallory"]', verdict: deny, actions: [lockForGood] }
actions:
  lockForGood: { type: lock_out_user }
`;

/** What differs between the engines: where riskgate keeps its state, and how a test holds it. */
interface Engine {
  start(): Promise<{ env: Record<string, string>; stop: () => Promise<void> }>;
  /** Holds the outbox's writes (another writer's lock) until the returned release. */
  holdOutboxWrites(h: Harness): Promise<() => Promise<void>>;
  /** Makes lock-out `id` end (as its schedule would) inside the transaction of its operator unlock. */
  endInsideUnlock(h: Harness, id: string): Promise<() => Promise<void>>;
}

const SQLITE: Engine = {
  start: async () => ({ env: {}, stop: async () => {} }),
  async holdOutboxWrites(h) {
    const db = new DatabaseSync(stateFiles(h.stateDir).control);
    db.exec('BEGIN IMMEDIATE');
    return async () => {
      db.exec('COMMIT');
      db.close();
    };
  },
  async endInsideUnlock(h, id) {
    const db = new DatabaseSync(stateFiles(h.stateDir).control);
    db.exec(`CREATE TRIGGER end_first AFTER INSERT ON outbox_entry WHEN NEW.id LIKE '${id}:unlock_user:%:operator'
      BEGIN UPDATE lockout SET status = 'expired', ended_by = 'schedule' WHERE id = '${id}'; END`);
    return async () => {
      db.exec('DROP TRIGGER end_first');
      db.close();
    };
  },
};

function postgres(pg: RunningPostgres): Engine {
  let database: RiskgateDatabase | undefined;
  const hand = () => database!.db;
  return {
    async start() {
      // A second connection: the test's hand on the database, riskgate's own untouched.
      database = await openDatabase({ kind: 'postgres', url: pg.url }, { migrations: ALL_MIGRATIONS });
      return {
        env: oneRiskgateOn(pg.url),
        stop: async () => {
          await database?.close();
        },
      };
    },
    async holdOutboxWrites() {
      let release = () => {};
      const released = new Promise<void>((r) => {
        release = r;
      });
      let locked = () => {};
      const holding = new Promise<void>((r) => {
        locked = r;
      });
      const done = hand()
        .transaction()
        .execute(async (tx) => {
          await sql`LOCK TABLE outbox_entry IN EXCLUSIVE MODE`.execute(tx);
          locked();
          await released;
        });
      await holding;
      return async () => {
        release();
        await done;
      };
    },
    async endInsideUnlock(_h, id) {
      await sql
        .raw(`CREATE FUNCTION end_first() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          UPDATE lockout SET status = 'expired', ended_by = 'schedule' WHERE id = '${id}'; RETURN NEW; END $$`)
        .execute(hand());
      await sql
        .raw(`CREATE TRIGGER end_first AFTER INSERT ON outbox_entry FOR EACH ROW
          WHEN (NEW.id LIKE '${id}:unlock_user:%:operator') EXECUTE FUNCTION end_first()`)
        .execute(hand());
      return async () => {
        await sql.raw('DROP TRIGGER end_first ON outbox_entry').execute(hand());
        await sql.raw('DROP FUNCTION end_first()').execute(hand());
      };
    },
  };
}

function unlockAnswers(engine: Engine) {
  let h: Harness;
  let stopEngine: (() => Promise<void>) | undefined;
  let ids: Record<string, string | undefined>;
  let audit: MemoryAuditTrail;
  const events: RiskgateEvent[] = [];

  beforeAll(async () => {
    audit = memoryAuditTrail();
    const on = await engine.start();
    stopEngine = on.stop;
    h = await startHarness({
      policy: { yaml: POLICY },
      deadlineMs: 3000,
      env: on.env,
      riskgate: {
        audit,
        events: collectingEventSink(events),
        // A stalled database is told from a slow one within 300 ms.
        outbox: { pollMs: 50, submitTimeoutMs: 300 },
      },
    });
    ids = await lookUpUserIds(h.sandbox, ['alice', 'dave', 'trudy', 'mallory']);
  }, 60_000);
  afterAll(async () => {
    await h?.stop();
    await stopEngine?.();
  });

  /** Locks `user` out and waits until the Admin API applied it: the lock-out's id. */
  async function lockedOut(user: string): Promise<string> {
    const { status, body } = await h.decide(demoRequest(user, ids[user]));
    expect(status).toBe(200);
    expect(body.actions).toMatchObject([{ type: 'lock_out_user', status: 'queued' }]);
    const id = body.decisionId as string;
    await eventually(async () => ((await lockout(id)).status === 'locked' ? true : undefined), {
      what: `${user} locked`,
    });
    return id;
  }

  async function lockout(id: string): Promise<LockoutView> {
    const res = await h.ops(`/lockouts/${encodeURIComponent(id)}`);
    expect(res.status).toBe(200);
    return (await res.json()) as LockoutView;
  }

  function unlock(id: string, reason = 'help desk verified the user by phone'): Promise<Response> {
    return fetch(`${h.url}/lockouts/${encodeURIComponent(id)}/unlock`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reason }),
    });
  }

  /** The audit entries of the unlocks of `id`, oldest first. */
  const unlockEntries = (id: string) =>
    audit.entries.filter((e) => e.action === 'lockout.unlock' && e.target === id);

  /** The outbox entries of `id`'s operator unlock (and its event's deliveries, none here). */
  async function unlockActions(id: string): Promise<OutboxEntryView[]> {
    const page = (await (await h.ops('/actions?limit=1000')).json()) as { actions: OutboxEntryView[] };
    return page.actions.filter((a) => a.id.startsWith(`${id}:unlock_user`));
  }

  const endedEvents = (id: string) =>
    events.filter((e) => e.type === 'lockout.ended' && (e.data as { lockoutId?: string }).lockoutId === id);

  describe('an operator unlock while the Admin API fails', () => {
    it('answers 202 queued, audits it queued, and the outbox makes it once the Admin API answers', async () => {
      const id = await lockedOut('dave');
      await h.control('PUT', '/sandbox/faults', {
        rules: [{ route: '* /srv/admin/v1/*', errorRate: 1, errorStatus: 503 }],
      });
      try {
        const res = await unlock(id);
        expect(res.status).toBe(202);
        expect(await res.json()).toMatchObject({ id, status: 'unlocked', unlockStatus: 'queued' });
        expect(unlockEntries(id)).toEqual([
          expect.objectContaining({ outcome: expect.objectContaining({ status: 'queued' }) }),
        ]);
        // Tried against the failing Admin API and kept, pending, for its next attempt.
        const [tried] = await eventually(
          async () => {
            const actions = await unlockActions(id);
            return actions[0] !== undefined && actions[0].attempts > 0 ? actions : undefined;
          },
          { what: 'the unlock tried' },
        );
        expect(tried).toMatchObject({ status: 'pending', type: 'unlock_user' });
        expect((await lockout(id)).unlockStatus).toBe('queued');
        // Its transaction committed: the event went out once.
        await eventually(async () => (endedEvents(id).length > 0 ? true : undefined), {
          what: 'lockout.ended',
        });
      } finally {
        await h.control('DELETE', '/sandbox/faults');
      }
      await eventually(
        async () => ((await adminUserStatus(h.sandbox, ids.dave!)) === 'enabled' ? true : undefined),
        {
          what: 'dave enabled',
        },
      );
      await eventually(async () => ((await lockout(id)).unlockStatus === 'done' ? true : undefined), {
        what: 'the unlock done',
      });
      expect(endedEvents(id)).toHaveLength(1);
    });
  });

  describe('an unlock of a lock-out that ended', () => {
    it('is refused 409 with what ended it, audited refused, nothing done twice', async () => {
      const id = await lockedOut('alice');
      expect((await unlock(id, 'first')).status).toBe(202);
      const again = await unlock(id, 'second');
      expect(again.status).toBe(409);
      expect(again.headers.get('content-type')).toContain('application/problem+json');
      const problem = (await again.json()) as { code: string; status: number; detail: string };
      expect(problem).toMatchObject({ code: 'RG_ERR_CONFLICT', status: 409 });
      expect(problem.detail).toContain('unlocked by');
      expect(unlockEntries(id).map((e) => e.outcome?.status)).toEqual(['queued', 'refused']);
      expect(unlockEntries(id)[1]!.outcome).toMatchObject({ code: 'RG_ERR_CONFLICT' });
      expect(await unlockActions(id)).toHaveLength(1);
    });

    it('two admins at once: one unlock made, the other refused as a lost race, one lockout.ended', async () => {
      const id = await lockedOut('trudy');
      const answers = await Promise.all([unlock(id, 'one'), unlock(id, 'two')]);
      expect(answers.map((r) => r.status).toSorted()).toEqual([202, 409]);
      const refused = answers.find((r) => r.status === 409)!;
      expect(((await refused.json()) as { code: string }).code).toBe('RG_ERR_CONFLICT');
      expect(
        unlockEntries(id)
          .map((e) => e.outcome?.status)
          .toSorted(),
      ).toEqual(['queued', 'refused']);
      await eventually(async () => ((await lockout(id)).unlockStatus === 'done' ? true : undefined), {
        what: 'the unlock done',
      });
      // Drained (the unlock is done, its event emitted by then): one event, one Admin action.
      await eventually(async () => (endedEvents(id).length > 0 ? true : undefined), {
        what: 'lockout.ended',
      });
      expect(endedEvents(id)).toHaveLength(1);
      expect(await unlockActions(id)).toMatchObject([{ status: 'delivered' }]);
    });
  });

  describe("an unlock that loses its race to the lock-out's end", () => {
    it('is refused 409, and its own entry, written in that transaction, is dropped there', async () => {
      const id = await lockedOut('dave');
      // The lock-out ends (as its schedule would end it) inside the unlock's own transaction, after
      // the unlock read it still locked: the record change finds it expired.
      const remove = await engine.endInsideUnlock(h, id);
      let res: Response;
      try {
        res = await unlock(id, 'raced');
      } finally {
        await remove();
      }
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({
        code: 'RG_ERR_CONFLICT',
        detail: expect.stringContaining('expired by its schedule'),
      });
      expect(unlockEntries(id).at(-1)!.outcome).toMatchObject({ status: 'refused', code: 'RG_ERR_CONFLICT' });
      expect(await unlockActions(id)).toMatchObject([
        { status: 'dropped', reason: UNLOCK_LOST_RACE, attempts: 0 },
      ]);
      expect(await lockout(id)).toMatchObject({ status: 'expired' });
      expect((await lockout(id)).unlockStatus).toBeUndefined();
    });
  });

  describe('an unlock the outbox cannot take durably in time', () => {
    it('answers 503 with Retry-After, audits it failed, and its held write changes nothing when it lands', async () => {
      const id = await lockedOut('mallory');
      // Another writer holds the control database: the unlock's transaction waits past its deadline.
      const release = await engine.holdOutboxWrites(h);
      let res: Response;
      try {
        res = await unlock(id);
      } finally {
        await release();
      }
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      expect(((await res.json()) as { code: string }).code).toBe('RG_ERR_OUTBOX_UNAVAILABLE');
      expect(unlockEntries(id)).toEqual([
        expect.objectContaining({
          outcome: expect.objectContaining({ status: 'failed', code: 'RG_ERR_OUTBOX_UNAVAILABLE' }),
        }),
      ]);
      // The held write lands once the database answers: its entry dropped in the same transaction.
      const actions = await eventually(
        async () => {
          const a = await unlockActions(id);
          return a.length > 0 && a.every((e) => e.status !== 'pending') ? a : undefined;
        },
        { what: 'the held unlock written' },
      );
      expect(actions).toMatchObject([{ status: 'dropped', reason: UNLOCK_ANSWERED_FAILED, attempts: 0 }]);
      const after = await lockout(id);
      expect(after).toMatchObject({ status: 'locked' });
      expect(after.unlockStatus).toBeUndefined();
      expect(await adminUserStatus(h.sandbox, ids.mallory!)).toBe('locked_out');
      expect(endedEvents(id)).toEqual([]);
      // Nothing changed, so a later try is made as any first one.
      expect((await unlock(id)).status).toBe(202);
    });
  });
}

describe('on SQLite', () => unlockAnswers(SQLITE));

describeOnPostgres('on PostgreSQL', (pg) => unlockAnswers(postgres(pg)));
