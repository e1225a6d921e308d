import { parentPort, workerData } from 'node:worker_threads';
import type { SqliteStatement } from 'kysely';
import { LRUCache } from 'lru-cache';
import { openNodeSqlite } from './node-sqlite-database.ts';
import type { QueryReply, QueryRequest, StatementResult } from './sqlite-thread-dialect.ts';

/**
 * The thread that owns the embedded database's connection (src/database/sqlite-thread-dialect.ts
 * says why): it runs each compiled query it is sent, one at a time, in the order sent, and answers
 * what kysely's own SQLite driver would have (rows, or changes and the last rowid).
 */

const { path, busyTimeoutMs, pageSize } = workerData as {
  path: string;
  busyTimeoutMs: number;
  pageSize?: number;
};
// Opened at start: a file that cannot be opened ends the thread with that error, failing `init`.
const db = openNodeSqlite(path, { busyTimeoutMs, ...(pageSize !== undefined && { pageSize }) });

/**
 * Prepared statements by their SQL text (issue 32: each request prepared its statement afresh,
 * the outbox's claim with its subqueries on every poll, on the thread's share of the one core
 * riskgate gets; bench/RESULTS.md has the cost). kysely compiles the same text for the
 * same query shape, so a few dozen texts cover the hot path; the bound keeps the odd ones (an
 * `IN` list of every length) from growing without end. A statement stays valid across schema
 * changes: SQLite prepares it again at its next run by itself (`sqlite3_prepare_v2`'s statements),
 * and when that fails (its table dropped) the run fails with SQLite's error, as a fresh prepare
 * would have (test/sqlite-thread-dialect.test.ts).
 */
const STATEMENTS_CACHED = 256;
const statements = new LRUCache<string, SqliteStatement>({ max: STATEMENTS_CACHED });

function prepared(sql: string): SqliteStatement {
  let statement = statements.get(sql);
  if (statement === undefined) {
    statement = db.prepare(sql);
    statements.set(sql, statement);
  }
  return statement;
}

function run(sql: string, parameters: readonly unknown[]): StatementResult {
  const statement = prepared(sql);
  try {
    if (statement.reader) return { rows: [...statement.all(parameters)] };
    const { changes, lastInsertRowid } = statement.run(parameters);
    return {
      rows: [],
      changes: changes === undefined ? undefined : BigInt(changes),
      lastInsertRowid: lastInsertRowid === undefined ? undefined : BigInt(lastInsertRowid),
    };
  } catch (error) {
    // Prepared afresh next time, as every statement was before the cache: whatever state a
    // failure leaves a statement in is never served again.
    statements.delete(sql);
    throw error;
  }
}

/**
 * A script: its statements as one transaction, in order, in this one turn of the thread. Nothing
 * else runs on the connection meanwhile (the thread takes one request at a time, and the driver
 * lends the connection to one caller at a time), so it is the transaction kysely would have run
 * in 2 + N round trips. A statement that fails rolls back what the script did (and a commit that
 * fails too); the error says which statement it was (`statement`, from 0).
 */
function runScript(
  script: ReadonlyArray<{ sql: string; parameters: readonly unknown[] }>,
): StatementResult[] {
  run('begin', []);
  const results: StatementResult[] = [];
  let at = 0;
  try {
    for (; at < script.length; at++) results.push(run(script[at]!.sql, script[at]!.parameters));
    run('commit', []);
    return results;
  } catch (error) {
    try {
      // A no-op when SQLite has already rolled back by itself (a full disk): node-sqlite-database.ts.
      run('rollback', []);
    } catch {
      // The statement's error says why; a failed rollback must not hide it.
    }
    throw Object.assign(error as Error, { statement: at });
  }
}

function answer(request: QueryRequest): QueryReply {
  try {
    if (request.type === 'close') {
      statements.clear();
      db.close();
      return { id: request.id, ok: true, rows: [] };
    }
    if (request.type === 'script') return { id: request.id, ok: true, rows: runScript(request.statements) };
    // A transaction's `begin`, deferred by the driver to travel with its first statement.
    if (request.begin === true) run('begin', []);
    return { id: request.id, ok: true, ...run(request.sql, request.parameters) };
  } catch (error) {
    const e = error as Error & { code?: unknown; errcode?: unknown; errstr?: unknown; statement?: number };
    // SQLite's own fields (a constraint's errcode) cross too: a caller may tell errors apart by them.
    return {
      id: request.id,
      ok: false,
      error: {
        message: e.message ?? String(error),
        code: e.code,
        errcode: e.errcode,
        errstr: e.errstr,
        ...(e.statement !== undefined && { statement: e.statement }),
      },
    };
  }
}

// Synchronous, so one request at a time, in order: a transaction's statements stay in sequence.
parentPort!.on('message', (request: QueryRequest) => {
  parentPort!.postMessage(answer(request));
  if (request.type === 'close') parentPort!.close();
});
