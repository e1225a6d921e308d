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
import { HOUR_UPSERTS, type HourTable, HourTally } from './hour-counts.ts';

/**
 * How the SQLite writer thread writes a wire batch (src/decision-store/decision-wire.ts). Issue 32
 * measured kysely compiling and preparing its statements every batch at 58-76 µs: the thread runs
 * statements it prepared once. The statements say what src/decision-store/decision-batch.ts's
 * `writeOps` says in kysely's builder (PostgreSQL's path); test/decision-store*.test.ts run both.
 */

/** Stands for the JSON array of decision ids in the compiled label updates. */
const IDS_PLACEHOLDER = '\u0000decision-ids';

/**
 * `currentLabelQueries` (decision-batch.ts, what `writeOps` runs) compiled for SQLite once, over one
 * JSON array of the batch's ids (two statements a batch, not two per decision): the label rules live
 * in one place, and the thread prepares their SQL like its inserts.
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
  return currentLabelQueries(cold, { json: IDS_PLACEHOLDER }).map((query) => {
    const { sql, parameters } = query.compile();
    return { sql, parameters: parameters as SQLInputValue[], at: parameters.indexOf(IDS_PLACEHOLDER) };
  });
})();

const insert = (table: Table) =>
  `INSERT INTO ${table} (${COLUMNS[table].join(', ')}) VALUES (${COLUMNS[table].map(() => '?').join(', ')}) ${ON_CONFLICT[table]}`;

/** Where each column the hour counts read sits in its table's flat rows. */
const columnAt = <T extends Table>(table: T, column: (typeof COLUMNS)[T][number]) =>
  (COLUMNS[table] as readonly string[]).indexOf(column);
const D = {
  id: columnAt('decision', 'decision_id'),
  at: columnAt('decision', 'at_ms'),
  verdict: columnAt('decision', 'verdict'),
  revision: columnAt('decision', 'policy_revision'),
  shadowRevision: columnAt('decision', 'shadow_revision'),
  shadowVerdict: columnAt('decision', 'shadow_verdict'),
};
const R = {
  id: columnAt('decision_rule', 'decision_id'),
  rule: columnAt('decision_rule', 'rule_id'),
  policy: columnAt('decision_rule', 'policy'),
  at: columnAt('decision_rule', 'at_ms'),
  revision: columnAt('decision_rule', 'policy_revision'),
};

/** Statements of one connection, prepared on its first batch. */
interface Prepared {
  inserts: Record<Table, StatementSync>;
  labels: { statement: StatementSync; parameters: SQLInputValue[]; at: number }[];
  hours: Record<HourTable, StatementSync>;
  verdictOf: StatementSync;
}

/**
 * Writes wire batches into `db` with statements prepared on first use, each batch one transaction,
 * the hour counts of the rows it stored included (src/decision-store/hour-counts.ts): a row whose
 * insert changed nothing (`changes` 0: stored by an earlier try of the batch, or earlier in it)
 * counts nothing. `countHours: false` leaves them out (bench/decision-store.ts, their cost).
 */
export function wireWriter(db: DatabaseSync, o: { countHours?: boolean } = {}): (batch: WireBatch) => void {
  const countHours = o.countHours ?? true;
  let p: Prepared | undefined;
  const prepare = (): Prepared => ({
    inserts: Object.fromEntries(WIRE_TABLES.map((t) => [t, db.prepare(insert(t))])) as Prepared['inserts'],
    labels: LABEL_QUERIES.map((q) => ({ ...q, statement: db.prepare(q.sql) })),
    hours: {
      decision_hour: db.prepare(HOUR_UPSERTS.decision_hour),
      decision_rule_hour: db.prepare(HOUR_UPSERTS.decision_rule_hour),
    },
    verdictOf: db.prepare('SELECT verdict FROM decision WHERE decision_id = ?'),
  });
  /** Inserts `table`'s rows; calls `stored` with the offset of each row its insert stored. */
  const runAll = (table: Table, values: WireValue[], stored?: (i: number) => void) => {
    const width = COLUMNS[table].length;
    const statement = p!.inserts[table];
    for (let i = 0; i < values.length; i += width) {
      const { changes } = statement.run(...values.slice(i, i + width));
      if (stored !== undefined && Number(changes) > 0) stored(i);
    }
  };
  return (batch) => {
    p ??= prepare();
    const tally = countHours ? new HourTally() : undefined;
    // The verdict of each decision this batch stored: its rules count under it.
    const verdicts = new Map<WireValue, string>();
    const d = batch.decision;
    const r = batch.decision_rule;
    const counted: Partial<Record<Table, (i: number) => void>> | undefined = tally && {
      decision: (i) => {
        const verdict = d[i + D.verdict] as string;
        tally.decision(
          Number(d[i + D.at]),
          verdict,
          d[i + D.revision] as string,
          d[i + D.shadowRevision],
          d[i + D.shadowVerdict],
        );
        verdicts.set(d[i + D.id]!, verdict);
      },
      // After the decisions (WIRE_TABLES' order). A rule whose decision is not in this batch's
      // stored ones (stored before): the stored verdict, as the delete trigger will read it.
      decision_rule: (i) => {
        const id = r[i + R.id]!;
        const verdict =
          verdicts.get(id) ?? (p!.verdictOf.get(id) as { verdict?: string } | undefined)?.verdict;
        tally.rule(
          r[i + R.rule] as string,
          r[i + R.policy] as string,
          Number(r[i + R.at]),
          r[i + R.revision] as string,
          verdict,
        );
      },
    };
    db.exec('BEGIN');
    try {
      for (const table of WIRE_TABLES) runAll(table, batch[table], counted?.[table]);
      // The current label (the newest analyst label, else the outcomes'): set for each labelled
      // decision, and for a decision whose label arrived first (another worker, an earlier batch).
      const ids = labelledIds(batch);
      const json = JSON.stringify([...ids]);
      for (const q of ids.size === 0 ? [] : p.labels) {
        const parameters = [...q.parameters];
        parameters[q.at] = json;
        q.statement.run(...parameters);
      }
      if (tally !== undefined) {
        for (const table of ['decision_hour', 'decision_rule_hour'] as const)
          for (const parameters of tally.parameters(table)) p.hours[table].run(...parameters);
      }
      db.exec('COMMIT');
    } catch (error) {
      // SQLite rolls back by itself on some errors (SQLITE_FULL, SQLITE_IOERR): nothing left to undo.
      if (db.isTransaction) db.exec('ROLLBACK');
      throw error;
    }
  };
}
