import { DatabaseSync } from 'node:sqlite';
import { Kysely, SqliteDialect } from 'kysely';
import { openNodeSqlite } from '../database/node-sqlite-database.ts';
import { DECISIONS_PAGE_SIZE, DECISIONS_WAL_BYTES } from '../database/state-files.ts';
import type { DecisionDb } from './decision-batch.ts';

/**
 * Page cache of the SQLite writer's batch connection, KiB (`PRAGMA cache_size`; SQLite's default
 * is 2,000 KiB, 125 of the file's 16 KiB pages). A batch of a second touches about a leaf a row in
 * each index on a random key (user, account, IP, unit, the decision id: bench/RESULTS.md "the
 * decisions file's checkpoints"), far more pages than the default holds, so every batch read them
 * back from the file and the WAL, and a large batch spilled dirty pages to the WAL before its
 * commit. With 64 MiB the pages stay between batches: the writes' CPU per decision over 100,000
 * stored ~155 → ~105 µs in batches of 200, ~125 → ~75 in batches of 1,000 (bench/RESULTS.md,
 * "the decision store's writer thread per stored decision"). The price: up to this much more
 * memory, reached as the store grows (SQLite allocates its cache as pages are read).
 */
export const DECISIONS_WRITER_CACHE_KIB = 64 * 1024;

/**
 * The writer thread's two connections to the decisions file (sqlite-store-thread.ts): `writer`
 * for the batches, on prepared statements of its own (sqlite-batch-wire.ts says why), and
 * `pruner` for retention (once a minute) in kysely's builder. Its page size too, should this
 * thread be the one to make the file (one deleted under it).
 */
export function openWriterConnections(
  path: string,
  busyTimeoutMs: number,
): { writer: DatabaseSync; db: DecisionDb } {
  const pruner = openNodeSqlite(path, { busyTimeoutMs, pageSize: DECISIONS_PAGE_SIZE });
  const db: DecisionDb = new Kysely({ dialect: new SqliteDialect({ database: pruner }) });
  const writer = new DatabaseSync(path, { timeout: busyTimeoutMs });
  writer.exec('PRAGMA synchronous = NORMAL');
  writer.exec(`PRAGMA cache_size = -${DECISIONS_WRITER_CACHE_KIB}`);
  // Both connections commit, and whichever commits past the bound checkpoints: the same bound on
  // each (state-files.ts says why), in pages of this file's size (a file made before: 4 KiB).
  const walPages = Math.ceil(
    DECISIONS_WAL_BYTES / Number(writer.prepare('PRAGMA page_size').get()!.page_size),
  );
  for (const pragma of [`wal_autocheckpoint = ${walPages}`, `journal_size_limit = ${DECISIONS_WAL_BYTES}`]) {
    writer.exec(`PRAGMA ${pragma}`);
    pruner.prepare(`PRAGMA ${pragma}`).run([]);
  }
  return { writer, db };
}
