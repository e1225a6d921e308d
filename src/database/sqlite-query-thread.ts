import { parentPort, workerData } from 'node:worker_threads';
import { openNodeSqlite } from './node-sqlite-database.ts';
import type { QueryReply, QueryRequest } from './sqlite-thread-dialect.ts';

/**
 * The thread that owns the embedded database's connection (src/database/sqlite-thread-dialect.ts
 * says why): it runs each compiled query it is sent, one at a time, in the order sent, and answers
 * what kysely's own SQLite driver would have (rows, or changes and the last rowid).
 */

const { path, busyTimeoutMs } = workerData as { path: string; busyTimeoutMs: number };
// Opened at start: a file that cannot be opened ends the thread with that error, failing `init`.
const db = openNodeSqlite(path, { busyTimeoutMs });

function answer(request: QueryRequest): QueryReply {
  try {
    if (request.type === 'close') {
      db.close();
      return { id: request.id, ok: true, rows: [] };
    }
    const statement = db.prepare(request.sql);
    if (statement.reader) return { id: request.id, ok: true, rows: [...statement.all(request.parameters)] };
    const { changes, lastInsertRowid } = statement.run(request.parameters);
    return {
      id: request.id,
      ok: true,
      rows: [],
      changes: changes === undefined ? undefined : BigInt(changes),
      lastInsertRowid: lastInsertRowid === undefined ? undefined : BigInt(lastInsertRowid),
    };
  } catch (error) {
    const e = error as Error & { code?: unknown; errcode?: unknown; errstr?: unknown };
    // SQLite's own fields (a constraint's errcode) cross too: a caller may tell errors apart by them.
    return {
      id: request.id,
      ok: false,
      error: { message: e.message ?? String(error), code: e.code, errcode: e.errcode, errstr: e.errstr },
    };
  }
}

// Synchronous, so one request at a time, in order: a transaction's statements stay in sequence.
parentPort!.on('message', (request: QueryRequest) => {
  parentPort!.postMessage(answer(request));
  if (request.type === 'close') parentPort!.close();
});
