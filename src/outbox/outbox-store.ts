import type { AppendCompanion, DeliveryCompanion } from '../actions/action-dispatcher.ts';
import type { ActionSpec } from '../actions/admin-actions.ts';

export type {
  AppendCompanion,
  CompanionTx,
  DeliveredCheck,
  DeliveryCompanion,
} from '../actions/action-dispatcher.ts';

/** What a completion writes besides its entry: `companion`'s rows for `spec`, in its transaction. */
export interface DeliveryRecord {
  spec: ActionSpec;
  /** The entry's `createdAtMs`. */
  createdAtMs: number;
  companion: DeliveryCompanion;
}

/** An entry delivered, as a completion carries it. */
export interface Completion {
  id: string;
  nowMs: number;
  /** Written in the completion's transaction (a store with `deliveryRecords`). */
  record?: DeliveryRecord | undefined;
}

/**
 * The outbox's storage: what was promised in an answer, until it is delivered or dead-lettered.
 * Two implementations: the database (RISKGATE_DATABASE: embedded SQLite, or PostgreSQL shared by
 * replicas; src/outbox/database-outbox-store.ts), beside the rest of the control state, so a
 * lock-out's entries and its record are one transaction; and this process's memory, which keeps
 * nothing across a crash (src/outbox/memory-outbox-store.ts: tests, development). Times are
 * wall-clock milliseconds (Date.now()): several processes read them.
 */

/** `pending` until delivered; `dead` when it failed for good or ran out of horizon; `dropped` by an operator. */
export type OutboxStatus = 'pending' | 'delivered' | 'dead' | 'dropped';

export interface OutboxEntry {
  spec: ActionSpec;
  status: OutboxStatus;
  /** Attempts started (a claim counts one; an attempt refused by an open breaker is given back). */
  attempts: number;
  createdAtMs: number;
  /** Start of the retry horizon: the creation, or an operator's retry. */
  horizonStartMs: number;
  nextAttemptAtMs: number;
  updatedAtMs: number;
  /** The last attempt's error code. */
  lastError?: string | undefined;
  /** Why it is dead or dropped. */
  reason?: string | undefined;
  /** The process holding it, or (final) the one that ended it. */
  owner?: string | undefined;
}

export interface OutboxStats {
  pending: number;
  dead: number;
  /** Age of the oldest pending entry, milliseconds (0 when none). */
  oldestPendingAgeMs: number;
}

export interface OutboxListFilter {
  status?: OutboxStatus | undefined;
  /** Most entries returned, newest first. Default 100. */
  limit?: number | undefined;
}

/** How a claim picks. */
export interface ClaimOptions {
  /** Pass over webhook deliveries (`deliver_webhook`): only Admin actions. Default false. */
  skipWebhooks?: boolean;
}

/** A turn of the delivery loop (`OutboxStore.settleAndClaim`). */
export interface SettleAndClaim {
  /** The process settling and claiming (the completions' lease holder). */
  owner: string;
  /** Entries `owner` delivered, each with its time and its record: as `complete`. */
  completed: readonly Completion[];
  /** Outcome lines confirmed written: as `markLogged`. */
  logged: readonly string[];
  /** The claim after them (`claim`'s arguments); 0 claims nothing. */
  limit: number;
  nowMs: number;
  leaseMs: number;
  options?: ClaimOptions;
}

/** What `OutboxStore.settleAndClaim` did. */
export interface SettledClaim {
  /** Per `completed`, as `complete` answers: false when `owner` no longer held it. */
  completed: boolean[];
  /** Whether the marks landed (true when there were none). */
  logged: boolean;
  claimed: OutboxEntry[];
  /** What failed on the way (the marks, the claim, a script tried again call by call); empty when nothing did. */
  errors: unknown[];
}

/**
 * `step` as separate calls, in its order: the completions (rejecting when they fail), then the
 * marks and the claim, whose failures are told in `errors`. The store that has no single
 * transaction for it (memory, PostgreSQL), and the SQLite file's fallback when its script fails.
 */
export async function settleThenClaim(
  store: Pick<OutboxStore, 'complete' | 'markLogged' | 'claim'>,
  step: SettleAndClaim,
): Promise<SettledClaim> {
  const completed = await Promise.all(
    step.completed.map((c) => store.complete(c.id, step.owner, c.nowMs, c.record)),
  );
  const errors: unknown[] = [];
  let logged = true;
  if (step.logged.length > 0) {
    try {
      await store.markLogged(step.logged);
    } catch (error) {
      logged = false;
      errors.push(error);
    }
  }
  let claimed: OutboxEntry[] = [];
  try {
    claimed = await store.claim(step.owner, step.limit, step.nowMs, step.leaseMs, step.options);
  } catch (error) {
    errors.push(error);
  }
  return { completed, logged, claimed, errors };
}

/** The action type a claim with `skipWebhooks` passes over. */
export const WEBHOOK_ACTION_TYPE = 'deliver_webhook';

export interface OutboxStore {
  /**
   * Whether the entries outlive this process (the database). False for the memory store: at
   * shutdown and on a fatal error the outbox reports what it did not deliver failed, since no
   * later process will.
   */
  readonly durable: boolean;
  /**
   * Entries this process set aside because their stored spec could not be read (dead,
   * `unreadable_spec`); absent where specs are never read back (memory).
   */
  readonly unreadableSpecs?: number;
  /**
   * Whether a completion's `DeliveryRecord` is written in the completion's transaction (the
   * database). Absent or false: `complete` ignores it, and the feature learns the delivery from
   * its outcome (memory).
   */
  readonly deliveryRecords?: boolean;
  /**
   * Records `specs` durably (resolves once they are). An id already present is not added again:
   * false at its index. A spec with `notBeforeMs` (a scheduled unlock) is due then, and counts as
   * created then (`dueAtMs`): its wait is neither the pending age an Admin outage shows in nor
   * part of its retry horizon. `companions` write their rows in the same transaction (a failed
   * companion fails the append: nothing is written).
   */
  append(
    specs: readonly ActionSpec[],
    nowMs: number,
    companions?: readonly AppendCompanion[],
  ): Promise<boolean[]>;
  /**
   * Leases up to `limit` pending entries due at `nowMs` to `owner` for `leaseMs`, counting an
   * attempt for each, oldest first, never an entry while an earlier one of its `orderingKey` is
   * pending (one user's actions stay in order). An expired lease (its owner died) is taken over.
   * With `skipWebhooks`, webhook deliveries are passed over (the outbox's webhook lane is full).
   */
  claim(
    owner: string,
    limit: number,
    nowMs: number,
    leaseMs: number,
    options?: ClaimOptions,
  ): Promise<OutboxEntry[]>;
  /**
   * Marks a leased entry delivered; false when `owner` no longer holds it. `record`'s rows are
   * written in the same transaction (with `deliveryRecords`), changed only if the entry is delivered.
   */
  complete(id: string, owner: string, nowMs: number, record?: DeliveryRecord): Promise<boolean>;
  /**
   * One turn of the delivery loop: `complete` for each of `step.completed`, `markLogged` for
   * `step.logged`, then `claim` (none when `step.limit` is 0), in that order, so the claim sees the
   * completions (a user's next entry is taken in the same turn). On the SQLite file one transaction
   * in one message to its thread (issue 32: each request a message and a wake-up of the thread);
   * elsewhere the same calls one after the other (`settleThenClaim`).
   *
   * Rejects when the completions failed: none of them landed, so each entry stays leased and is
   * tried again when its lease runs out (as a failed `complete`). What failed after them (the
   * marks, the claim) is in `errors` with the completions' answers: the claim is retried by the
   * next poll, the marks are not confirmed (`logged` false).
   */
  settleAndClaim(step: SettleAndClaim): Promise<SettledClaim>;
  /**
   * Gives a leased entry back for another attempt at `nextAttemptAtMs`; `countAttempt` false when
   * the attempt never reached the vendor (an open breaker, a shutdown).
   */
  retryLater(
    id: string,
    owner: string,
    nextAttemptAtMs: number,
    lastError: string | undefined,
    countAttempt: boolean,
    nowMs: number,
  ): Promise<void>;
  /** Marks a leased entry dead with `reason`; false when `owner` no longer holds it. */
  deadLetter(id: string, owner: string, reason: string, nowMs: number): Promise<boolean>;
  /**
   * Final entries (delivered, dead, dropped) whose outcome line was not yet confirmed written,
   * oldest first: a process died between the two, or an operator's CLI ended them.
   */
  unlogged(limit: number): Promise<OutboxEntry[]>;
  /** Confirms the outcome lines of `ids` written. */
  markLogged(ids: readonly string[]): Promise<void>;
  /** Owners holding a lease that has not run out. */
  leaseOwners(nowMs: number): Promise<string[]>;
  /** Ends every lease of `owner` (a process known dead): its entries are due at once. */
  releaseOwner(owner: string, nowMs: number): Promise<number>;
  list(filter: OutboxListFilter): Promise<OutboxEntry[]>;
  get(id: string): Promise<OutboxEntry | undefined>;
  stats(nowMs: number): Promise<OutboxStats>;
  /** Operator: a dead (or dropped) entry pending again, due now, with a new horizon. */
  retry(id: string, nowMs: number): Promise<boolean>;
  /** Operator: a pending or dead entry dropped (never delivered). */
  drop(id: string, reason: string, nowMs: number): Promise<boolean>;
  /** Forgets delivered and dropped entries last updated before `beforeMs`. Returns how many. */
  prune(beforeMs: number): Promise<number>;
  /** What an operator should know about the store's durability (logged at start). */
  warnings?(): Promise<string[]>;
  close(): Promise<void>;
}

/** When an appended `spec` is first due (and counts as created): `notBeforeMs`, never before `nowMs`. */
export function dueAtMs(spec: Pick<ActionSpec, 'notBeforeMs'>, nowMs: number): number {
  return spec.notBeforeMs === undefined ? nowMs : Math.max(nowMs, spec.notBeforeMs);
}
