import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import type { StoreOp } from './decision-rows.ts';
import type { DecisionTables } from './decision-tables.ts';

/**
 * A batch as the SQLite writer thread is handed it, and how the thread writes it. Issue 32 measured
 * the old hand-over (an object per row, cloned key by key by `postMessage`) at 12.4 % of the hot
 * process, and kysely compiling and preparing its statements every batch at 58-76 µs: the rows now
 * cross as one flat array of values per table, in the column order below, and the thread runs
 * statements it prepared once. The statements say what src/decision-store/decision-batch.ts's
 * `writeOps` says in kysely's builder (PostgreSQL's path); test/decision-store*.test.ts run both.
 */

type Columns<T extends keyof DecisionTables> = readonly (keyof DecisionTables[T] & string)[];

/** The columns written, in the order of the flat arrays. */
const COLUMNS = {
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
} as const;

type Table = keyof typeof COLUMNS;

// Every column of each table's row type is in its list: a column added to DecisionTables (a
// migration) fails to compile here until the thread writes it too (kysely's path writes it as is).
type Unlisted<T extends Table> = Exclude<keyof DecisionTables[T], (typeof COLUMNS)[T][number]>;
const everyColumnListed: { [T in Table]: [Unlisted<T>] extends [never] ? true : Unlisted<T> } = {
  decision: true,
  decision_rule: true,
  decision_action: true,
  decision_label: true,
};
void everyColumnListed;

/** A batch on the wire: per table its rows' values one after another. */
export type WireBatch = Record<Table, SQLInputValue[]>;

// Every column holds text, a number or null (decision-rows.ts builds them so): bindable as is.
function push<T extends Table>(out: SQLInputValue[], table: T, row: DecisionTables[T]): void {
  for (const c of COLUMNS[table] as readonly string[]) out.push((row as Record<string, SQLInputValue>)[c]!);
}

/**
 * The flat form of `ops`, in one pass on the event loop. Not deduplicated: the thread runs one
 * statement per row, where a repeated key is harmless (`writeOps` deduplicates for PostgreSQL,
 * which refuses one statement touching a row twice): a repeated decision, rule or label is kept
 * once, and of an action's outcomes the newest stays.
 */
export function wireBatch(ops: readonly StoreOp[]): WireBatch {
  const batch: WireBatch = { decision: [], decision_rule: [], decision_action: [], decision_label: [] };
  for (const op of ops) {
    if (op.kind === 'decision') {
      push(batch.decision, 'decision', op.row);
      for (const rule of op.rules) push(batch.decision_rule, 'decision_rule', rule);
    } else if (op.kind === 'action') push(batch.decision_action, 'decision_action', op.row);
    else push(batch.decision_label, 'decision_label', op.row);
  }
  return batch;
}

const insert = (table: Table, conflict: string) =>
  `INSERT INTO ${table} (${COLUMNS[table].join(', ')}) VALUES (${COLUMNS[table].map(() => '?').join(', ')}) ${conflict}`;

/** The decision ids of a batch's labels and decisions (each the first column of its table), once each. */
function labelled(batch: WireBatch): Set<SQLInputValue> {
  const ids = new Set<SQLInputValue>();
  for (const table of ['decision_label', 'decision'] as const) {
    const width = COLUMNS[table].length;
    for (let i = 0; i < batch[table].length; i += width) ids.add(batch[table][i]!);
  }
  return ids;
}

/** Writes wire batches into `db` with statements prepared on first use, each batch one transaction. */
export function wireWriter(db: DatabaseSync): (batch: WireBatch) => void {
  let statements: Record<Table | 'label', StatementSync> | undefined;
  const prepare = () => ({
    decision: db.prepare(insert('decision', 'ON CONFLICT (decision_id) DO NOTHING')),
    decision_rule: db.prepare(
      insert('decision_rule', 'ON CONFLICT (decision_id, policy, rule_id) DO NOTHING'),
    ),
    decision_action: db.prepare(
      insert(
        'decision_action',
        // An older outcome arriving late (another worker's batch) never hides a newer one.
        `ON CONFLICT (action_id) DO UPDATE SET status = excluded.status, detail = excluded.detail,
           at_ms = excluded.at_ms WHERE decision_action.at_ms <= excluded.at_ms`,
      ),
    ),
    decision_label: db.prepare(
      insert('decision_label', 'ON CONFLICT (decision_id, at_ms, labelled_by, label) DO NOTHING'),
    ),
    label: db.prepare(
      `UPDATE decision SET label = (SELECT decision_label.label FROM decision_label
         WHERE decision_label.decision_id = decision.decision_id ORDER BY decision_label.at_ms DESC LIMIT 1)
       WHERE decision.decision_id = ? AND EXISTS (SELECT decision_label.decision_id FROM decision_label
         WHERE decision_label.decision_id = decision.decision_id)`,
    ),
  });
  const runAll = (table: Table, values: SQLInputValue[]) => {
    const width = COLUMNS[table].length;
    const statement = statements![table];
    for (let i = 0; i < values.length; i += width) statement.run(...values.slice(i, i + width));
  };
  return (batch) => {
    statements ??= prepare();
    db.exec('BEGIN');
    try {
      runAll('decision', batch.decision);
      runAll('decision_rule', batch.decision_rule);
      runAll('decision_action', batch.decision_action);
      runAll('decision_label', batch.decision_label);
      // The current label is the newest: set for each labelled decision, and for a decision whose
      // label arrived first (given on another worker, written in an earlier batch).
      for (const id of labelled(batch)) statements.label.run(id);
      db.exec('COMMIT');
    } catch (error) {
      // SQLite rolls back by itself on some errors (SQLITE_FULL, SQLITE_IOERR): nothing left to undo.
      if (db.isTransaction) db.exec('ROLLBACK');
      throw error;
    }
  };
}
