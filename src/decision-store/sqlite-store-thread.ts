import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';
import { Kysely, SqliteDialect } from 'kysely';
import { openNodeSqlite } from '../database/node-sqlite-database.ts';
import { DECISIONS_PAGE_SIZE, DECISIONS_WAL_BYTES } from '../database/state-files.ts';
import { type DecisionDb, pruneStep } from './decision-batch.ts';
import { wireWriter } from './sqlite-batch-wire.ts';
import type { ThreadReply, ThreadRequest } from './store-thread.ts';

/**
 * The decision store's SQLite writer thread (src/decision-store/sqlite-thread-sink.ts says why):
 * its own connection to the file the main thread migrated and reads, one request at a time.
 */

const { path, busyTimeoutMs } = workerData as { path: string; busyTimeoutMs: number };
// Retention (once a minute) in kysely's builder; the writes on prepared statements of their own
// connection (sqlite-batch-wire.ts says why). Requests run one at a time: never both at once.
// Its page size too, should this thread be the one to make the file (one deleted under it).
const pruner = openNodeSqlite(path, { busyTimeoutMs, pageSize: DECISIONS_PAGE_SIZE });
const db: DecisionDb = new Kysely({ dialect: new SqliteDialect({ database: pruner }) });
const writer = new DatabaseSync(path, { timeout: busyTimeoutMs });
writer.exec('PRAGMA synchronous = NORMAL');
// Both connections commit, and whichever commits past the bound checkpoints: the same bound on
// each (state-files.ts says why), in pages of this file's size (a file made before: 4 KiB).
const walPages = Math.ceil(DECISIONS_WAL_BYTES / Number(writer.prepare('PRAGMA page_size').get()!.page_size));
for (const pragma of [`wal_autocheckpoint = ${walPages}`, `journal_size_limit = ${DECISIONS_WAL_BYTES}`]) {
  writer.exec(`PRAGMA ${pragma}`);
  pruner.prepare(`PRAGMA ${pragma}`).run([]);
}
const write = wireWriter(writer);

async function answer(request: ThreadRequest): Promise<ThreadReply> {
  try {
    switch (request.type) {
      case 'write':
        write(request.batch);
        return { id: request.id, ok: true, value: 0 };
      case 'prune':
        return { id: request.id, ok: true, value: await pruneStep(db, request.retention, request.nowMs) };
      case 'close':
        writer.close();
        await db.destroy();
        return { id: request.id, ok: true, value: 0 };
    }
  } catch (error) {
    const errcode = (error as { errcode?: unknown }).errcode;
    return {
      id: request.id,
      ok: false,
      error: error instanceof Error ? error.message : String(error),
      errcode: typeof errcode === 'number' ? errcode : undefined,
    };
  }
}

// One at a time, in order: a write never interleaves with another on this connection.
let chain = Promise.resolve();
parentPort!.on('message', (request: ThreadRequest) => {
  chain = chain.then(async () => {
    parentPort!.postMessage(await answer(request));
    if (request.type === 'close') parentPort!.close();
  });
});
