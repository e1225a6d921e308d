import type { AppendCompanion } from '../actions/action-dispatcher.ts';

/**
 * What a lock-out record says (`GET /lockouts`, the console), and what a decision tells the records
 * of the lock-outs it drove or withheld.
 */

export const LOCKOUT_STATUSES = ['queued', 'locked', 'failed', 'withheld', 'unlocked', 'expired'] as const;
export type LockoutStatus = (typeof LOCKOUT_STATUSES)[number];

/** Statuses of a lock-out that was (or is about to be) applied: the ones escalation counts. */
export const APPLIED_STATUSES: readonly LockoutStatus[] = ['queued', 'locked', 'unlocked', 'expired'];
/** Statuses of a lock-out still in force (or about to be). */
export const ACTIVE_STATUSES: readonly LockoutStatus[] = ['queued', 'locked'];

/** A lock-out as operators see it. */
export interface LockoutView {
  /** The decision's id: a decision locks one user out at most. */
  id: string;
  userId: string;
  accountId?: string;
  decisionId: string;
  /** The rule (or verdict binding) that asked for it. */
  rule?: string;
  /** When the decision was made (RFC 3339). */
  createdAt: string;
  status: LockoutStatus;
  /** A temporary lock-out's end (RFC 3339); absent when permanent. */
  until?: string;
  /** True when escalation (`escalateWithin`) made a temporary lock-out permanent. */
  escalated: boolean;
  endedAt?: string;
  /** `schedule` (a temporary one ran out), or the operator who unlocked it. */
  endedBy?: string;
  reason?: string;
  /** An operator's unlock through the outbox: `queued`, `done` or `failed`. */
  unlockStatus?: 'queued' | 'done' | 'failed';
}

/** A lock-out a decision drove or withheld, as it tells the records (after its answer). */
export interface PlannedLockout {
  decisionId: string;
  userId: string;
  accountId?: string | undefined;
  rule: string;
  /** The decision's wall-clock time, milliseconds: a temporary lock-out's start. */
  createdMs: number;
  status: 'queued' | 'failed' | 'withheld';
  /** Why it failed or was withheld (`queue_refused`, `first_factor_not_passed`). */
  reason?: string | undefined;
  /** A temporary lock-out's length, milliseconds. */
  durationMs?: number | undefined;
  /** A lock-out within this long of the user's previous one is permanent, milliseconds. */
  escalateWithinMs?: number | undefined;
}

/** Where a decision tells its lock-outs (src/lockouts/lockout-recorder.ts). */
export interface LockoutSink {
  /** Lock-outs not promised (withheld, failed): recorded off the request path; never blocks, never throws. */
  planned(lockouts: readonly PlannedLockout[]): void;
  /**
   * The records of promised (`queued`) lock-outs and their `lockout.created` events, written in the
   * same transaction as the decision's actions (the lock-out, its scheduled unlock): together or
   * not at all. Never throws.
   */
  companion(lockouts: readonly PlannedLockout[]): AppendCompanion;
}

/** The suffix of an operator's unlock's action id (`<lockoutId>:unlock_user:<userId>:operator`). */
export const OPERATOR_UNLOCK_SUFFIX = ':operator';
