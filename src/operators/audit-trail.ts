import type { OperatorRole } from './operator.ts';

/**
 * The audit trail: every change an operator makes (a label, a retried or dropped action, a policy
 * reload, a list entry, an unlock, a sign-in), who made it, when and from where. Kept in the
 * database (src/database/) beside the decisions, shown by the console and `GET /audit`. A change
 * is answered only once its entry is written: a change that cannot be audited is refused.
 *
 * An entry is the operator's intent, written before the change; its outcome (done, failed,
 * refused, with the error code) is written after, linked to it. An entry without one (the process
 * died in between, or the outcome could not be written) reads `unknown`: the trail never says a
 * change was made when it may not have been.
 */

/** Every change the audit trail records, as `<thing>.<verb>` (`GET /audit?action=` takes these). */
export const AUDIT_ACTIONS = [
  'session.sign_in',
  'session.sign_out',
  'decision.label',
  'decision.outcome',
  'action.retry',
  'action.drop',
  'policy.reload',
  'policy.create',
  'policy.propose',
  'policy.approve',
  'policy.reject',
  'policy.withdraw',
  'policy.revert',
  'policy.activate',
  'policy.stage',
  'policy.unstage',
  'policy.schedule',
  'policy.unschedule',
  'list.add',
  'list.remove',
  'lockout.unlock',
  'lockout.lock',
  'lockout.extend',
  'snooze.create',
  'snooze.end',
  'review.open',
  'review.claim_next',
  'review.disposition',
  'review.note',
  'review.release',
  'review.assign',
] as const;
/** What was done, as `<thing>.<verb>`. */
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/**
 * What became of an audited change: `queued` is promised, not yet made (durably in the outbox, which
 * carries it out and retries it: an operator's unlock; its own outcome is on the lock-out record).
 */
export const AUDIT_OUTCOMES = ['done', 'queued', 'failed', 'refused'] as const;
export type AuditOutcomeStatus = (typeof AUDIT_OUTCOMES)[number];

/** The outcome written after a change: `failed` (riskgate could not make it) or `refused` (4xx). */
export interface AuditOutcome {
  status: AuditOutcomeStatus;
  /** The `RG_ERR_*` code of a failure or refusal, when there is one. */
  code?: string | undefined;
}

/** An entry's outcome as a reader sees it: `unknown` until (or unless) one was written. */
export type AuditEntryOutcome =
  | (AuditOutcome & {
      /** When it was written (RFC 3339, milliseconds). */
      at: string;
    })
  | { status: 'unknown' };

export interface AuditEntry {
  /** Unique, sortable by time (a ULID-like or time-prefixed id). */
  id: string;
  /** When (RFC 3339, milliseconds). */
  at: string;
  /** The operator's name (src/operators/operator.ts). */
  actor: string;
  role: OperatorRole;
  /** The operator key's id or `sso`: never a key. */
  keyId: string;
  action: AuditAction;
  /** What it was done to: a decisionId, an outbox entry id, `<list>:<entry>`, a userId. */
  target: string;
  /** The request's client address (the socket's, or the trusted proxy's header when configured). */
  from: string;
  /** Details that help a reader: a label and note, a reason. Never a secret. */
  detail?: Record<string, unknown>;
  /** What became of the change (`unknown` while none is written). Absent on a fresh `record`. */
  outcome?: AuditEntryOutcome;
}

export interface AuditFilter {
  actor?: string;
  action?: AuditAction;
  target?: string;
  /** Entries before this cursor (from a previous page's `nextCursor`), newest first. */
  cursor?: string;
  /** Most entries. Default 50, at most 500. */
  limit?: number;
}

export interface AuditTrail {
  /** Writes `entry` (the intent) durably; rejects when it cannot (the change must then be refused). */
  record(entry: Omit<AuditEntry, 'id' | 'at' | 'outcome'>): Promise<AuditEntry>;
  /**
   * Writes the outcome of entry `id` (once: a second is ignored). Rejects when it cannot; the
   * entry then reads `unknown`.
   */
  settle(id: string, outcome: AuditOutcome): Promise<void>;
  /** Newest first. */
  list(filter: AuditFilter): Promise<{ entries: AuditEntry[]; nextCursor?: string }>;
}
