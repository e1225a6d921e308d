import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { stateFiles } from '../src/database/state-files.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { collectingEventSink, type RiskgateEvent } from '../src/events/riskgate-event.ts';
import type { LockoutView } from '../src/lockouts/lockout-record.ts';
import { systemClock } from '../src/timing/clock.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';
import { type MemoryAuditTrail, memoryAuditTrail } from './support/memory-audit-trail.ts';

/**
 * Issue 26, lock-out records and temporary lock-outs, over the real sandbox: every lock-out is
 * listed with its decision and rule; an operator unlocks one (the sandbox's Admin user is enabled,
 * the audit trail has it); a temporary one ends on time, unless a later lock-out extended it or
 * escalation made it permanent. The outbox's clock is shifted (`offsetMs`) to reach a lock-out's
 * end without waiting for it; the decisions keep the real clock.
 */

const POLICY = `apiVersion: riskgate/v1
kind: Policy
name: lockouts
description: each account its kind of lock-out
thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: lasting-lockout, description: permanent, when: 'request.accountId in ["dave", "trudy"]', verdict: deny, actions: [lockForGood] }
  - { id: short-lockout, description: ten minutes, when: 'request.accountId in ["alice", "bob"]', verdict: deny, actions: [lockBriefly] }
  - { id: escalating-lockout, description: escalates, when: 'request.accountId == "carol"', verdict: deny, actions: [lockEscalating] }
actions:
  lockForGood: { type: lock_out_user }
  lockBriefly: { type: lock_out_user, duration: 10m }
  lockEscalating: { type: lock_out_user, duration: 10m, escalateWithin: 24h }
`;
const TEN_MINUTES_MS = 600_000;

let h: Harness;
let ids: Record<string, string | undefined>;
let audit: MemoryAuditTrail;
const events: RiskgateEvent[] = [];
let offsetMs = 0;

beforeAll(async () => {
  audit = memoryAuditTrail();
  h = await startHarness({
    policy: { yaml: POLICY },
    deadlineMs: 3000,
    riskgate: {
      audit,
      events: collectingEventSink(events),
      outbox: { pollMs: 50, clock: { ...systemClock, nowMs: () => Date.now() + offsetMs } },
    },
  });
  ids = await lookUpUserIds(h.sandbox, ['alice', 'bob', 'carol', 'dave', 'trudy']);
});
afterAll(() => h?.stop());
// Each test reaches its own lock-outs' ends; every earlier one's action is over by then.
beforeEach(() => {
  offsetMs = 0;
});

/** Locks `user` out: the decision's id, once the lock-out is queued. */
async function lockOut(user: string): Promise<string> {
  const { status, body } = await h.decide(demoRequest(user, ids[user]));
  expect(status).toBe(200);
  expect(body.actions).toMatchObject([{ type: 'lock_out_user', status: 'queued' }]);
  return body.decisionId as string;
}

async function lockout(id: string): Promise<LockoutView> {
  const res = await h.ops(`/lockouts/${encodeURIComponent(id)}`);
  expect(res.status).toBe(200);
  return (await res.json()) as LockoutView;
}

const lockoutWhen = (id: string, ready: (l: LockoutView) => boolean, what: string) =>
  eventually(
    async () => {
      const l = await lockout(id);
      return ready(l) ? l : undefined;
    },
    { what },
  );

function unlock(id: string, body: unknown): Promise<Response> {
  return fetch(`${h.url}/lockouts/${encodeURIComponent(id)}/unlock`, {
    method: 'POST',
    headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** The outcome line of the action `key`, once logged. */
const actionLine = (key: string) =>
  eventually(async () => h.lines.find((l) => l.kind === 'action' && l.key === key), { what: key });

describe('lock-out records', () => {
  it('lists every lock-out with its decision and rule, newest first, filtered by user and status', async () => {
    const id = await lockOut('dave');
    const locked = await lockoutWhen(id, (l) => l.status === 'locked', 'dave locked');
    expect(locked).toMatchObject({
      id,
      decisionId: id,
      userId: ids.dave,
      accountId: 'dave',
      rule: 'lasting-lockout',
    });
    expect(locked.until).toBeUndefined();
    const res = await h.ops(`/lockouts?userId=${ids.dave}&status=locked`);
    const page = (await res.json()) as { lockouts: LockoutView[] };
    expect(page.lockouts.map((l) => l.id)).toEqual([id]);
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'lockout.created', data: expect.objectContaining({ lockoutId: id }) }),
    );
  });

  it('pages newest first with a cursor, and names a bad query field', async () => {
    await lockOut('dave');
    const first = (await (await h.ops('/lockouts?limit=1')).json()) as {
      lockouts: LockoutView[];
      nextCursor?: string;
    };
    expect(first.lockouts).toHaveLength(1);
    expect(first.nextCursor).toBeDefined();
    const next = (await (await h.ops(`/lockouts?limit=1&cursor=${first.nextCursor}`)).json()) as {
      lockouts: LockoutView[];
    };
    expect(next.lockouts[0]!.createdAt <= first.lockouts[0]!.createdAt).toBe(true);
    expect(next.lockouts[0]!.id).not.toBe(first.lockouts[0]!.id);
    const bad = await h.ops('/lockouts?status=gone');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { field: string }).field).toBe('status');
  });
});

describe('an operator unlock', () => {
  it('enables the Admin user through the outbox, audited, and ends the record', async () => {
    const id = await lockOut('dave');
    await lockoutWhen(id, (l) => l.status === 'locked', 'dave locked');
    expect(await adminUserStatus(h.sandbox, ids.dave!)).toBe('locked_out');
    const res = await unlock(id, { reason: 'help desk verified the user by phone' });
    // Queued (durably, with the record's change): the Admin API call is the outbox's, after.
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({
      status: 'unlocked',
      // Queued when answered; on a loaded machine the outbox may have delivered it already.
      unlockStatus: expect.stringMatching(/^(queued|done)$/),
      endedBy: expect.any(String),
    });
    await eventually(async () => (await adminUserStatus(h.sandbox, ids.dave!)) === 'enabled', {
      what: 'dave enabled',
    });
    await lockoutWhen(id, (l) => l.unlockStatus === 'done', 'the unlock done');
    expect(audit.entries).toContainEqual(
      expect.objectContaining({
        action: 'lockout.unlock',
        target: id,
        detail: { userId: ids.dave, reason: 'help desk verified the user by phone' },
      }),
    );
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'lockout.ended', data: expect.objectContaining({ lockoutId: id }) }),
    );
  });

  it('is refused, and nothing changes, when the audit trail cannot take it', async () => {
    const id = await lockOut('trudy');
    await lockoutWhen(id, (l) => l.status === 'locked', 'trudy locked');
    audit.failing = true;
    try {
      const res = await unlock(id, { reason: 'vouched for' });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { code: string }).code).toBe('RG_ERR_AUDIT_UNAVAILABLE');
    } finally {
      audit.failing = false;
    }
    expect((await lockout(id)).status).toBe('locked');
    expect(await adminUserStatus(h.sandbox, ids.trudy!)).toBe('locked_out');
  });

  it('is refused, and no unlock is queued or made, when its record change cannot be written', async () => {
    const id = await lockOut('trudy');
    await lockoutWhen(id, (l) => l.status === 'locked', 'trudy locked');
    // The database refuses the record's change (as PostgreSQL refused a reason with U+0000).
    const db = new DatabaseSync(stateFiles(h.stateDir).control);
    db.exec(`CREATE TRIGGER refuse_unlock BEFORE UPDATE OF status ON lockout WHEN NEW.status = 'unlocked'
      BEGIN SELECT RAISE(ABORT, 'the database refuses the row'); END`);
    try {
      const res = await unlock(id, { reason: 'vouched for' });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { code: string }).code).toBe('RG_ERR_OUTBOX_UNAVAILABLE');
    } finally {
      db.exec('DROP TRIGGER refuse_unlock');
      db.close();
    }
    // The unlock's entry went with the record's change: neither was written, no Admin call made.
    const actions = (await (await h.ops('/actions?limit=1000')).json()) as { actions: { id: string }[] };
    expect(actions.actions.filter((a) => a.id.startsWith(`${id}:unlock_user`))).toEqual([]);
    expect((await lockout(id)).status).toBe('locked');
    expect(await adminUserStatus(h.sandbox, ids.trudy!)).toBe('locked_out');
  });

  it('needs a reason and a known lock-out', async () => {
    const missing = await unlock('no-such-decision', { reason: 'x' });
    expect(missing.status).toBe(404);
    const noReason = await unlock('no-such-decision', { reason: '  ' });
    expect(noReason.status).toBe(400);
    expect(((await noReason.json()) as { field: string }).field).toBe('reason');
  });
});

describe('a temporary lock-out', () => {
  it('ends on time: the Admin user is enabled again and the record expires', async () => {
    const id = await lockOut('alice');
    const locked = await lockoutWhen(id, (l) => l.status === 'locked', 'alice locked');
    expect(Date.parse(locked.until!) - Date.parse(locked.createdAt)).toBe(TEN_MINUTES_MS);
    expect(await adminUserStatus(h.sandbox, ids.alice!)).toBe('locked_out');
    offsetMs = Date.parse(locked.until!) - Date.now() + 1;
    await eventually(async () => (await adminUserStatus(h.sandbox, ids.alice!)) === 'enabled', {
      what: 'alice enabled',
    });
    expect(await lockoutWhen(id, (l) => l.status === 'expired', 'alice expired')).toMatchObject({
      endedBy: 'schedule',
    });
  });

  it('once ended by its schedule, is not unlocked again: 409, audited refused, no second Admin call', async () => {
    const id = await lockOut('alice');
    const locked = await lockoutWhen(id, (l) => l.status === 'locked', 'alice locked');
    offsetMs = Date.parse(locked.until!) - Date.now() + 1;
    await lockoutWhen(id, (l) => l.status === 'expired', 'alice expired');
    const res = await unlock(id, { reason: 'too late' });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({
      code: 'RG_ERR_CONFLICT',
      detail: expect.stringContaining('expired by its schedule'),
    });
    expect(audit.entries.filter((e) => e.target === id).map((e) => e.outcome?.status)).toEqual(['refused']);
    const actions = (await (await h.ops('/actions?limit=1000')).json()) as { actions: { id: string }[] };
    expect(
      actions.actions.filter((a) => a.id.startsWith(`${id}:unlock_user:`) && a.id.endsWith(':operator')),
    ).toEqual([]);
  });

  it('is extended by a later lock-out of the same user: the earlier end is skipped', async () => {
    const first = await lockOut('bob');
    const earlier = await lockoutWhen(first, (l) => l.status === 'locked', 'bob locked');
    // The two ends 3 s apart: a machine that stalls for a second between moving the outbox's
    // clock and its next claim still reaches only the first.
    await eventually(() => Date.now() > Date.parse(earlier.createdAt) + 3000);
    const second = await lockOut('bob');
    const later = await lockoutWhen(second, (l) => l.status === 'locked', 'bob locked again');
    // The outbox reaches the first lock-out's end (only that one, unless this machine stalls).
    offsetMs = Date.parse(earlier.until!) - Date.now() + 1;
    const skipped = await actionLine(`${first}:unlock_user:${ids.bob}`);
    expect(skipped).toMatchObject({ status: 'done', reason: `extended_by_later_lockout:${second}` });
    // The record is told after the outcome line: awaited, not read at once.
    await lockoutWhen(
      first,
      (l) => l.reason === `unlock_skipped:extended_by_later_lockout:${second}`,
      'the first record saying why its end was skipped',
    );
    // The later one's end unlocks the user, ending both.
    offsetMs = Date.parse(later.until!) - Date.now() + 1;
    await eventually(async () => (await adminUserStatus(h.sandbox, ids.bob!)) === 'enabled', {
      what: 'bob enabled',
    });
    await lockoutWhen(first, (l) => l.status === 'expired', 'the first expired with the second');
  });

  it('becomes permanent within escalateWithin of the previous one', async () => {
    const first = await lockOut('carol');
    const earlier = await lockoutWhen(first, (l) => l.status === 'locked', 'carol locked');
    const second = await lockOut('carol');
    const escalated = await lockoutWhen(second, (l) => l.status === 'locked', 'carol locked again');
    expect(escalated).toMatchObject({ escalated: true });
    expect(escalated.until).toBeUndefined();
    // Past both ends: neither unlocks her.
    offsetMs = Date.parse(earlier.until!) + TEN_MINUTES_MS - Date.now();
    expect(await actionLine(`${first}:unlock_user:${ids.carol}`)).toMatchObject({
      status: 'done',
      reason: expect.stringMatching(/^extended_by_permanent_lockout_in_force/),
    });
    expect(await actionLine(`${second}:unlock_user:${ids.carol}`)).toMatchObject({
      status: 'done',
      reason: 'lockout_made_permanent',
    });
    expect(await adminUserStatus(h.sandbox, ids.carol!)).toBe('locked_out');
  });
});
