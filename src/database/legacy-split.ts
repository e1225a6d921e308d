import { existsSync, renameSync, rmSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { type FeatureMigrations, openDatabase } from './database.ts';
import { type StateFiles, setAside } from './state-files.ts';

/**
 * The upgrade from the single `riskgate.sqlite` of earlier versions (docs/operations.md, "State
 * files"): on the first start that finds it and no `control.sqlite`, the control tables (every
 * table `controlMigrations` makes: lists, lock-outs, the audit trail, ...) are copied into a new
 * control file, which takes its name only once complete; then the old file is renamed aside
 * (`riskgate.sqlite.pre-split-<ts>`, with its -wal). Its decisions are not copied (observations,
 * possibly a gigabyte: a start is not held up for them); they stay in the renamed file, readable
 * with `sqlite3`. A file that cannot be read stays where it is, and the error says why.
 *
 * Returns the rows copied per table and where the old file went.
 */
export async function splitLegacyFile(
  files: StateFiles,
  controlMigrations: FeatureMigrations,
  nowMs = Date.now(),
): Promise<{ copied: Record<string, number>; setAsideAs: string }> {
  const building = `${files.control}.upgrading`;
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${building}${suffix}`, { force: true });
  // The control tables as this version makes them, in a file of their own.
  const fresh = await openDatabase({ kind: 'sqlite', path: building }, { migrations: controlMigrations });
  await fresh.close();
  const copied: Record<string, number> = {};
  const db = new DatabaseSync(building);
  try {
    db.prepare('attach database ? as legacy').run(files.legacy);
    const tables = db
      .prepare(
        `select name from main.sqlite_master where type = 'table'
         and name not like 'sqlite_%' and name not like 'riskgate_migration%' order by name`,
      )
      .all()
      .map((r) => String(r.name));
    db.exec('begin');
    for (const table of tables) {
      const present = db
        .prepare(`select 1 as one from legacy.sqlite_master where type = 'table' and name = ?`)
        .get(table);
      if (present === undefined) continue;
      const theirs = new Set(columnsOf(db, 'legacy', table));
      const shared = columnsOf(db, 'main', table).filter((c) => theirs.has(c));
      const list = shared.map((c) => `"${c}"`).join(', ');
      const r = db
        .prepare(`insert or replace into main."${table}" (${list}) select ${list} from legacy."${table}"`)
        .run();
      copied[table] = Number(r.changes);
    }
    db.exec('commit');
    db.exec('detach database legacy');
  } finally {
    db.close();
  }
  renameSync(building, files.control);
  for (const suffix of ['-wal', '-shm']) {
    if (existsSync(`${building}${suffix}`)) renameSync(`${building}${suffix}`, `${files.control}${suffix}`);
  }
  return { copied, setAsideAs: setAside(files.legacy, 'pre-split', nowMs) };
}

function columnsOf(db: DatabaseSync, schema: string, table: string): string[] {
  return db
    .prepare(`select name from pragma_table_info(?, ?)`)
    .all(table, schema)
    .map((r) => String(r.name));
}
