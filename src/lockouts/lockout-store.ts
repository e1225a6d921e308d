import type { CompiledQuery, Insertable, Kysely, Selectable } from 'kysely';
import type { ActionOutcome, CompanionTx, DeliveredCheck, Delivery } from '../actions/action-dispatcher.ts';
import type { RiskgateDatabase } from '../database/database.ts';
import { queryTemplate } from '../database/query-template.ts';
import {
  ACTIVE_STATUSES,
  APPLIED_STATUSES,
  type LockoutStatus,
  type LockoutView,
  OPERATOR_UNLOCK_SUFFIX,
  type PlannedLockout,
} from './lockout-record.ts';
import type { LockoutTables } from './lockout-tables.ts';

type Row = Selectable<LockoutTables['lockout']>;

/** The rule of a row made from a lock's outcome before (or without) the decision's record. */
const UNKNOWN_RULE = 'unknown';

export interface LockoutFilter {
  userId?: string | undefined;
  /** The login backend's account id (the decision's `accountId`). */
  accountId?: string | undefined;
  status?: LockoutStatus | undefined;
  /** From a previous page's `nextCursor`: the lock-outs after it (older). */
  cursor?: string | undefined;
  /** Most lock-outs in a page. Default 50, at most 200. */
  limit?: number | undefined;
}

/** A lock-out's end before any escalation: its duration from its creation, or none (permanent). */
const untilOf = (p: PlannedLockout): number | null =>
  p.durationMs === undefined ? null : p.createdMs + p.durationMs;

/** Whether recording `p` reads the user's previous lock-out first (it may be escalated). */
const mayEscalate = (p: PlannedLockout): boolean =>
  untilOf(p) !== null && p.status === 'queued' && p.escalateWithinMs !== undefined;

/** A page's position, opaque to callers: the last row's (created_ms, id). */
function encodeCursor(row: Pick<Row, 'created_ms' | 'id'>): string {
  return Buffer.from(JSON.stringify([Number(row.created_ms), row.id])).toString('base64url');
}

/** The (created_ms, id) of a cursor; undefined when it is not one of ours. */
export function decodeCursor(cursor: string): [number, string] | undefined {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    return Array.isArray(v) && Number.isSafeInteger(v[0]) && typeof v[1] === 'string'
      ? [v[0] as number, v[1] as string]
      : undefined;
  } catch {
    return undefined;
  }
}

const iso = (ms: number | null): string | undefined =>
  ms === null ? undefined : new Date(Number(ms)).toISOString();

export function lockoutView(r: Row): LockoutView {
  const view: LockoutView = {
    id: r.id,
    userId: r.user_id,
    decisionId: r.decision_id,
    createdAt: new Date(Number(r.created_ms)).toISOString(),
    status: r.status as LockoutStatus,
    escalated: r.escalated === 1,
  };
  const optional: Partial<LockoutView> = {
    accountId: r.account_id ?? undefined,
    rule: r.rule ?? undefined,
    until: iso(r.until_ms),
    endedAt: iso(r.ended_ms),
    endedBy: r.ended_by ?? undefined,
    reason: r.reason ?? undefined,
    unlockStatus: (r.unlock_status ?? undefined) as LockoutView['unlockStatus'],
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) Object.assign(view, { [k]: v });
  return view;
}

/**
 * The lock-out records in the database (src/lockouts/lockout-tables.ts), in kysely's builder: the
 * same queries on SQLite and PostgreSQL. Writes are idempotent (an outcome told twice, a record
 * whose decision's write was lost), so the recorder may retry them.
 */
/** A lock-out record as inserted. */
type InsertedLockout = Insertable<LockoutTables['lockout']>;

/**
 * The record's insert, built and compiled once per engine (src/database/query-template.ts: one
 * per deny, and `LockoutStore.within` makes a store per transaction), run on whichever handle asks.
 */
// biome-ignore lint/complexity/noBannedTypes: keyed by the adapter's class (one compiler per engine).
const insertTemplates = new Map<Function, (row: InsertedLockout) => CompiledQuery>();

function insertTemplate(db: Kysely<LockoutTables>): (row: InsertedLockout) => CompiledQuery {
  const engine = db.getExecutor().adapter.constructor;
  let template = insertTemplates.get(engine);
  if (template === undefined) {
    template = queryTemplate<InsertedLockout, unknown>((h) =>
      db
        .insertInto('lockout')
        .values({
          id: h.value('id'),
          user_id: h.value('user_id'),
          account_id: h.value('account_id'),
          decision_id: h.value('decision_id'),
          rule: h.value('rule'),
          created_ms: h.value('created_ms'),
          status: h.value('status'),
          until_ms: h.value('until_ms'),
          escalated: h.value('escalated'),
          ended_ms: h.value('ended_ms'),
          ended_by: h.value('ended_by'),
          reason: h.value('reason'),
          unlock_status: h.value('unlock_status'),
          updated_ms: h.value('updated_ms'),
        })
        // A row made from the lock's outcome first (its record came late: another replica, a full
        // queue) knows only the user: the record fills in the rest. Any other repeat is ignored.
        .onConflict((oc) =>
          oc
            .column('id')
            .doUpdateSet((eb) => ({
              account_id: eb.ref('excluded.account_id'),
              rule: eb.ref('excluded.rule'),
              created_ms: eb.ref('excluded.created_ms'),
              // A lock that failed has no end (as `#lockOutcome` records it).
              until_ms: eb
                .case()
                .when('lockout.status', '=', 'failed')
                .then(null)
                .else(eb.ref('excluded.until_ms'))
                .end(),
              escalated: eb.ref('excluded.escalated'),
              updated_ms: eb.ref('excluded.updated_ms'),
            }))
            .where('lockout.rule', '=', UNKNOWN_RULE)
            .where('excluded.rule', '!=', UNKNOWN_RULE),
        ),
    );
    insertTemplates.set(engine, template);
  }
  return template;
}

/** What a delivered lock's `locked` statement is filled with. */
interface LockedArgs {
  id: string;
  userId: string;
  createdMs: number;
  entryId: string;
  nowMs: number;
}

/**
 * A delivered lock's `locked`, compiled once per engine like the insert. The outbox's check is
 * the same SQL for every call on an engine (its one statement), so the template keeps the first.
 */
// biome-ignore lint/complexity/noBannedTypes: keyed by the adapter's class (one compiler per engine).
const lockedTemplates = new Map<Function, (args: LockedArgs) => CompiledQuery>();

function lockedTemplate(
  db: Kysely<LockoutTables>,
  delivered: DeliveredCheck,
): (args: LockedArgs) => CompiledQuery {
  const engine = db.getExecutor().adapter.constructor;
  let template = lockedTemplates.get(engine);
  if (template === undefined) {
    template = queryTemplate<LockedArgs, unknown>((h) =>
      db
        .insertInto('lockout')
        .columns(['id', 'user_id', 'decision_id', 'rule', 'created_ms', 'status', 'escalated', 'updated_ms'])
        // Typed: PostgreSQL gives a bare parameter in a SELECT's list the type text.
        .expression(
          db
            .selectNoFrom((eb) => [
              eb.cast<string>(eb.val(h.value('id')), 'text').as('id'),
              eb.cast<string>(eb.val(h.value('userId')), 'text').as('user_id'),
              eb.cast<string>(eb.val(h.value('id')), 'text').as('decision_id'),
              eb.cast<string>(eb.val(UNKNOWN_RULE), 'text').as('rule'),
              eb.cast<number>(eb.val(h.value('createdMs')), 'bigint').as('created_ms'),
              eb.cast<string>(eb.val('locked'), 'text').as('status'),
              eb.cast<number>(eb.val(0), 'integer').as('escalated'),
              eb.cast<number>(eb.val(h.value('nowMs')), 'bigint').as('updated_ms'),
            ])
            .where(delivered(h.value('entryId'))),
        )
        .onConflict((oc) =>
          oc
            .column('id')
            .doUpdateSet((eb) => ({
              status: 'locked',
              updated_ms: eb.ref('excluded.updated_ms'),
              reason: null,
            }))
            // As `lockedAll`: a dead-lettered lock an operator retried and the Admin API then took.
            .where('lockout.status', 'in', ['queued', 'failed']),
        ),
    );
    lockedTemplates.set(engine, template);
  }
  return template;
}

export class LockoutStore {
  readonly #db: Kysely<LockoutTables>;

  constructor(database: Pick<RiskgateDatabase, 'db'>) {
    this.#db = database.db.withTables<LockoutTables>();
  }

  /** The same queries inside `tx` (an outbox append's transaction: `AppendCompanion`). */
  static within(tx: CompanionTx): LockoutStore {
    return new LockoutStore({ db: tx });
  }

  /**
   * Records a decision's lock-out (once: a repeat is ignored). With `escalateWithinMs`, a lock-out
   * within that long of the user's previous applied one is made permanent now, so the list shows
   * it so; the scheduled unlock checks again (src/lockouts/unlock-gate.ts).
   */
  async add(p: PlannedLockout, nowMs: number): Promise<void> {
    let untilMs = untilOf(p);
    let escalated = 0;
    if (mayEscalate(p)) {
      if (
        (await this.previousWithin(p.userId, p.decisionId, p.createdMs, p.escalateWithinMs!)) !== undefined
      ) {
        untilMs = null;
        escalated = 1;
      }
    }
    await this.#db.executeQuery(this.#insert(p, untilMs, escalated, nowMs));
  }

  /**
   * `add` as its one statement, compiled and not run (an outbox append's companion, sent with the
   * append in one round trip: `AppendCompanion.statements`); undefined when `add` must read first
   * (an escalation to check).
   */
  addStatement(p: PlannedLockout, nowMs: number): CompiledQuery | undefined {
    return mayEscalate(p) ? undefined : this.#insert(p, untilOf(p), 0, nowMs);
  }

  #insert(p: PlannedLockout, untilMs: number | null, escalated: number, nowMs: number): CompiledQuery {
    return insertTemplate(this.#db)({
      id: p.decisionId,
      user_id: p.userId,
      account_id: p.accountId ?? null,
      decision_id: p.decisionId,
      rule: p.rule,
      created_ms: p.createdMs,
      status: p.status,
      until_ms: p.status === 'queued' ? untilMs : null,
      escalated,
      ended_ms: null,
      ended_by: null,
      reason: p.reason ?? null,
      unlock_status: null,
      updated_ms: nowMs,
    });
  }

  /** The user's applied lock-out before `createdMs` and within `windowMs` of it, other than `id`. */
  async previousWithin(
    userId: string,
    id: string,
    createdMs: number,
    windowMs: number,
  ): Promise<string | undefined> {
    const row = await this.#db
      .selectFrom('lockout')
      .select('id')
      .where('user_id', '=', userId)
      .where('id', '!=', id)
      .where('status', 'in', APPLIED_STATUSES)
      .where('created_ms', '>=', createdMs - windowMs)
      .where('created_ms', '<=', createdMs)
      .orderBy('created_ms', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row?.id;
  }

  /**
   * A lock-out of the user, other than `id`, that keeps the user locked past `id`'s end: a later
   * one still in force, or a permanent one still in force. Undefined when none does.
   */
  async extendedBy(
    userId: string,
    id: string,
    createdMs: number,
  ): Promise<{ id: string; why: string } | undefined> {
    const rows = await this.#db
      .selectFrom('lockout')
      .select(['id', 'created_ms', 'until_ms'])
      .where('user_id', '=', userId)
      .where('id', '!=', id)
      .where('status', 'in', ACTIVE_STATUSES)
      .where((eb) => eb.or([eb('created_ms', '>=', createdMs), eb('until_ms', 'is', null)]))
      .orderBy('created_ms', 'desc')
      .limit(1)
      .execute();
    const row = rows[0];
    if (row === undefined) return undefined;
    return { id: row.id, why: row.until_ms === null ? 'permanent_lockout_in_force' : 'later_lockout' };
  }

  async get(id: string): Promise<Row | undefined> {
    return this.#db.selectFrom('lockout').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Newest first. */
  async list(filter: LockoutFilter): Promise<{ lockouts: LockoutView[]; nextCursor?: string }> {
    const limit = Math.min(200, Math.max(1, filter.limit ?? 50));
    let q = this.#db.selectFrom('lockout').selectAll();
    if (filter.userId !== undefined) q = q.where('user_id', '=', filter.userId);
    if (filter.accountId !== undefined) q = q.where('account_id', '=', filter.accountId);
    if (filter.status !== undefined) q = q.where('status', '=', filter.status);
    const after = filter.cursor === undefined ? undefined : decodeCursor(filter.cursor);
    if (after !== undefined) {
      const [createdMs, id] = after;
      q = q.where((eb) =>
        eb.or([
          eb('created_ms', '<', createdMs),
          eb.and([eb('created_ms', '=', createdMs), eb('id', '<', id)]),
        ]),
      );
    }
    const rows = await q
      .orderBy('created_ms', 'desc')
      .orderBy('id', 'desc')
      .limit(limit + 1)
      .execute();
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      lockouts: page.map(lockoutView),
      ...(rows.length > limit && last !== undefined && { nextCursor: encodeCursor(last) }),
    };
  }

  /** Makes a temporary lock-out permanent (escalation found late, at its unlock). */
  async makePermanent(id: string, nowMs: number): Promise<void> {
    await this.#db
      .updateTable('lockout')
      .set({ until_ms: null, escalated: 1, updated_ms: nowMs })
      .where('id', '=', id)
      .execute();
  }

  /**
   * An operator's unlock of `id`: it and every other lock-out of the user still in force are
   * `unlocked` (the Admin user is enabled, whichever of them locked it), the unlock `queued`.
   * Conditional: false, nothing changed, when `id` ended meanwhile (another admin or replica
   * unlocked it, its end came), so two unlocks racing record one.
   */
  async beginUnlock(row: Row, operator: string, reason: string, nowMs: number): Promise<boolean> {
    return this.#db
      .transaction()
      .execute((tx) =>
        LockoutStore.within(tx as unknown as CompanionTx).beginUnlockHere(row, operator, reason, nowMs),
      );
  }

  /**
   * `beginUnlock` with this store's handle as it is: on a store `within` a transaction (the
   * unlock's outbox append), the record change and the unlock's entry are one commit.
   */
  async beginUnlockHere(row: Row, operator: string, reason: string, nowMs: number): Promise<boolean> {
    const tx = this.#db;
    const ended = { status: 'unlocked', ended_ms: nowMs, ended_by: operator, reason, updated_ms: nowMs };
    const mine = await tx
      .updateTable('lockout')
      .set({ ...ended, unlock_status: 'queued' })
      .where('id', '=', row.id)
      .where('status', 'not in', ['unlocked', 'expired'])
      .executeTakeFirst();
    if (Number(mine.numUpdatedRows) === 0) return false;
    await tx
      .updateTable('lockout')
      .set(ended)
      .where('user_id', '=', row.user_id)
      .where('status', 'in', ACTIVE_STATUSES)
      .execute();
    return true;
  }

  /** Applies an action's final outcome to the records it concerns (told at least once). */
  async applyOutcome(o: ActionOutcome, nowMs: number): Promise<void> {
    if (o.type === 'lock_out_user') await this.#lockOutcome(o, nowMs);
    else if (o.type === 'unlock_user' && o.key.endsWith(OPERATOR_UNLOCK_SUFFIX))
      await this.#operatorUnlockOutcome(o, nowMs);
    else if (o.type === 'unlock_user') await this.#scheduledUnlockOutcome(o, nowMs);
  }

  /**
   * The `done` outcomes of lock-outs (each told at least once) in one statement: the records
   * `applyOutcome` would set `locked` from `queued` or `failed`. The ids it did not update (a
   * record not written yet, or already past that) are returned, for `applyOutcome` one by one.
   * Issue 32: the outcomes of a turn's completions share one round trip instead of one each.
   */
  async lockedAll(outcomes: readonly ActionOutcome[], nowMs: number): Promise<ActionOutcome[]> {
    const ids = outcomes.map((o) => o.decisionId);
    const updated = await this.#db
      .updateTable('lockout')
      .set({ status: 'locked', updated_ms: nowMs, reason: null })
      .where('id', 'in', ids)
      .where('status', 'in', ['queued', 'failed'])
      .returning('id')
      .execute();
    const done = new Set(updated.map((r) => r.id));
    return outcomes.filter((o) => !done.has(o.decisionId));
  }

  /**
   * A lock's delivery, as `applyOutcome` records its `done` outcome (its record `locked` from
   * `queued` or `failed`; made from what the lock knows when the decision's record is missing), as
   * one statement compiled and not run, writing only if `delivered(spec.id)` holds: the outbox runs
   * it in the transaction that completes the lock's entry (`DeliveryCompanion`), so `locked` and
   * `delivered` are one commit and the outcome has nothing left to write.
   */
  lockedStatement({ spec, createdAtMs, nowMs }: Delivery, delivered: DeliveredCheck): CompiledQuery {
    return lockedTemplate(
      this.#db,
      delivered,
    )({
      id: spec.decisionId,
      userId: spec.target,
      createdMs: Math.round(createdAtMs),
      entryId: spec.id,
      nowMs: Math.round(nowMs),
    });
  }

  async #lockOutcome(o: ActionOutcome, nowMs: number): Promise<void> {
    const status = o.status === 'done' ? 'locked' : 'failed';
    const updated = await this.#db
      .updateTable('lockout')
      .set({
        status,
        updated_ms: nowMs,
        ...(o.status === 'failed' && { reason: o.reason ?? null, until_ms: null }),
        ...(o.status === 'done' && { reason: null }),
      })
      .where('id', '=', o.decisionId)
      // A dead-lettered lock-out (failed) an operator retried and the Admin API then took: locked.
      .where('status', 'in', o.status === 'done' ? ['queued', 'failed'] : ['queued'])
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) > 0) return;
    // The decision's own write was lost (a full queue, a crash): the outcome records what it knows.
    await this.add(
      {
        decisionId: o.decisionId,
        userId: o.target,
        rule: UNKNOWN_RULE,
        createdMs: nowMs - o.elapsedMs,
        status: 'queued',
      },
      nowMs,
    );
    await this.#db
      .updateTable('lockout')
      .set({ status, updated_ms: nowMs, ...(o.reason !== undefined && { reason: o.reason }) })
      .where('id', '=', o.decisionId)
      .where('status', '=', 'queued')
      .execute();
  }

  async #operatorUnlockOutcome(o: ActionOutcome, nowMs: number): Promise<void> {
    await this.#db
      .updateTable('lockout')
      .set({
        unlock_status: o.status,
        updated_ms: nowMs,
        ...(o.status === 'failed' && { reason: `unlock_failed:${o.reason ?? 'unknown'}` }),
      })
      .where('id', '=', o.decisionId)
      // Only a record this unlock began: one that lost its race, or was answered failed, kept its own.
      .where('unlock_status', 'is not', null)
      .execute();
  }

  /**
   * A temporary lock-out's end: done, the user is enabled, so it and the user's older lock-outs
   * still recorded in force are `expired`; skipped, the reason is noted and it stays in force.
   */
  async #scheduledUnlockOutcome(o: ActionOutcome, nowMs: number): Promise<void> {
    const row = await this.get(o.decisionId);
    if (o.status === 'done' && o.reason === undefined) {
      if (row === undefined) return;
      await this.#db
        .updateTable('lockout')
        .set({ status: 'expired', ended_ms: nowMs, ended_by: 'schedule', updated_ms: nowMs })
        .where('user_id', '=', row.user_id)
        .where('status', 'in', ACTIVE_STATUSES)
        .where('created_ms', '<=', Number(row.created_ms))
        .execute();
      return;
    }
    const note =
      o.status === 'done' ? `unlock_skipped:${o.reason}` : `unlock_failed:${o.reason ?? 'unknown'}`;
    await this.#db
      .updateTable('lockout')
      .set({ reason: note, updated_ms: nowMs })
      .where('id', '=', o.decisionId)
      .where('status', 'in', ACTIVE_STATUSES)
      .execute();
  }
}
