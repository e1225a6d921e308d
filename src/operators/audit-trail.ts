import type { OperatorRole } from './operator.ts';

/**
 * The audit trail: every change an operator makes (a label, a retried or dropped action, a policy
 * reload, a list entry, an unlock, a sign-in), who made it, when and from where. Kept in the
 * database (src/database/) beside the decisions, shown by the console and `GET /audit`. A change
 * is answered only once its entry is written: a change that cannot be audited is refused.
 */

/** What was done, as `<thing>.<verb>`. */
export type AuditAction =
  | 'session.sign_in'
  | 'session.sign_out'
  | 'decision.label'
  | 'action.retry'
  | 'action.drop'
  | 'policy.reload'
  | 'list.add'
  | 'list.remove'
  | 'lockout.unlock'
  | 'lockout.extend';

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
  /** Writes `entry` durably; rejects when it cannot (the change must then be refused). */
  record(entry: Omit<AuditEntry, 'id' | 'at'>): Promise<AuditEntry>;
  /** Newest first. */
  list(filter: AuditFilter): Promise<{ entries: AuditEntry[]; nextCursor?: string }>;
}
