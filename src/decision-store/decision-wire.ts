import type { StoreOp } from './decision-rows.ts';
import type { DecisionTables } from './decision-tables.ts';

/**
 * A batch as the store's writer threads are handed it (SQLite: sqlite-batch-wire.ts, PostgreSQL:
 * pg-batch-wire.ts). Issue 32 measured the old hand-over (an object per row, cloned key by key by
 * `postMessage`) at 12.4 % of the hot process: the rows now cross as one flat array of values per
 * table, in the column order below, built in one pass on the event loop.
 */

type Columns<T extends keyof DecisionTables> = readonly (keyof DecisionTables[T] & string)[];

/** The columns written, in the order of the flat arrays. */
export const COLUMNS = {
  decision: [
    'decision_id',
    'at_ms',
    'verdict',
    'score',
    'degraded',
    'policy_name',
    'policy_revision',
    'account_id',
    'user_id',
    'ip',
    'unit_id',
    'shadow_verdict',
    'shadow_revision',
    'shadow_disagrees',
    'label',
    'total_ms',
    'line',
    'line_bytes',
    'outcome_label',
  ] satisfies Columns<'decision'>,
  decision_rule: [
    'decision_id',
    'policy',
    'policy_revision',
    'rule_id',
    'at_ms',
  ] satisfies Columns<'decision_rule'>,
  decision_action: [
    'action_id',
    'decision_id',
    'type',
    'target',
    'status',
    'detail',
    'at_ms',
  ] satisfies Columns<'decision_action'>,
  decision_label: [
    'decision_id',
    'label',
    'labelled_by',
    'note',
    'at_ms',
  ] satisfies Columns<'decision_label'>,
  decision_outcome: [
    'decision_id',
    'type',
    'value',
    'reported_by',
    'at_ms',
  ] satisfies Columns<'decision_outcome'>,
} as const;

export type WireTable = keyof typeof COLUMNS;

/** The tables in the order a batch writes them (a decision before its rules, its label after it). */
export const WIRE_TABLES: readonly WireTable[] = [
  'decision',
  'decision_rule',
  'decision_action',
  'decision_label',
  'decision_outcome',
];

/**
 * Each table's key, as its `ON CONFLICT` clause names it: a row of a batch whose key is already
 * stored (or earlier in the same statement) is the same row again.
 */
export const CONFLICT_KEYS = {
  decision: ['decision_id'],
  decision_rule: ['decision_id', 'policy', 'rule_id'],
  decision_action: ['action_id'],
  decision_label: ['decision_id', 'at_ms', 'labelled_by', 'label'],
  decision_outcome: ['decision_id', 'type', 'value'],
} as const satisfies { [T in WireTable]: readonly (typeof COLUMNS)[T][number][] };

/**
 * Each table's `ON CONFLICT` clause, the same on SQLite and PostgreSQL, as `writeOps` (kysely's
 * path) says it: writes are idempotent (a batch past its deadline is written again), so decisions,
 * rules, labels and outcomes are kept once, and an action keeps its newest outcome.
 */
export const ON_CONFLICT = Object.fromEntries(
  WIRE_TABLES.map((table) => [
    table,
    `ON CONFLICT (${CONFLICT_KEYS[table].join(', ')}) ${
      table === 'decision_action'
        ? // An older outcome arriving late (another worker's batch) never hides a newer one.
          `DO UPDATE SET status = excluded.status, detail = excluded.detail, at_ms = excluded.at_ms
           WHERE decision_action.at_ms <= excluded.at_ms`
        : 'DO NOTHING'
    }`,
  ]),
) as Record<WireTable, string>;

// Every column of each table's row type is in its list: a column added to DecisionTables (a
// migration) fails to compile here until the threads write it too (kysely's path writes it as is).
type Unlisted<T extends WireTable> = Exclude<keyof DecisionTables[T], (typeof COLUMNS)[T][number]>;
const everyColumnListed: { [T in WireTable]: [Unlisted<T>] extends [never] ? true : Unlisted<T> } = {
  decision: true,
  decision_rule: true,
  decision_action: true,
  decision_label: true,
  decision_outcome: true,
};
void everyColumnListed;

/** Every column holds text, a number or null (decision-rows.ts builds them so). */
export type WireValue = string | number | null;

/** A batch on the wire: per table its rows' values one after another. */
export type WireBatch = Record<WireTable, WireValue[]>;

function push<T extends WireTable>(out: WireValue[], table: T, row: DecisionTables[T]): void {
  for (const c of COLUMNS[table] as readonly string[]) out.push((row as Record<string, WireValue>)[c]!);
}

/**
 * The flat form of `ops`, in one pass on the event loop. Not deduplicated there: each thread does
 * what its statements need (SQLite's per-row statements need nothing; PostgreSQL's one statement
 * per table keeps the last of each key, as `writeOps` does).
 */
export function wireBatch(ops: readonly StoreOp[]): WireBatch {
  const batch: WireBatch = {
    decision: [],
    decision_rule: [],
    decision_action: [],
    decision_label: [],
    decision_outcome: [],
  };
  for (const op of ops) {
    if (op.kind === 'decision') {
      push(batch.decision, 'decision', op.row);
      for (const rule of op.rules) push(batch.decision_rule, 'decision_rule', rule);
    } else if (op.kind === 'action') push(batch.decision_action, 'decision_action', op.row);
    else if (op.kind === 'outcome') push(batch.decision_outcome, 'decision_outcome', op.row);
    else push(batch.decision_label, 'decision_label', op.row);
  }
  return batch;
}

/**
 * The decision ids whose current label is to be set (each the first column of its table), once
 * each: the labelled decisions, those given an outcome, and those just written (a label or an
 * outcome given on another worker may have come first). `batchRows`'s `labelled` for kysely's path.
 */
export function labelledIds(batch: WireBatch): Set<WireValue> {
  const ids = new Set<WireValue>();
  for (const table of ['decision_label', 'decision_outcome', 'decision'] as const) {
    const width = COLUMNS[table].length;
    for (let i = 0; i < batch[table].length; i += width) ids.add(batch[table][i]!);
  }
  return ids;
}
