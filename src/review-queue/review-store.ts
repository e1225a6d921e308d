import { type Kysely, sql } from 'kysely';
import type { DatabaseEngine, FeatureMigrations, RiskgateDatabase } from '../database/database.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';

/**
 * The review queue's tables, the same on SQLite and PostgreSQL (control state: the system of
 * record, src/database/database.ts; docs/review-queue.md):
 *
 * - `review_case`: one row per case, at most one per decision (`decision_id` unique: a decision
 *   opened by its policy and then by hand is one case). Its `status` moves open → claimed →
 *   closed, never back; `assignee` is who claimed it. Times are epoch milliseconds.
 * - `review_note`: an analyst's notes on a case, never rewritten.
 */

export const REVIEW_REASONS = ['policy', 'sample', 'manual'] as const;
export type ReviewReason = (typeof REVIEW_REASONS)[number];
export const REVIEW_STATUSES = ['open', 'claimed', 'closed'] as const;
export type ReviewStatus = (typeof REVIEW_STATUSES)[number];
export const DISPOSITIONS = ['fraud', 'legit', 'unsure'] as const;
export type Disposition = (typeof DISPOSITIONS)[number];

// Types, not interfaces: kysely's withTables wants an index signature.
export type ReviewTables = {
  review_case: {
    id: string;
    decision_id: string;
    reason: string;
    /** Why it was opened: the rules or verdict that asked, the sample, the operator's words. */
    detail: string;
    verdict: string;
    user_id: string | null;
    status: string;
    opened_ms: number;
    opened_by: string;
    due_ms: number;
    assignee: string | null;
    claimed_ms: number | null;
    disposition: string | null;
    closed_ms: number | null;
    closed_by: string | null;
  };
  review_note: { id: string; case_id: string; author: string; at_ms: number; text: string };
};

export const reviewMigrations: FeatureMigrations = {
  'review-001-tables': {
    async up(db) {
      await db.schema
        .createTable('review_case')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('decision_id', 'text', (c) => c.notNull().unique())
        .addColumn('reason', 'text', (c) => c.notNull())
        .addColumn('detail', 'text', (c) => c.notNull())
        .addColumn('verdict', 'text', (c) => c.notNull())
        .addColumn('user_id', 'text')
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('opened_ms', 'bigint', (c) => c.notNull())
        .addColumn('opened_by', 'text', (c) => c.notNull())
        .addColumn('due_ms', 'bigint', (c) => c.notNull())
        .addColumn('assignee', 'text')
        .addColumn('claimed_ms', 'bigint')
        .addColumn('disposition', 'text')
        .addColumn('closed_ms', 'bigint')
        .addColumn('closed_by', 'text')
        .execute();
      // Claim-next and the queue's depth read the open cases by due time.
      await db.schema
        .createIndex('review_case_queue')
        .ifNotExists()
        .on('review_case')
        .columns(['status', 'due_ms'])
        .execute();
      await db.schema
        .createTable('review_note')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('case_id', 'text', (c) => c.notNull())
        .addColumn('author', 'text', (c) => c.notNull())
        .addColumn('at_ms', 'bigint', (c) => c.notNull())
        .addColumn('text', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('review_note_case')
        .ifNotExists()
        .on('review_note')
        .columns(['case_id', 'at_ms'])
        .execute();
    },
  },
};

/** One case as riskgate reads it (times epoch ms). */
export interface ReviewCase {
  id: string;
  decisionId: string;
  reason: ReviewReason;
  detail: string;
  verdict: string;
  userId: string | null;
  status: ReviewStatus;
  openedMs: number;
  openedBy: string;
  dueMs: number;
  assignee: string | null;
  claimedMs: number | null;
  disposition: Disposition | null;
  closedMs: number | null;
  closedBy: string | null;
}

export interface ReviewNote {
  id: string;
  caseId: string;
  author: string;
  atMs: number;
  text: string;
}

/** A case to open: `dueMs` from the SLA. */
export type NewReviewCase = Pick<
  ReviewCase,
  'id' | 'decisionId' | 'reason' | 'detail' | 'verdict' | 'userId' | 'openedMs' | 'openedBy' | 'dueMs'
>;

/** Which cases a listing wants (`mine` and `overdue` are views over `status`). */
export interface ReviewFilter {
  status?: ReviewStatus | undefined;
  /** Only the cases claimed by this analyst. */
  assignee?: string | undefined;
  /** Only cases not closed whose due time is before this, epoch ms. */
  overdueAtMs?: number | undefined;
  limit: number;
}

/** The queue's depth and its oldest open case, for the metrics and the page. */
export interface ReviewQueueStats {
  open: number;
  claimed: number;
  overdue: number;
  /** When the oldest case not yet closed was opened, epoch ms; undefined when none is. */
  oldestOpenMs: number | undefined;
}

/** The review queue's queries, written once for both engines (claim-next differs: see `claimNext`). */
export class ReviewStore {
  readonly #db: Kysely<ReviewTables>;
  readonly #engine: DatabaseEngine;

  constructor(database: RiskgateDatabase) {
    this.#db = database.db.withTables<ReviewTables>();
    this.#engine = database.engine;
  }

  /**
   * Opens a case unless its decision has one: the case (new or the one there already) and
   * whether this call opened it.
   */
  async open(c: NewReviewCase): Promise<{ opened: boolean; reviewCase: ReviewCase }> {
    return this.#db.transaction().execute(async (trx) => {
      const inserted = await trx
        .insertInto('review_case')
        .values({
          id: c.id,
          decision_id: c.decisionId,
          reason: c.reason,
          detail: c.detail,
          verdict: c.verdict,
          user_id: c.userId,
          status: 'open',
          opened_ms: c.openedMs,
          opened_by: c.openedBy,
          due_ms: c.dueMs,
          assignee: null,
          claimed_ms: null,
          disposition: null,
          closed_ms: null,
          closed_by: null,
        })
        .onConflict((oc) => oc.column('decision_id').doNothing())
        .returningAll()
        .executeTakeFirst();
      if (inserted !== undefined) return { opened: true, reviewCase: caseOf(inserted) };
      const existing = await trx
        .selectFrom('review_case')
        .selectAll()
        .where('decision_id', '=', c.decisionId)
        .executeTakeFirstOrThrow();
      return { opened: false, reviewCase: caseOf(existing) };
    });
  }

  /**
   * Claims the open case due first for `assignee`; undefined when none is open. Two analysts never
   * get the same case: on PostgreSQL the candidate row is locked `FOR UPDATE SKIP LOCKED` (a
   * concurrent claim takes the next one instead of waiting); on SQLite the statement is one write
   * transaction (the database's single writer serialises claims).
   */
  async claimNext(assignee: string, nowMs: number): Promise<ReviewCase | undefined> {
    const row = await this.#db
      .updateTable('review_case')
      .set({ status: 'claimed', assignee, claimed_ms: nowMs })
      .where('id', '=', (eb) => {
        const next = eb
          .selectFrom('review_case')
          .select('id')
          .where('status', '=', 'open')
          .orderBy('due_ms')
          .orderBy('opened_ms')
          .orderBy('id')
          .limit(1);
        return this.#engine === 'postgres' ? next.forUpdate().skipLocked() : next;
      })
      .where('status', '=', 'open')
      .returningAll()
      .executeTakeFirst();
    return row === undefined ? undefined : caseOf(row);
  }

  /** One case and its notes, oldest note first; undefined when there is no case `id`. */
  async get(id: string): Promise<{ reviewCase: ReviewCase; notes: ReviewNote[] } | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx.selectFrom('review_case').selectAll().where('id', '=', id).executeTakeFirst();
      if (row === undefined) return undefined;
      const notes = await trx
        .selectFrom('review_note')
        .selectAll()
        .where('case_id', '=', id)
        .orderBy('at_ms')
        .orderBy('id')
        .execute();
      return { reviewCase: caseOf(row), notes: notes.map(noteOf) };
    });
  }

  /** The case of a decision, if it has one. */
  async ofDecision(decisionId: string): Promise<ReviewCase | undefined> {
    const row = await this.#db
      .selectFrom('review_case')
      .selectAll()
      .where('decision_id', '=', decisionId)
      .executeTakeFirst();
    return row === undefined ? undefined : caseOf(row);
  }

  /** Cases matching `f`, the ones due first. */
  async list(f: ReviewFilter): Promise<ReviewCase[]> {
    let q = this.#db.selectFrom('review_case').selectAll();
    if (f.status !== undefined) q = q.where('status', '=', f.status);
    if (f.assignee !== undefined) q = q.where('assignee', '=', f.assignee);
    if (f.overdueAtMs !== undefined)
      q = q.where('status', '!=', 'closed').where('due_ms', '<', f.overdueAtMs);
    const rows = await q.orderBy('due_ms').orderBy('id').limit(f.limit).execute();
    return rows.map(caseOf);
  }

  /**
   * Closes case `id` with `disposition` (claiming it for `by` if it was open); undefined when it
   * is closed already (or there is none).
   */
  async close(
    id: string,
    disposition: Disposition,
    by: string,
    nowMs: number,
  ): Promise<ReviewCase | undefined> {
    const row = await this.#db
      .updateTable('review_case')
      .set((eb) => ({
        status: 'closed',
        disposition,
        closed_ms: nowMs,
        closed_by: by,
        assignee: eb.fn.coalesce('assignee', sql.lit(by)) as never,
        claimed_ms: eb.fn.coalesce('claimed_ms', sql.lit(nowMs)) as never,
      }))
      .where('id', '=', id)
      .where('status', '!=', 'closed')
      .returningAll()
      .executeTakeFirst();
    return row === undefined ? undefined : caseOf(row);
  }

  /**
   * Gives claimed case `id` back to the queue (open, no assignee), when `assignee` still holds it;
   * undefined otherwise (closed, open, or claimed by someone else meanwhile). One conditional
   * UPDATE, the same on both engines: a release racing a disposition or another release finds the
   * row changed and does nothing.
   */
  async release(id: string, assignee: string): Promise<ReviewCase | undefined> {
    const row = await this.#db
      .updateTable('review_case')
      .set({ status: 'open', assignee: null, claimed_ms: null })
      .where('id', '=', id)
      .where('status', '=', 'claimed')
      .where('assignee', '=', assignee)
      .returningAll()
      .executeTakeFirst();
    return row === undefined ? undefined : caseOf(row);
  }

  /**
   * Claims case `id` for `to` (a reassignment, or an open case handed to someone), when it is as
   * read: `from` its assignee (null: open, nobody's). Undefined when it changed meanwhile (closed,
   * claimed or released by someone else): one conditional UPDATE, as `release`.
   */
  async assign(id: string, from: string | null, to: string, nowMs: number): Promise<ReviewCase | undefined> {
    let q = this.#db
      .updateTable('review_case')
      .set({ status: 'claimed', assignee: to, claimed_ms: nowMs })
      .where('id', '=', id);
    q =
      from === null
        ? q.where('status', '=', 'open').where('assignee', 'is', null)
        : q.where('status', '=', 'claimed').where('assignee', '=', from);
    const row = await q.returningAll().executeTakeFirst();
    return row === undefined ? undefined : caseOf(row);
  }

  /** Adds a note to case `id`; false when there is no such case. */
  async addNote(note: ReviewNote): Promise<boolean> {
    return this.#db.transaction().execute(async (trx) => {
      const exists = await trx
        .selectFrom('review_case')
        .select('id')
        .where('id', '=', note.caseId)
        .executeTakeFirst();
      if (exists === undefined) return false;
      await trx
        .insertInto('review_note')
        .values({ id: note.id, case_id: note.caseId, author: note.author, at_ms: note.atMs, text: note.text })
        .execute();
      return true;
    });
  }

  /** The queue's depth and age at `nowMs`. */
  async stats(nowMs: number): Promise<ReviewQueueStats> {
    const rows = await this.#db
      .selectFrom('review_case')
      .select((eb) => [
        'status',
        eb.fn.countAll<string | number>().as('n'),
        eb.fn.min('opened_ms').as('oldest'),
        eb.fn
          .sum<string | number | null>(eb.case().when('due_ms', '<', nowMs).then(1).else(0).end())
          .as('overdue'),
      ])
      .where('status', '!=', 'closed')
      .groupBy('status')
      .execute();
    const stats: ReviewQueueStats = { open: 0, claimed: 0, overdue: 0, oldestOpenMs: undefined };
    for (const r of rows) {
      const status = statusOf(r.status);
      if (status === 'closed') continue;
      stats[status] = Number(r.n);
      stats.overdue += Number(r.overdue ?? 0);
      const oldest = Number(r.oldest);
      if (stats.oldestOpenMs === undefined || oldest < stats.oldestOpenMs) stats.oldestOpenMs = oldest;
    }
    return stats;
  }
}

/** A stored value riskgate did not write: a clear error, never a case read as something else. */
function badRow(column: string, value: unknown): RiskgateError {
  return new RiskgateError(
    ErrorCode.DATABASE_UNAVAILABLE,
    `The review queue holds a row riskgate cannot read (${column} ${JSON.stringify(String(value).slice(0, 40))}).`,
  );
}

function oneOf<T extends string>(values: readonly T[], column: string, value: unknown): T {
  if (typeof value === 'string' && (values as readonly string[]).includes(value)) return value as T;
  throw badRow(column, value);
}

function statusOf(value: unknown): ReviewStatus {
  return oneOf(REVIEW_STATUSES, 'status', value);
}

function msOf(column: string, value: unknown): number {
  const n = Number(value);
  if (value === null || !Number.isSafeInteger(n)) throw badRow(column, value);
  return n;
}

function caseOf(r: ReviewTables['review_case']): ReviewCase {
  return {
    id: r.id,
    decisionId: r.decision_id,
    reason: oneOf(REVIEW_REASONS, 'reason', r.reason),
    detail: r.detail,
    verdict: r.verdict,
    userId: r.user_id,
    status: statusOf(r.status),
    openedMs: msOf('opened_ms', r.opened_ms),
    openedBy: r.opened_by,
    dueMs: msOf('due_ms', r.due_ms),
    assignee: r.assignee,
    claimedMs: r.claimed_ms === null ? null : msOf('claimed_ms', r.claimed_ms),
    disposition: r.disposition === null ? null : oneOf(DISPOSITIONS, 'disposition', r.disposition),
    closedMs: r.closed_ms === null ? null : msOf('closed_ms', r.closed_ms),
    closedBy: r.closed_by,
  };
}

function noteOf(r: ReviewTables['review_note']): ReviewNote {
  return { id: r.id, caseId: r.case_id, author: r.author, atMs: msOf('at_ms', r.at_ms), text: r.text };
}
