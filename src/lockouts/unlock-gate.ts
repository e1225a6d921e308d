import { type ActionSpec, actionId } from '../actions/admin-actions.ts';
import type { AttemptGate } from '../outbox/outbox.ts';
import type { OutboxStore } from '../outbox/outbox-store.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { LockoutStore } from './lockout-store.ts';

/**
 * Whether the unlock that ends a temporary lock-out still should run, asked by the outbox before
 * each of its attempts (`OutboxOptions.beforeAttempt`):
 *
 * - the lock-out itself still pending in the outbox (an Admin outage): wait, so the unlock never
 *   overtakes it (they are ordered apart: the unlock would otherwise hold the user's other actions);
 * - the lock-out never applied (dead, dropped, failed, withheld), or already ended (an operator
 *   unlocked it): skip;
 * - made permanent (escalated: at its start or at an earlier attempt), or extended: a later lock-out of the same
 *   user in force, or a permanent one in force: skip, the user stays locked;
 * - escalation found now (`escalateWithin`: the user's previous lock-out is within the window):
 *   made permanent, skip.
 *
 * Every skip is the action's `done` outcome with the reason, noted on the record. A database that
 * fails rejects: the outbox retries the attempt like any failed one.
 */
export function unlockGate(
  store: LockoutStore,
  options: {
    /** How long an unlock waits for its lock-out still pending, milliseconds. Default 5000. */
    waitMs?: number;
    /** Whose wall time says a lock-out's window has passed. Default: the system clock. */
    clock?: Pick<Clock, 'nowMs'>;
  } = {},
): (spec: ActionSpec, outbox: Pick<OutboxStore, 'get'>) => Promise<AttemptGate> {
  const waitMs = options.waitMs ?? 5000;
  const clock = options.clock ?? systemClock;
  return async (spec, outbox) => {
    const schedule = spec.scheduledUnlock;
    if (schedule === undefined) return { run: true };
    const id = spec.decisionId;
    const userId = spec.target;
    const lock = await outbox.get(actionId(id, 'lock_out_user', userId));
    if (lock?.status === 'pending') return { waitMs };
    if (lock?.status === 'dead' || lock?.status === 'dropped') return { skip: 'lockout_not_applied' };
    const row = await store.get(id);
    if (row?.status === 'failed' || row?.status === 'withheld') return { skip: 'lockout_not_applied' };
    if (row?.status === 'unlocked' || row?.status === 'expired') return { skip: 'lockout_already_ended' };
    // Escalated, not merely `until_ms` null: a row made from the lock's outcome before its record
    // has no end either, and this unlock's own schedule proves the lock-out was temporary.
    if (row?.escalated === 1) return { skip: 'lockout_made_permanent' };
    const extended = await store.extendedBy(userId, id, schedule.lockedAtMs);
    if (extended !== undefined) return { skip: `extended_by_${extended.why}:${extended.id}` };
    if (schedule.escalateWithinMs !== undefined) {
      const previous = await store.previousWithin(userId, id, schedule.lockedAtMs, schedule.escalateWithinMs);
      if (previous !== undefined) {
        await store.makePermanent(id, clock.nowMs());
        return { skip: `escalated:${previous}` };
      }
    }
    return { run: true };
  };
}
