import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import { DummyDriver, Kysely, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler } from 'kysely';
import { currentLabelQueries } from './decision-batch.ts';
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

type Table = keyof typeof COLUMNS;

// Every column of each table's row type is in its list: a column added to DecisionTables (a
// migration) fails to compile here until the thread writes it too (kysely's path writes it as is).
type Unlisted<T extends Table> = Exclude<keyof DecisionTables[T], (typeof COLUMNS)[T][number]>;
const everyColumnListed: { [T in Table]: [Unlisted<T>] extends [never] ? true : Unlisted<T> } = {
  decision: true,
  decision_rule: true,
  decision_action: true,
  decision_label: true,
  decision_outcome: true,
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

/** Stands for the decision id in the compiled label updates; replaced by each id at run time. */
const ID_PLACEHOLDER = '\u0000decision-id';

/**
 * `currentLabelQueries` (decision-batch.ts, what `writeOps` runs) compiled for SQLite once, for one
 * decision: the label rules live in one place, and the thread prepares their SQL like its inserts.
 */
const LABEL_QUERIES = (() => {
  const cold = new Kysely<DecisionTables>({
    dialect: {
      createAdapter: () => new SqliteAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new SqliteIntrospector(db),
      createQueryCompiler: () => new SqliteQueryCompiler(),
    },
  });
  return currentLabelQueries(cold, [ID_PLACEHOLDER]).map((query) => {
    const { sql, parameters } = query.compile();
    return { sql, parameters: parameters as SQLInputValue[], at: parameters.indexOf(ID_PLACEHOLDER) };
  });
})();

const insert = (table: Table, conflict: string) =>
  `INSERT INTO ${table} (${COLUMNS[table].join(', ')}) VALUES (${COLUMNS[table].map(() => '?').join(', ')}) ${conflict}`;

/** The decision ids of a batch's labels, outcomes and decisions (each the first column of its table), once each. */
function labelled(batch: WireBatch): Set<SQLInputValue> {
  const ids = new Set<SQLInputValue>();
  for (const table of ['decision_label', 'decision_outcome', 'decision'] as const) {
    const width = COLUMNS[table].length;
    for (let i = 0; i < batch[table].length; i += width) ids.add(batch[table][i]!);
  }
  return ids;
}

/** Writes wire batches into `db` with statements prepared on first use, each batch one transaction. */
export function wireWriter(db: DatabaseSync): (batch: WireBatch) => void {
  let statements: Record<Table, StatementSync> | undefined;
  let labels: { statement: StatementSync; parameters: SQLInputValue[]; at: number }[] | undefined;
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
    decision_outcome: db.prepare(
      insert('decision_outcome', 'ON CONFLICT (decision_id, type, value) DO NOTHING'),
    ),
  });
  const runAll = (table: Table, values: SQLInputValue[]) => {
    const width = COLUMNS[table].length;
    const statement = statements![table];
    for (let i = 0; i < values.length; i += width) statement.run(...values.slice(i, i + width));
  };
  return (batch) => {
    statements ??= prepare();
    labels ??= LABEL_QUERIES.map((q) => ({ ...q, statement: db.prepare(q.sql) }));
    db.exec('BEGIN');
    try {
      runAll('decision', batch.decision);
      runAll('decision_rule', batch.decision_rule);
      runAll('decision_action', batch.decision_action);
      runAll('decision_label', batch.decision_label);
      runAll('decision_outcome', batch.decision_outcome);
      // The current label (the newest analyst label, else the outcomes'): set for each labelled
      // decision, and for a decision whose label arrived first (another worker, an earlier batch).
      for (const id of labelled(batch)) {
        for (const q of labels) {
          const parameters = [...q.parameters];
          parameters[q.at] = id;
          q.statement.run(...parameters);
        }
      }
      db.exec('COMMIT');
    } catch (error) {
      // SQLite rolls back by itself on some errors (SQLITE_FULL, SQLITE_IOERR): nothing left to undo.
      if (db.isTransaction) db.exec('ROLLBACK');
      throw error;
    }
  };
}
