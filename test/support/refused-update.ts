import { sql } from 'kysely';
import type { RiskgateDatabase } from '../../src/database/database.ts';

/**
 * A trigger (named `name`) refusing any update that sets `table.column` to `value`: a write the
 * database refuses mid-transaction, on SQLite and on PostgreSQL (a lease to one owner, a record's
 * status), until `allowUpdate` drops it.
 */
export async function refuseUpdate(
  database: RiskgateDatabase,
  refusal: { name: string; table: string; column: string; value: string },
): Promise<void> {
  const { name, table, column, value } = refusal;
  const [trigger, onTable, onColumn] = [sql.id(name), sql.id(table), sql.id(column)];
  if (database.engine === 'sqlite') {
    await sql`CREATE TRIGGER ${trigger} BEFORE UPDATE OF ${onColumn} ON ${onTable}
      WHEN NEW.${onColumn} = ${sql.lit(value)} BEGIN SELECT RAISE(ABORT, ${sql.lit(`${name}: refused`)}); END`.execute(
      database.db,
    );
    return;
  }
  await sql`CREATE OR REPLACE FUNCTION ${trigger}() RETURNS trigger AS $$
    BEGIN IF NEW.${onColumn} = ${sql.lit(value)} THEN RAISE EXCEPTION ${sql.lit(`${name}: refused`)}; END IF; RETURN NEW; END
    $$ LANGUAGE plpgsql`.execute(database.db);
  await sql`CREATE TRIGGER ${trigger} BEFORE UPDATE OF ${onColumn} ON ${onTable}
    FOR EACH ROW EXECUTE FUNCTION ${trigger}()`.execute(database.db);
}

/** Drops `refuseUpdate`'s trigger `name` on `table` (none: nothing). */
export async function allowUpdate(database: RiskgateDatabase, name: string, table: string): Promise<void> {
  const on = database.engine === 'postgres' ? sql` ON ${sql.id(table)}` : sql``;
  await sql`DROP TRIGGER IF EXISTS ${sql.id(name)}${on}`.execute(database.db);
}
