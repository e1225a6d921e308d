import { type ExpressionBuilder, type Kysely, type SqlBool, sql } from 'kysely';
import { outcomeLabelSql } from '../outcomes/outcome-labels.ts';
import type { ActionRow, DecisionRow, LabelRow, OutcomeRow, RuleRow, StoreOp } from './decision-rows.ts';
import type { DecisionTables } from './decision-tables.ts';
import { type CountedDecision, type CountedRule, countInserted, countsByWriter } from './hour-counts.ts';

/**
 * The store's writes, in kysely's builder (one text for SQLite and PostgreSQL): a batch of records
 * in one transaction, and retention. Every write is idempotent, so a batch whose deadline passed
 * (it may have landed after all) can be written again: decisions and rules are kept once, an
 * action keeps its newest outcome, a label is kept once (`decision_label_once`), an outcome of the
 * login once per kind and value (its first report).
 */

export type DecisionDb = Kysely<DecisionTables>;

/** Where the store writes: a worker thread's connection (SQLite, PostgreSQL), or kysely in this thread. */
export interface DecisionSink {
  /** Writes `ops` in one transaction. */
  write(ops: StoreOp[]): Promise<void>;
  /** One bounded step of retention: deletes at most `chunk` of the oldest decisions past either bound. */
  prune(retention: Retention, nowMs: number): Promise<number>;
  close(): Promise<void>;
  /** Ends its own connection, if it has one: the next write opens the file again (reopened). */
  restart?(): Promise<void>;
}

/** How long and how much the store keeps. */
export interface Retention {
  /** Decisions older than this go, milliseconds. */
  maxAgeMs: number;
  /** Past this many bytes of logged lines (sum of `line_bytes`), the oldest decisions go. */
  maxBytes: number;
  /** Most decisions deleted per step. */
  chunk: number;
}

// Bound parameters per statement: SQLite allows 32 766, PostgreSQL 65 535.
const DECISION_ROWS_PER_INSERT = 200;
const SMALL_ROWS_PER_INSERT = 1000;

function chunks<T>(rows: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < rows.length; i += size) out.push(rows.slice(i, i + size));
  return out;
}

/** The last of each key: one statement must not upsert the same row twice (PostgreSQL refuses). */
function lastByKey<T>(rows: T[], key: (row: T) => string): T[] {
  return [...new Map(rows.map((r) => [key(r), r])).values()];
}

/** A batch's rows per table, each key once, and the decisions whose current label is to be set. */
export interface BatchRows {
  decisions: DecisionRow[];
  rules: RuleRow[];
  actions: ActionRow[];
  labels: LabelRow[];
  /** The login backend's outcomes, each (decision, type, value) once. */
  outcomes: OutcomeRow[];
  /**
   * The current label is the newest: set for each labelled decision, and for a decision whose
   * label arrived first (given on another worker, written in an earlier batch).
   */
  labelled: string[];
}

/** The rows of `ops`, the last of each key kept (one statement must not upsert a row twice). */
export function batchRows(ops: readonly StoreOp[]): BatchRows {
  const decisions: DecisionRow[] = [];
  const rules: RuleRow[] = [];
  const labels: LabelRow[] = [];
  const actions: ActionRow[] = [];
  const outcomes: OutcomeRow[] = [];
  for (const op of ops) {
    if (op.kind === 'decision') {
      decisions.push(op.row);
      rules.push(...op.rules);
    } else if (op.kind === 'label') labels.push(op.row);
    else if (op.kind === 'outcome') outcomes.push(op.row);
    else actions.push(op.row);
  }
  return {
    decisions: lastByKey(decisions, (d) => d.decision_id),
    rules: lastByKey(rules, (r) => `${r.decision_id}\0${r.policy}\0${r.rule_id}`),
    actions: lastByKey(actions, (a) => a.action_id),
    labels: lastByKey(labels, (l) => `${l.decision_id}\0${l.at_ms}\0${l.labelled_by}\0${l.label}`),
    outcomes: lastByKey(outcomes, (o) => `${o.decision_id}\0${o.type}\0${o.value}`),
    labelled: [...new Set([...labels, ...outcomes, ...decisions].map((row) => row.decision_id))],
  };
}

/** What `countInserted` reads of a stored decision (RETURNING: only the rows an insert stored). */
const COUNTED_DECISION_COLUMNS = [
  'decision_id',
  'at_ms',
  'verdict',
  'policy_revision',
  'shadow_revision',
  'shadow_verdict',
] as const satisfies readonly (keyof CountedDecision)[];

/** Writes `ops` into `db` in one transaction. */
export async function writeOps(db: DecisionDb, ops: readonly StoreOp[]): Promise<void> {
  const { decisions, rules, actions, labels, outcomes, labelled } = batchRows(ops);
  // SQLite: the rows stored (not those already there) are counted by their hours here.
  const counting = countsByWriter(db);
  await db.transaction().execute(async (tx) => {
    const stored: { decisions: CountedDecision[]; rules: CountedRule[] } = { decisions: [], rules: [] };
    for (const part of chunks(decisions, DECISION_ROWS_PER_INSERT)) {
      const insert = tx
        .insertInto('decision')
        .values(part)
        .onConflict((oc) => oc.column('decision_id').doNothing());
      if (!counting) await insert.execute();
      else stored.decisions.push(...(await insert.returning(COUNTED_DECISION_COLUMNS).execute()));
    }
    for (const part of chunks(rules, SMALL_ROWS_PER_INSERT)) {
      const insert = tx
        .insertInto('decision_rule')
        .values(part)
        .onConflict((oc) => oc.columns(['decision_id', 'policy', 'rule_id']).doNothing());
      if (!counting) await insert.execute();
      else stored.rules.push(...(await insert.returningAll().execute()));
    }
    await countInserted(tx, stored.decisions, stored.rules);
    for (const part of chunks(actions, SMALL_ROWS_PER_INSERT)) {
      await tx
        .insertInto('decision_action')
        .values(part)
        .onConflict((oc) =>
          oc
            .column('action_id')
            .doUpdateSet((eb) => ({
              status: eb.ref('excluded.status'),
              detail: eb.ref('excluded.detail'),
              at_ms: eb.ref('excluded.at_ms'),
            }))
            // An older outcome arriving late (another worker's batch) never hides a newer one.
            .where('decision_action.at_ms', '<=', (eb) => eb.ref('excluded.at_ms')),
        )
        .execute();
    }
    for (const part of chunks(labels, SMALL_ROWS_PER_INSERT)) {
      await tx
        .insertInto('decision_label')
        .values(part)
        .onConflict((oc) => oc.columns(['decision_id', 'at_ms', 'labelled_by', 'label']).doNothing())
        .execute();
    }
    for (const part of chunks(outcomes, SMALL_ROWS_PER_INSERT)) {
      await tx
        .insertInto('decision_outcome')
        .values(part)
        .onConflict((oc) => oc.columns(['decision_id', 'type', 'value']).doNothing())
        .execute();
    }
    await currentLabels(tx, labelled);
  });
}

/**
 * The labels of the decisions `ids` (labelled, given an outcome, or just written: a label or an
 * outcome given on another worker may have come first): the outcomes' label by their rules
 * (src/outcomes/outcome-labels.ts), then the current label, the newest analyst label, else the
 * outcomes'. Decisions with neither are left as written (null).
 */
async function currentLabels(tx: DecisionDb, ids: string[]): Promise<void> {
  for (const part of chunks(ids, SMALL_ROWS_PER_INSERT)) {
    for (const query of currentLabelQueries(tx, part)) await query.execute();
  }
}

/**
 * The two updates that set the current label of the decisions `ids`, in order: the outcomes' label,
 * then the label. One definition for every path: `writeOps` runs them, and the writer threads
 * compile them once (src/decision-store/sqlite-batch-wire.ts, pg-batch-wire.ts). `ids` is a list
 * (`IN (...)`), or one parameter whatever the batch's size (a fixed text, prepared once): `{ array
 * }` a PostgreSQL array (`= ANY($n::text[])`), `{ json }` a SQLite JSON array (`IN (SELECT value
 * FROM json_each(?))`).
 */
export function currentLabelQueries(
  db: DecisionDb,
  ids: readonly string[] | { array: unknown } | { json: unknown },
) {
  const ofIds = (eb: ExpressionBuilder<DecisionTables, 'decision'>) => {
    if (Array.isArray(ids)) return eb('decision.decision_id', 'in', ids as readonly string[]);
    const one = ids as { array?: unknown; json?: unknown };
    return 'array' in one
      ? sql<SqlBool>`decision.decision_id = any(${one.array}::text[])`
      : sql<SqlBool>`decision.decision_id in (select value from json_each(${one.json}))`;
  };
  return [
    db
      .updateTable('decision')
      .set({ outcome_label: outcomeLabelSql() })
      .where(ofIds)
      .where((eb) =>
        eb.exists(
          eb
            .selectFrom('decision_outcome')
            .select('decision_outcome.decision_id')
            .whereRef('decision_outcome.decision_id', '=', 'decision.decision_id'),
        ),
      ),
    db
      .updateTable('decision')
      .set((eb) => ({
        label: eb.fn.coalesce(
          eb
            .selectFrom('decision_label')
            .select('decision_label.label')
            .whereRef('decision_label.decision_id', '=', 'decision.decision_id')
            .orderBy('decision_label.at_ms', 'desc')
            .limit(1),
          eb.ref('decision.outcome_label'),
        ),
      }))
      .where(ofIds)
      .where((eb) =>
        eb.or([
          eb.exists(
            eb
              .selectFrom('decision_label')
              .select('decision_label.decision_id')
              .whereRef('decision_label.decision_id', '=', 'decision.decision_id'),
          ),
          eb('decision.outcome_label', 'is not', null),
        ]),
      ),
  ] as const;
}

/**
 * One bounded step of retention: the oldest decisions older than `maxAgeMs`, else (while the
 * lines add up to more than `maxBytes`) the oldest ones past it, at most `chunk`, with their rules,
 * labels, outcomes and actions. Returns how many decisions went (0: nothing to do).
 */
export async function pruneStep(db: DecisionDb, retention: Retention, nowMs: number): Promise<number> {
  let ids = (
    await db
      .selectFrom('decision')
      .select('decision_id')
      .where('at_ms', '<', nowMs - retention.maxAgeMs)
      .orderBy('at_ms')
      .limit(retention.chunk)
      .execute()
  ).map((r) => r.decision_id);
  if (ids.length === 0) ids = await overSize(db, retention);
  if (ids.length === 0) return 0;
  await db.transaction().execute(async (tx) => {
    for (const part of chunks(ids, SMALL_ROWS_PER_INSERT)) {
      await tx.deleteFrom('decision_rule').where('decision_id', 'in', part).execute();
      await tx.deleteFrom('decision_label').where('decision_id', 'in', part).execute();
      await tx.deleteFrom('decision_action').where('decision_id', 'in', part).execute();
      await tx.deleteFrom('decision_outcome').where('decision_id', 'in', part).execute();
      await tx.deleteFrom('decision').where('decision_id', 'in', part).execute();
    }
  });
  return ids.length;
}

/** The oldest decisions whose lines take the store past `maxBytes` (at most `chunk`). */
async function overSize(db: DecisionDb, retention: Retention): Promise<string[]> {
  const total = await db
    .selectFrom('decision')
    .select((eb) => eb.fn.sum<number | string | null>('line_bytes').as('bytes'))
    .executeTakeFirst();
  let excess = Number(total?.bytes ?? 0) - retention.maxBytes;
  if (excess <= 0) return [];
  const oldest = await db
    .selectFrom('decision')
    .select(['decision_id', 'line_bytes'])
    .orderBy('at_ms')
    .limit(retention.chunk)
    .execute();
  const ids: string[] = [];
  for (const row of oldest) {
    if (excess <= 0) break;
    ids.push(row.decision_id);
    excess -= Number(row.line_bytes);
  }
  return ids;
}

/** A sink writing through `db` in this thread: a database handed over without its settings (tests). */
export function kyselySink(db: DecisionDb): DecisionSink {
  return {
    write: (ops) => writeOps(db, ops),
    prune: (retention, nowMs) => pruneStep(db, retention, nowMs),
    close: async () => {},
  };
}
