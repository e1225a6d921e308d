import { type ActionSpec, actionId } from '../../src/actions/admin-actions.ts';
import type { PlannedLockout } from '../../src/lockouts/lockout-record.ts';

/** A decision's lock-out of `userId`, promised (queued) for ten minutes unless `extra` says otherwise. */
export const plannedLockout = (
  id: string,
  userId: string,
  createdMs: number,
  extra: Partial<PlannedLockout> = {},
): PlannedLockout => ({
  decisionId: id,
  userId,
  accountId: `acct-${userId}`,
  rule: 'short-lockout',
  createdMs,
  status: 'queued',
  durationMs: 600_000,
  ...extra,
});

/** Decision `id`'s lock of `userId` as its outbox entry holds it. */
export const lockSpec = (id: string, userId: string): ActionSpec => ({
  id: actionId(id, 'lock_out_user', userId),
  decisionId: id,
  type: 'lock_out_user',
  target: userId,
  orderingKey: userId,
  call: { method: 'updateUser', userId, update: { status: 'locked_out' } },
});
