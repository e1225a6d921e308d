import { parentPort, workerData } from 'node:worker_threads';
import { Kysely, SqliteDialect } from 'kysely';
import { openNodeSqlite } from '../database/node-sqlite-database.ts';
import { type DecisionDb, pruneStep, writeOps } from './decision-batch.ts';
import type { ThreadReply, ThreadRequest } from './sqlite-thread-sink.ts';

/**
 * The decision store's SQLite writer thread (src/decision-store/sqlite-thread-sink.ts says why):
 * its own connection to the file the main thread migrated and reads, one request at a time.
 */

const { path, busyTimeoutMs } = workerData as { path: string; busyTimeoutMs: number };
const db: DecisionDb = new Kysely({
  dialect: new SqliteDialect({ database: openNodeSqlite(path, { busyTimeoutMs }) }),
});

async function answer(request: ThreadRequest): Promise<ThreadReply> {
  try {
    switch (request.type) {
      case 'write':
        await writeOps(db, request.ops);
        return { id: request.id, ok: true, value: 0 };
      case 'prune':
        return { id: request.id, ok: true, value: await pruneStep(db, request.retention, request.nowMs) };
      case 'close':
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
