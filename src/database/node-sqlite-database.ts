import { DatabaseSync } from 'node:sqlite';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

/**
 * kysely's SQLite dialect over node:sqlite (Node's own SQLite, as the outbox uses): kysely expects
 * better-sqlite3's statement shape (`reader`, array parameters), which node:sqlite's `StatementSync`
 * has under other names. Calls are synchronous, as in better-sqlite3: the callers batch them.
 */

type SqliteValue = null | number | bigint | string | Uint8Array;

/** kysely hands booleans and dates through untouched; node:sqlite binds neither. */
function bindable(value: unknown): SqliteValue {
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (value instanceof Date) return value.toISOString();
  if (value === undefined) return null;
  return value as SqliteValue;
}

/**
 * Switches a file to WAL. Connections opening one fresh file together each hold a read lock and
 * want the write lock to convert it; SQLite answers one of them "database is locked" at once,
 * without the busy handler, since waiting there could deadlock (a worker lost a start to it under
 * load). That attempt is retried after a short pause, bounded by the busy timeout. Only ever
 * called on a database thread (sqlite-query-thread.ts, the decision store's), so the pause blocks
 * no event loop.
 */
function enterWalMode(db: DatabaseSync, busyTimeoutMs: number): void {
  const until = performance.now() + busyTimeoutMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let attempt = 1; ; attempt++) {
    try {
      db.exec('PRAGMA journal_mode = WAL');
      return;
    } catch (error) {
      if (!/database is locked/i.test((error as Error).message) || performance.now() > until) throw error;
      Atomics.wait(pause, 0, 0, Math.min(50, attempt * 5));
    }
  }
}

export interface NodeSqliteOptions {
  /** How long a write waits on another connection's lock (SQLite's busy timeout), ms. Default 5000. */
  busyTimeoutMs?: number;
  /**
   * Page size of a file this open creates, bytes (a power of two, 512 to 65536). A file that
   * already has pages keeps its own: SQLite fixes the size with the first page written (in WAL
   * mode only a VACUUM outside WAL changes it). Default: SQLite's (4096).
   */
  pageSize?: number;
}

/** Opens `path` (`:memory:` for a process-private database) for kysely's `SqliteDialect`. */
export function openNodeSqlite(path: string, options: NodeSqliteOptions = {}): SqliteDatabase {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  const db = new DatabaseSync(path, { timeout: busyTimeoutMs });
  // Before WAL mode: entering it writes the first page of a fresh file, and with it the size.
  if (options.pageSize !== undefined) db.exec(`PRAGMA page_size = ${Math.trunc(options.pageSize)}`);
  if (path !== ':memory:') enterWalMode(db, busyTimeoutMs);
  db.exec('PRAGMA synchronous = NORMAL');
  return {
    close: () => db.close(),
    prepare(sql: string): SqliteStatement {
      const statement = db.prepare(sql);
      const reader = statement.columns().length > 0;
      const rollback = /^\s*rollback\s*$/i.test(sql);
      return {
        reader,
        all: (parameters) => statement.all(...parameters.map(bindable)),
        run: (parameters) => {
          try {
            const r = statement.run(...parameters.map(bindable));
            return { changes: r.changes, lastInsertRowid: r.lastInsertRowid };
          } catch (error) {
            // SQLite rolls a transaction back by itself on some errors (SQLITE_FULL, SQLITE_IOERR):
            // kysely's rollback after them would fail with "no transaction is active" and its
            // error would replace the one that says why (a full disk). Nothing is left to undo.
            if (rollback && !db.isTransaction) return { changes: 0, lastInsertRowid: 0 };
            throw error;
          }
        },
        iterate: (parameters) => statement.iterate(...parameters.map(bindable)),
      };
    },
  };
}
