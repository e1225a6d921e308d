import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import { DummyDriver, Kysely, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler } from 'kysely';
import { currentLabelQueries } from './decision-batch.ts';
import type { DecisionTables } from './decision-tables.ts';
import {
  COLUMNS,
  labelledIds,
  ON_CONFLICT,
  type WireTable as Table,
  WIRE_TABLES,
  type WireBatch,
  type WireValue,
} from './decision-wire.ts';

/**
 * How the SQLite writer thread writes a wire batch (src/decision-store/decision-wire.ts). Issue 32
 * measured kysely compiling and preparing its statements every batch at 58-76 µs: the thread runs
 * statements it prepared once. The statements say what src/decision-store/decision-batch.ts's
 * `writeOps` says in kysely's builder (PostgreSQL's path); test/decision-store*.test.ts run both.
 */

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

const insert = (table: Table) =>
  `INSERT INTO ${table} (${COLUMNS[table].join(', ')}) VALUES (${COLUMNS[table].map(() => '?').join(', ')}) ${ON_CONFLICT[table]}`;

/** Writes wire batches into `db` with statements prepared on first use, each batch one transaction. */
export function wireWriter(db: DatabaseSync): (batch: WireBatch) => void {
  let statements: Record<Table, StatementSync> | undefined;
  let labels: { statement: StatementSync; parameters: SQLInputValue[]; at: number }[] | undefined;
  const prepare = () =>
    Object.fromEntries(WIRE_TABLES.map((t) => [t, db.prepare(insert(t))])) as Record<Table, StatementSync>;
  const runAll = (table: Table, values: WireValue[]) => {
    const width = COLUMNS[table].length;
    const statement = statements![table];
    for (let i = 0; i < values.length; i += width) statement.run(...values.slice(i, i + width));
  };
  return (batch) => {
    statements ??= prepare();
    labels ??= LABEL_QUERIES.map((q) => ({ ...q, statement: db.prepare(q.sql) }));
    db.exec('BEGIN');
    try {
      for (const table of WIRE_TABLES) runAll(table, batch[table]);
      // The current label (the newest analyst label, else the outcomes'): set for each labelled
      // decision, and for a decision whose label arrived first (another worker, an earlier batch).
      for (const id of labelledIds(batch) as Set<SQLInputValue>) {
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
