import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';
import type pg from 'pg';
import { currentLabelQueries } from './decision-batch.ts';
import type { DecisionTables } from './decision-tables.ts';
import {
  COLUMNS,
  CONFLICT_KEYS,
  labelledIds,
  ON_CONFLICT,
  WIRE_TABLES,
  type WireBatch,
  type WireTable,
  type WireValue,
} from './decision-wire.ts';

/**
 * How the PostgreSQL writer thread (pg-store-thread.ts) writes a wire batch
 * (src/decision-store/decision-wire.ts): one transaction, one `INSERT ... SELECT * FROM
 * unnest($1::text[], $2::bigint[], ...)` per table (each column one array parameter: a fixed text
 * whatever the batch's size, so a named statement PostgreSQL parses and plans once per connection),
 * then the two label updates over an array of the batch's decision ids. The statements say what
 * src/decision-store/decision-batch.ts's `writeOps` says in kysely's builder, the same `ON CONFLICT`
 * (decision-wire.ts) and the same dedupe: one statement must not upsert a row twice (PostgreSQL
 * refuses), so the last row of each key is kept, as `batchRows` does.
 */

/** Each column's SQL type (`format_type`), per table: read from the catalog, the migrations' word. */
export type ColumnTypes = Record<WireTable, Record<string, string>>;

/** The column types of the store's tables on the connection `client` (its search_path's tables). */
export async function columnTypes(client: pg.ClientBase): Promise<ColumnTypes> {
  const { rows } = await client.query<{ table: string; column: string; type: string }>(
    `select c.relname as "table", a.attname as "column", format_type(a.atttypid, a.atttypmod) as "type"
       from pg_attribute a join pg_class c on c.oid = a.attrelid
      where a.attrelid = any($1::regclass[]) and a.attnum > 0 and not a.attisdropped`,
    [WIRE_TABLES],
  );
  const types = Object.fromEntries(WIRE_TABLES.map((t) => [t, {}])) as ColumnTypes;
  for (const row of rows) types[row.table as WireTable][row.column] = row.type;
  return types;
}

/** The insert of `table`'s rows, each column an array parameter. */
function insertText(table: WireTable, types: ColumnTypes): string {
  const arrays = COLUMNS[table].map((column, i) => {
    const type = types[table][column];
    // A column missing from the catalog: the migrations did not run on this database.
    if (type === undefined) throw new Error(`the decision store's table ${table} has no column ${column}`);
    return `$${i + 1}::${type}[]`;
  });
  return `INSERT INTO ${table} (${COLUMNS[table].join(', ')}) SELECT * FROM unnest(${arrays.join(', ')}) ${ON_CONFLICT[table]}`;
}

const KEY_AT = Object.fromEntries(
  WIRE_TABLES.map((t) => [t, CONFLICT_KEYS[t].map((k) => (COLUMNS[t] as readonly string[]).indexOf(k))]),
) as Record<WireTable, number[]>;

/** `table`'s flat rows as one array per column, the last row of each key kept (in its first place). */
export function columnArrays(table: WireTable, values: readonly WireValue[]): WireValue[][] {
  const width = COLUMNS[table].length;
  const keyAt = KEY_AT[table];
  const last = new Map<string, number>();
  for (let i = 0; i < values.length; i += width) {
    let key = '';
    for (const k of keyAt) key += `${values[i + k]}\0`;
    last.set(key, i);
  }
  const columns: WireValue[][] = Array.from({ length: width }, () => []);
  for (const start of last.values()) {
    for (let c = 0; c < width; c++) columns[c]!.push(values[start + c]!);
  }
  return columns;
}

/** Stands for the array of decision ids in the compiled label updates. */
const IDS_PLACEHOLDER = '\u0000decision-ids';

/**
 * `currentLabelQueries` (decision-batch.ts, what `writeOps` runs) compiled for PostgreSQL once,
 * over one array parameter of ids: the label rules live in one place, and the thread names their
 * statements like its inserts.
 */
const LABEL_QUERIES = (() => {
  const cold = new Kysely<DecisionTables>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
  return currentLabelQueries(cold, { array: IDS_PLACEHOLDER }).map((query, n) => {
    const { sql, parameters } = query.compile();
    return { name: `riskgate_decision_label_${n}`, sql, parameters, at: parameters.indexOf(IDS_PLACEHOLDER) };
  });
})();

/**
 * Writes wire batches through `client` (connected, the store's tables migrated), each batch one
 * transaction. A failure rejects with node-postgres's error (its SQLSTATE `code`: a refused row is
 * told by it); after a server error the transaction is rolled back, after any other (the connection
 * lost, a timeout) the caller drops the connection.
 */
export function pgWireWriter(client: pg.ClientBase, types: ColumnTypes): (batch: WireBatch) => Promise<void> {
  const inserts = Object.fromEntries(
    WIRE_TABLES.map((t) => [t, { name: `riskgate_decision_insert_${t}`, text: insertText(t, types) }]),
  ) as Record<WireTable, { name: string; text: string }>;
  return async (batch) => {
    await client.query('BEGIN');
    try {
      for (const table of WIRE_TABLES) {
        if (batch[table].length === 0) continue;
        await client.query({ ...inserts[table], values: columnArrays(table, batch[table]) });
      }
      // The current label (the newest analyst label, else the outcomes'): set for each labelled
      // decision, and for a decision whose label arrived first (another worker, an earlier batch).
      const ids = [...labelledIds(batch)];
      for (const q of ids.length === 0 ? [] : LABEL_QUERIES) {
        const values = [...q.parameters];
        values[q.at] = ids;
        await client.query({ name: q.name, text: q.sql, values });
      }
      await client.query('COMMIT');
    } catch (error) {
      if (isServerError(error)) await client.query('ROLLBACK').catch(() => {});
      throw error;
    }
  };
}

/** Whether PostgreSQL itself answered with an error (a SQLSTATE): the connection still works. */
export function isServerError(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}
