import type { DecisionLine } from '../decide/decision-line.ts';

/**
 * What the console and `GET /decisions` ask of the decision store (src/decision-store/): decisions
 * filtered and paged newest first, one decision whole with its labels and its actions' outcomes,
 * counts by verdict, and the store's own state (is it keeping up).
 */

export type Verdict = 'allow' | 'challenge' | 'deny';
export type Label = 'fraud' | 'legit';

export interface DecisionFilter {
  /** Decisions at or after (epoch milliseconds). */
  fromMs?: number;
  /** Decisions before (epoch milliseconds). */
  toMs?: number;
  verdict?: Verdict;
  /** A rule id the active policy matched. */
  rule?: string;
  accountId?: string;
  userId?: string;
  ip?: string;
  unitId?: string;
  degraded?: boolean;
  /** The current label, or `none` for unlabelled decisions. */
  label?: Label | 'none';
  /** Only decisions whose shadow verdict differs from the active one (true) or agrees (false). */
  shadowDisagrees?: boolean;
  /** From a previous page's `nextCursor`: the decisions after it (older). */
  cursor?: string;
  /** Most decisions in a page. Default 50, at most 200. */
  limit?: number;
}

/** One row of a decisions page. */
export interface DecisionSummary {
  decisionId: string;
  /** When the request arrived (RFC 3339). */
  at: string;
  verdict: Verdict;
  score: number;
  degraded: boolean;
  /** The active policy's matched rule ids. */
  rules: string[];
  accountId?: string;
  userId?: string;
  ip?: string;
  unitId?: string;
  policy: { name: string; revision: string };
  shadowVerdict?: Verdict;
  /** The current label, if any. */
  label?: Label;
  totalMs: number;
}

export interface StoredLabel {
  label: Label;
  /** The operator's name, or a caller key's id. */
  labelledBy: string;
  at: string;
  note?: string;
}

/** An action's outcome as the outbox reported it (the decision log's `action` line). */
export interface StoredActionOutcome {
  /** The outbox entry's id (`<decisionId>:<type>:<target>`). */
  actionId: string;
  type: string;
  target: string;
  /** queued | deferred | done | failed | skipped, the latest known. */
  status: string;
  at: string;
  /** The rest of the outcome line (error code, reason, attempts). */
  detail: Record<string, unknown>;
}

/** What the login backend reported of the login (`POST /decisions/{id}/outcome`). */
export interface StoredOutcome {
  type: 'step_up' | 'account_event' | 'ask_user';
  /** The step-up's result or the account event. */
  value: string;
  /** The id of the key that reported it. */
  reportedBy: string;
  at: string;
  /** The label it points to by the rules (src/outcomes/outcome-labels.ts), if any. */
  label?: Label;
}

/** A decision whole: its row, the logged line, its labels oldest first, its outcomes, its actions. */
export interface StoredDecision extends DecisionSummary {
  line: DecisionLine;
  /** The analysts' labels (the current `label` is the newest of them, else `outcomeLabel`). */
  labels: StoredLabel[];
  /** The login backend's outcomes, oldest first. */
  outcomes: StoredOutcome[];
  /** The label the outcomes point to, analyst labels aside. */
  outcomeLabel?: Label;
  actions: StoredActionOutcome[];
}

export interface DecisionPage {
  decisions: DecisionSummary[];
  /** Present when older decisions match. */
  nextCursor?: string;
}

export interface VerdictCounts {
  allow: number;
  challenge: number;
  deny: number;
  total: number;
}

/** One slice of the decisions-over-time chart: its start (epoch ms) and its counts. */
export interface TimeSlice extends VerdictCounts {
  atMs: number;
}

/** Whether the store keeps up: shown in /healthz, metrics and the console. */
export interface DecisionStoreStatus {
  engine: 'sqlite' | 'postgres' | 'off';
  /** False while writes fail (the store is down or behind its deadline). */
  writing: boolean;
  /** Records waiting to be written. */
  pending: number;
  /** Records dropped (the buffer was full): counted exactly, never silently. */
  dropped: number;
  /** Records written since start. */
  written: number;
  /** Records the database refused (poison rows), set aside in `decision_reject`, since start. */
  rejected: number;
  /** Age of the oldest record waiting, milliseconds (0 when none). */
  lagMs: number;
  /** The last write failure while writes fail (never a URL or a secret). */
  lastError?: string;
}

export interface DecisionReader {
  list(filter: DecisionFilter): Promise<DecisionPage>;
  get(decisionId: string): Promise<StoredDecision | undefined>;
  /** Counts by verdict over `filter` (its cursor and limit ignored). */
  countByVerdict(filter: DecisionFilter): Promise<VerdictCounts>;
  /**
   * Counts by verdict per `bucketMs` slice of time over `filter` (its cursor and limit ignored),
   * oldest first; slices with no decision are left out.
   */
  countOverTime(filter: DecisionFilter, bucketMs: number): Promise<TimeSlice[]>;
  status(): DecisionStoreStatus;
}
