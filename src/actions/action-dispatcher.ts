import type { CompiledQuery, Expression, SqlBool } from 'kysely';
import type { RiskgateDatabase } from '../database/database.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { ActionJob, ActionSpec } from './admin-actions.ts';

/**
 * What a decision hands its Admin actions to, and what comes back: the outbox (src/outbox/outbox.ts)
 * is the one implementation, over the database or a memory store.
 */

/** A database transaction as a companion writes with it (a feature adds its tables: `withTables`). */
export type CompanionTx = RiskgateDatabase['db'];

/**
 * Rows another feature keeps with an append, written in the same database transaction as its
 * entries: they exist all together or not at all (a lock-out's record beside its action, its
 * scheduled unlock and its event's deliveries; an operator's unlock beside its record change).
 */
export interface AppendCompanion {
  /** More entries written with the submit's (the deliveries of the change's event). */
  specs?: readonly ActionSpec[];
  /** Writes the feature's rows with `tx`, after the entries (the write lock is held by then). */
  write(tx: CompanionTx, nowMs: number): Promise<void>;
  /**
   * What `write` would do, as statements compiled with `db` and not run, when it needs no answer
   * between them (no read first); undefined when it does. A store that can run a transaction's
   * statements in one round trip (the SQLite file's thread: `RiskgateDatabase.script`) runs these
   * after the entries instead of calling `write`. Default: absent (`write` runs).
   */
  statements?(db: CompanionTx, nowMs: number): CompiledQuery[] | undefined;
  /** Told once the transaction committed (what could not join it goes out then). Must not throw. */
  committed?(): void;
}

/**
 * Whether the outbox entry `entryId` is delivered, as a condition in a statement of the
 * transaction that completes it (after the completion: it sees it). The outbox's own SQL, handed
 * to a `DeliveryCompanion`, which knows nothing of the outbox's table.
 */
export type DeliveredCheck = (entryId: string) => Expression<SqlBool>;

/**
 * Rows another feature keeps in step with an entry's delivery (a lock-out's `locked`), written in
 * the transaction that marks the entry delivered: they change when it does and never otherwise,
 * one commit instead of a second write after it (issue 32). Run by a store that says so
 * (`OutboxStore.deliveryRecords`); elsewhere the feature learns the delivery from its outcome.
 */
export interface DeliveryCompanion {
  /** The action types it keeps rows for. */
  readonly types: readonly ActionSpec['type'][];
  /**
   * The delivery of `spec` (an entry created at `createdAtMs`) recorded at `nowMs`, as one
   * statement compiled with `db` and not run, writing only where `delivered(spec.id)` holds: what
   * a `done` outcome of `spec` would write, so that outcome has nothing left to write.
   */
  statement(db: CompanionTx, delivery: Delivery, delivered: DeliveredCheck): CompiledQuery;
}

/** A delivery as a `DeliveryCompanion` records it. */
export interface Delivery {
  spec: ActionSpec;
  /** The entry's creation (its due time): when the action was promised. */
  createdAtMs: number;
  nowMs: number;
}

/**
 * What a companion throws to refuse its own append (a condition it checks in the transaction no
 * longer holds: a "was this you?" link answered meanwhile). Like a row the database refuses, it
 * fails that append alone: appends committed in one group with it are written without it.
 */
export class CompanionRefusedError extends Error {
  override readonly name = 'CompanionRefusedError';
}

/** How a decision submits its actions. */
export interface SubmitOptions {
  /**
   * How long the decision can wait for its actions to be held, milliseconds (what is left of its
   * deadline). Past it the outbox answers `deferred` rather than hold the answer. Default: the
   * outbox's own submit timeout.
   */
  timeoutMs?: number | undefined;
  /**
   * Rows written in the same transaction as the jobs (a lock-out's record and its event's
   * deliveries): all of them, or none. Deferred with the jobs when the store is slow.
   */
  companion?: AppendCompanion | undefined;
}

/**
 * Least time a decision gives its action write, milliseconds, when the fan-out used its whole
 * deadline: a healthy store answers well within it, so only a stalled one defers.
 */
export const ACTION_SUBMIT_MIN_BUDGET_MS = 100;

/**
 * What became of a submitted job: `queued` (held as the store promises: in memory, or durably
 * written), `duplicate` (its key was seen), `refused` (not held: a full or closing outbox, a store
 * that failed), or `deferred` (the store did not answer in time: this process holds it and writes
 * it when the store answers; a crash before then loses it, and a shutdown reports it failed).
 */
export type EnqueueResult = 'queued' | 'duplicate' | 'refused' | 'deferred';

/**
 * Where a decision's actions go. `submit` resolves once the jobs are held as the store promises,
 * so the answer can say `queued` truthfully; or, once `options.timeoutMs` passed, with the jobs
 * the store has not acknowledged `deferred`.
 */
export interface ActionDispatcher {
  submit(jobs: readonly ActionJob[], options?: SubmitOptions): Promise<EnqueueResult[]>;
  /** Actions held and not yet final, in this process's view. */
  readonly size: number;
  /** Stops taking jobs and lets the ones in flight finish for up to `timeoutMs`. */
  drain(timeoutMs: number): Promise<void>;
  /**
   * A process about to die: stop now. What dies with the process (actions a store never
   * acknowledged, everything in the memory store) is reported failed with `reason`.
   */
  abandon(reason: string): Promise<void>;
}

export interface ActionOutcome {
  key: string;
  decisionId: string;
  type: string;
  target: string;
  status: 'done' | 'failed';
  attempts: number;
  /**
   * Why it failed: the last error code, `horizon_exhausted:<code>`, `shutdown`, `process_crash`.
   * On a `done` action, why no call was made: a scheduled unlock skipped (src/lockouts/).
   */
  reason?: string;
  /** From enqueue to outcome, milliseconds. */
  elapsedMs: number;
}

/** Failures worth another attempt: the request may succeed later. */
export const RETRYABLE_ACTION_FAILURES: ReadonlySet<string> = new Set([
  ErrorCode.UPSTREAM_TIMEOUT,
  ErrorCode.UPSTREAM_UNREACHABLE,
  ErrorCode.UPSTREAM_RATE_LIMITED,
  ErrorCode.UPSTREAM_SERVER_ERROR,
  ErrorCode.UPSTREAM_MALFORMED_RESPONSE,
  ErrorCode.TOKEN_UNAVAILABLE,
  ErrorCode.DEADLINE_EXCEEDED,
  ErrorCode.INTERNAL,
  // The Admin route's breaker is open: wait for its next probe (retryAfterMs), then try again.
  ErrorCode.CIRCUIT_OPEN,
]);

/** Why an action whose subject turned out not to be the account's was dropped (never carried out). */
export const SUBJECT_MISMATCH_REASON = 'subject_mismatch';

/** The final outcome of an action. */
export function actionOutcome(
  action: Pick<ActionOutcome, 'key' | 'decisionId' | 'type' | 'target'>,
  status: 'done' | 'failed',
  attempts: number,
  elapsedMs: number,
  reason?: string,
): ActionOutcome {
  const outcome: ActionOutcome = {
    key: action.key,
    decisionId: action.decisionId,
    type: action.type,
    target: action.target,
    status,
    attempts,
    elapsedMs,
  };
  if (reason !== undefined) outcome.reason = reason;
  return outcome;
}
