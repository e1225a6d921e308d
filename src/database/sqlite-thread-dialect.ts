import { Worker } from 'node:worker_threads';
import {
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from 'kysely';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { LifecycleLog } from '../lifecycle/component.ts';
import { settlesWithin, withTimeout } from '../timing/with-timeout.ts';

/**
 * kysely's SQLite dialect with the connection on a worker thread. node:sqlite is synchronous: on
 * the main thread a count over a day of decisions held the event loop 92 ms, a rule report 80 ms,
 * and a write waiting on the decision store writer's lock up to the 5 s busy timeout, while every
 * /decide in flight waited. Here the main thread only compiles each query and posts it (sql and
 * parameters) to the thread that owns the connection; the thread runs it and posts the rows back.
 *
 * One connection, lent to one caller at a time (first come, first served): a kysely transaction
 * holds it from `begin` to `commit`, so no other query lands inside it. Every request and every
 * wait for the connection gives up after `timeoutMs` (RG_ERR_DATABASE_UNAVAILABLE); a thread that
 * dies fails what it was asked (logged) and is started again on the next query.
 */

/** One statement's answer: rows, or (a write) changes and the last rowid. */
export interface StatementResult {
  rows: unknown[];
  changes?: bigint | undefined;
  lastInsertRowid?: bigint | undefined;
}

export type QueryRequest =
  /** `begin`: a transaction's `begin`, run just before this, its first statement (see `ThreadConnection`). */
  | { id: number; type: 'query'; sql: string; parameters: readonly unknown[]; begin?: true }
  /** Statements run as one transaction in one message (see `scriptQuery`); `rows` of the reply: each one's result. */
  | { id: number; type: 'script'; statements: ReadonlyArray<{ sql: string; parameters: readonly unknown[] }> }
  | { id: number; type: 'close' };

export type QueryReply =
  | ({ id: number; ok: true } & StatementResult)
  | {
      id: number;
      ok: false;
      error: {
        message: string;
        code?: unknown;
        errcode?: unknown;
        errstr?: unknown;
        /** A script's statement that failed, from 0. */
        statement?: number;
      };
    };

export interface SqliteThreadOptions {
  /** The database file. */
  path: string;
  /** How long a write waits on another connection's lock (SQLite's busy timeout), ms. Default 5000. */
  busyTimeoutMs?: number;
  /** Page size of the file when the thread creates it, bytes (`openNodeSqlite`'s `pageSize`). Default SQLite's. */
  pageSize?: number;
  /** How long a query, or a wait for the connection, may take before it is given up, ms. Default 30000. */
  timeoutMs?: number;
  /** Where the thread's death is reported. Default: not reported (the queries it fails still are). */
  log?: LifecycleLog;
  /** Called with each thread started (tests end it to see what its death does). Default: none. */
  onThreadStart?: (worker: Worker) => void;
}

// Built to dist/ as .js beside this file; run from src/ (tsx, vitest) as .ts, by Node's own type stripping.
const THREAD_FILE = new URL(
  import.meta.url.endsWith('.ts') ? './sqlite-query-thread.ts' : './sqlite-query-thread.js',
  import.meta.url,
);

/** A request before the thread's client numbers it. */
type QueryBody = Omit<QueryRequest & { type: 'query' }, 'id'> | Omit<QueryRequest & { type: 'script' }, 'id'>;

type Waiter = { resolve: (reply: QueryReply & { ok: true }) => void; reject: (error: Error) => void };

/** The thread and the requests it has not answered yet. */
class QueryThread {
  readonly #options: SqliteThreadOptions;
  #worker: Worker | undefined;
  #nextId = 1;
  readonly #waiting = new Map<number, Waiter>();

  constructor(options: SqliteThreadOptions) {
    this.#options = options;
  }

  /**
   * Runs a query (or a script) on the thread; rejects on SQLite's error, the thread's death or the
   * timeout. A statement given up on by the timeout may still end on the thread (a native call
   * cannot be interrupted): a script that commits late has committed, as a `commit` given up on would.
   */
  run(request: QueryBody): Promise<QueryReply & { ok: true }> {
    const timeoutMs = this.#options.timeoutMs ?? 30_000;
    return withTimeout(this.#ask(request), {
      timeoutMs,
      // A late answer is dropped (its id is forgotten); the thread goes on with the next request.
      onTimeout: () =>
        new RiskgateError(
          ErrorCode.DATABASE_UNAVAILABLE,
          `the SQLite query took longer than ${timeoutMs} ms`,
        ),
    });
  }

  /**
   * Closes the connection and ends the thread: ended outright if it does not answer in 2 s (a
   * query still running), and given up on 2 s later (a native SQLite call cannot be interrupted;
   * the thread no longer holds the process open and ends with it).
   */
  async close(): Promise<void> {
    const w = this.#worker;
    if (w === undefined) return;
    const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
    if (
      !(await settlesWithin(
        this.#ask({ type: 'close' }).catch(() => {}),
        2000,
        { ref: false },
      ))
    ) {
      void w.terminate();
    }
    // Held until it exits (a script awaiting close must not end first), for at most 2 s.
    w.ref();
    await settlesWithin(exited, 2000, { ref: false });
    w.unref();
  }

  #ask(request: QueryBody | { type: 'close' }): Promise<QueryReply & { ok: true }> {
    this.#worker ??= this.#start();
    const worker = this.#worker;
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      // Held while a request waits: a script awaiting a query must not exit under it.
      worker.ref();
      worker.postMessage({ ...request, id });
    });
  }

  #settle(reply: QueryReply): void {
    const waiter = this.#waiting.get(reply.id);
    if (waiter === undefined) return;
    this.#waiting.delete(reply.id);
    if (this.#waiting.size === 0) this.#worker?.unref();
    if (reply.ok) waiter.resolve(reply);
    else waiter.reject(Object.assign(new Error(reply.error.message), reply.error));
  }

  #start(): Worker {
    const { path, busyTimeoutMs = 5000, pageSize } = this.#options;
    const w = new Worker(THREAD_FILE, { workerData: { path, busyTimeoutMs, pageSize } });
    w.unref();
    w.on('message', (reply: QueryReply) => this.#settle(reply));
    w.on('error', (error) => this.#died(w, `the SQLite thread failed: ${error.message}`));
    w.on('exit', (code) => this.#died(w, `the SQLite thread exited (code ${code})`));
    this.#options.onThreadStart?.(w);
    return w;
  }

  #died(w: Worker, message: string): void {
    if (this.#worker !== w) return;
    this.#worker = undefined;
    const pending = [...this.#waiting.values()];
    this.#waiting.clear();
    // A close asked for ends the thread too: only a death with queries unanswered is news.
    if (pending.length > 0) this.#options.log?.({ level: 'error', msg: message, pending: pending.length });
    const error = new RiskgateError(ErrorCode.DATABASE_UNAVAILABLE, message);
    for (const waiter of pending) waiter.reject(error);
  }
}

/** A first-come-first-served lock whose waits give up after `timeoutMs`. */
class FifoMutex {
  #held = false;
  readonly #queue: Array<() => void> = [];

  async lock(timeoutMs: number): Promise<void> {
    if (!this.#held) {
      this.#held = true;
      return;
    }
    let granted: () => void = () => {};
    const turn = new Promise<void>((resolve) => {
      granted = resolve;
      this.#queue.push(resolve);
    });
    await withTimeout(turn, {
      timeoutMs,
      onTimeout: () => {
        const at = this.#queue.indexOf(granted);
        // Granted meanwhile (the same turn of the loop): hand the lock on rather than keep it.
        if (at === -1) this.unlock();
        else this.#queue.splice(at, 1);
        return new RiskgateError(
          ErrorCode.DATABASE_UNAVAILABLE,
          `the SQLite connection stayed busy longer than ${timeoutMs} ms`,
        );
      },
    });
  }

  unlock(): void {
    const next = this.#queue.shift();
    if (next === undefined) this.#held = false;
    else next();
  }
}

/** Marks a `CompiledQuery` made by `scriptQuery`: its statements, run as one transaction. */
const SCRIPT = Symbol('riskgate.sqliteScript');

type ScriptQuery = CompiledQuery<StatementResult> & { [SCRIPT]: readonly CompiledQuery[] };

/**
 * `statements` as one query that runs them as one transaction, in order, in one message to the
 * thread (`begin`, each, `commit`), for a caller that has all of a transaction's statements up
 * front and needs no answer between them (the outbox's group commit). Each statement's result is a
 * row of the answer. It goes through kysely (`db.executeQuery`) as any query does, so it waits
 * for the connection, passes a `GatedDialect`'s gate and reports its error there. A statement that
 * fails rolls the whole script back on the thread; the error is SQLite's, with the failing
 * statement's index (`statement`). Only this dialect runs it, and never inside a transaction.
 */
export function scriptQuery(statements: readonly CompiledQuery[]): CompiledQuery<StatementResult> {
  const query: ScriptQuery = { ...CompiledQuery.raw('-- a script of statements'), [SCRIPT]: statements };
  return query;
}

/** `statements` run by `scriptQuery` on `db` (on this dialect); each one's result, in order. */
export async function runScript(
  // biome-ignore lint/suspicious/noExplicitAny: any schema.
  db: Kysely<any>,
  statements: readonly CompiledQuery[],
): Promise<QueryResult<unknown>[]> {
  const { rows } = await db.executeQuery(scriptQuery(statements));
  return rows.map((r) => ({ rows: r.rows, numAffectedRows: r.changes, insertId: r.lastInsertRowid }));
}

/**
 * The one connection. A transaction's `begin` is not sent alone: it travels with the
 * transaction's first statement (one message, one wake-up of the thread, fewer), which is safe
 * because nothing can come between them either way: the connection is lent to the transaction
 * from `begin` to `commit` (the driver's mutex), and the thread runs `begin` and the statement one
 * after the other in one turn, as it would have run the two messages. A `begin` that fails fails
 * that first statement (kysely then rolls back: a no-op with no transaction open, see
 * node-sqlite-database.ts); a transaction that ran no statement sends nothing at all.
 */
class ThreadConnection implements DatabaseConnection {
  readonly #thread: QueryThread;
  #beginPending = false;

  constructor(thread: QueryThread) {
    this.#thread = thread;
  }

  /** A transaction begins: its `begin` goes with its first statement. */
  deferBegin(): void {
    this.#beginPending = true;
  }

  /** The transaction ends: whether its `begin` reached the thread (a `commit` or `rollback` is due). */
  endTransaction(): boolean {
    const begun = !this.#beginPending;
    this.#beginPending = false;
    return begun;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const script = (compiledQuery as Partial<ScriptQuery>)[SCRIPT];
    if (script !== undefined) {
      // Its own transaction: inside another one its `begin` would fail.
      if (this.#beginPending) throw new Error('a script is a transaction of its own, not a statement of one');
      const reply = await this.#thread.run({
        type: 'script',
        statements: script.map((q) => ({ sql: q.sql, parameters: q.parameters })),
      });
      return { rows: reply.rows as R[] };
    }
    const begin = this.#beginPending;
    this.#beginPending = false;
    const reply = await this.#thread.run({
      type: 'query',
      sql: compiledQuery.sql,
      parameters: compiledQuery.parameters,
      ...(begin && { begin: true as const }),
    });
    return {
      rows: reply.rows as R[],
      numAffectedRows: reply.changes,
      insertId: reply.lastInsertRowid,
    };
  }

  // The rows come back in one message: a stream of them is the whole answer, row by row.
  async *streamQuery<R>(compiledQuery: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    const { rows } = await this.executeQuery<R>(compiledQuery);
    for (const row of rows) yield { rows: [row] };
  }
}

class SqliteThreadDriver implements Driver {
  readonly #thread: QueryThread;
  readonly #connection: ThreadConnection;
  readonly #mutex = new FifoMutex();
  readonly #timeoutMs: number;

  constructor(options: SqliteThreadOptions) {
    this.#thread = new QueryThread(options);
    this.#connection = new ThreadConnection(this.#thread);
    this.#timeoutMs = options.timeoutMs ?? 30_000;
  }

  async init(): Promise<void> {
    // Starts the thread and opens the file now: a path that cannot be opened fails here.
    await this.#connection.executeQuery(CompiledQuery.raw('select 1'));
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.#mutex.lock(this.#timeoutMs);
    return this.#connection;
  }

  async releaseConnection(): Promise<void> {
    // kysely ends every transaction it began; should one not be, its unsent `begin` is not carried
    // to the next borrower's first statement.
    this.#connection.endTransaction();
    this.#mutex.unlock();
  }

  // Sent with the transaction's first statement (`ThreadConnection` says why that is safe).
  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    (connection as ThreadConnection).deferBegin();
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    if ((connection as ThreadConnection).endTransaction())
      await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if ((connection as ThreadConnection).endTransaction())
      await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async destroy(): Promise<void> {
    await this.#thread.close();
  }
}

/**
 * SQLite's adapter, but telling kysely not to serialize connections itself: its own lock (for
 * adapters of one connection) waits without end; the driver's `FifoMutex` does the same lending,
 * and gives up after `timeoutMs`. The flag means nothing else to kysely.
 */
class LendingSqliteAdapter extends SqliteAdapter {
  override get supportsMultipleConnections(): boolean {
    return true;
  }
}

/** kysely's SQLite dialect (adapter, compiler, introspector) over a connection on a worker thread. */
export class SqliteThreadDialect implements Dialect {
  readonly #options: SqliteThreadOptions;

  constructor(options: SqliteThreadOptions) {
    this.#options = options;
  }

  createDriver(): Driver {
    return new SqliteThreadDriver(this.#options);
  }

  createQueryCompiler(): QueryCompiler {
    return new SqliteQueryCompiler();
  }

  createAdapter(): DialectAdapter {
    return new LendingSqliteAdapter();
  }

  // biome-ignore lint/suspicious/noExplicitAny: kysely's Dialect interface takes any schema.
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new SqliteIntrospector(db);
  }
}
