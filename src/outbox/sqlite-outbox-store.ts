import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { type ActionSpec, parseStoredSpec } from '../actions/admin-actions.ts';
import {
  type ClaimOptions,
  dueAtMs,
  type OutboxEntry,
  type OutboxListFilter,
  type OutboxStats,
  type OutboxStatus,
  type OutboxStore,
  WEBHOOK_ACTION_TYPE,
} from './outbox-store.ts';

/**
 * The embedded outbox: one SQLite file (node:sqlite) under RISKGATE_STATE_DIR, in WAL mode.
 *
 * Durability: a commit is written to the WAL before `append` resolves. With `sync: 'normal'` (the
 * default) that write reaches the kernel, so it survives the process dying at any instant (SIGKILL,
 * OOM, a crash); a power loss may lose the last commits. `sync: 'full'` also fsyncs every commit,
 * which survives a power loss at the price of the fsync on the event loop (node:sqlite is
 * synchronous; bench/RESULTS.md has the cost). Appends in one event-loop turn share one
 * transaction (group commit). Several processes may share the file (RISKGATE_WORKERS): leases
 * keep each entry with one of them at a time.
 */

export interface SqliteOutboxStoreOptions {
  path: string;
  /** `normal` (default): survives a process crash; `full`: also a power loss (an fsync per commit). */
  sync?: 'normal' | 'full';
}

/** The claim's statement; `filter` narrows the entries it may take (`skipWebhooks`). */
function claimSql(filter: string): string {
  return `UPDATE outbox SET lease_owner = :owner, lease_until = :until, attempts = attempts + 1, updated_at = :now
        WHERE seq IN (
          SELECT o.seq FROM outbox o
          WHERE o.status = 'pending' AND o.next_attempt_at <= :now AND o.lease_until <= :now ${filter}
            AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.ordering_key = o.ordering_key
                            AND e.status = 'pending' AND e.seq < o.seq)
          ORDER BY o.seq LIMIT :limit)
        RETURNING *`;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS outbox (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  ordering_key TEXT NOT NULL,
  spec TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending',
  attempts INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  horizon_start INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  lease_owner TEXT,
  lease_until INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  reason TEXT,
  logged INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS outbox_ordering ON outbox (ordering_key, status, seq);
`;

interface Row {
  seq: number;
  id: string;
  spec: string;
  status: string;
  attempts: number;
  created_at: number;
  horizon_start: number;
  next_attempt_at: number;
  updated_at: number;
  last_error: string | null;
  reason: string | null;
  lease_owner: string | null;
}

function entryOf(row: Row): OutboxEntry {
  return {
    // Written by this code, but a file on disk is a boundary: checked, cheaply (the claim path is hot).
    spec: parseStoredSpec(row.spec),
    status: row.status as OutboxStatus,
    attempts: row.attempts,
    createdAtMs: row.created_at,
    horizonStartMs: row.horizon_start,
    nextAttemptAtMs: row.next_attempt_at,
    updatedAtMs: row.updated_at,
    lastError: row.last_error ?? undefined,
    reason: row.reason ?? undefined,
    owner: row.lease_owner ?? undefined,
  };
}

export class SqliteOutboxStore implements OutboxStore {
  readonly durable = true;
  readonly #db: DatabaseSync;
  readonly #s: Record<string, StatementSync>;
  #batch: {
    specs: readonly ActionSpec[];
    nowMs: number;
    resolve: (r: boolean[]) => void;
    reject: (e: unknown) => void;
  }[] = [];
  #scheduled = false;
  #closed = false;

  constructor(options: SqliteOutboxStoreOptions) {
    // Private like the development keys beside it: the directory 700, a new file 600 (SQLite gives
    // its -wal and -shm files the database file's mode; it would create the file 644 itself).
    mkdirSync(dirname(options.path), { recursive: true, mode: 0o700 });
    closeSync(openSync(options.path, 'a', 0o600));
    this.#db = new DatabaseSync(options.path);
    // A writer holding the lock (another worker) is waited for briefly; transactions are tiny.
    this.#db.exec(`PRAGMA busy_timeout = 1000; PRAGMA journal_mode = WAL;
      PRAGMA synchronous = ${options.sync === 'full' ? 'FULL' : 'NORMAL'};`);
    this.#db.exec(SCHEMA);
    // Files from before a column existed get it (with the default the schema gives it).
    const columns = new Set(
      (this.#db.prepare('PRAGMA table_info(outbox)').all() as { name: string }[]).map((c) => c.name),
    );
    if (!columns.has('logged'))
      this.#db.exec('ALTER TABLE outbox ADD COLUMN logged INTEGER NOT NULL DEFAULT 1');
    this.#db.exec('CREATE INDEX IF NOT EXISTS outbox_unlogged ON outbox (logged, updated_at)');
    const p = (sql: string) => this.#db.prepare(sql);
    this.#s = {
      insert:
        p(`INSERT OR IGNORE INTO outbox (id, ordering_key, spec, created_at, horizon_start, next_attempt_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)`),
      claim: p(claimSql('')),
      claimActions: p(claimSql(`AND json_extract(o.spec, '$.type') <> '${WEBHOOK_ACTION_TYPE}'`)),
      complete: p(`UPDATE outbox SET status = 'delivered', lease_until = 0, logged = 0, updated_at = ?
        WHERE id = ? AND lease_owner = ? AND status = 'pending'`),
      retryLater:
        p(`UPDATE outbox SET lease_owner = NULL, lease_until = 0, next_attempt_at = ?, last_error = ?,
          attempts = attempts - ?, updated_at = ?
        WHERE id = ? AND lease_owner = ? AND status = 'pending'`),
      dead: p(`UPDATE outbox SET status = 'dead', reason = ?, lease_until = 0, logged = 0, updated_at = ?
        WHERE id = ? AND lease_owner = ? AND status = 'pending'`),
      get: p('SELECT * FROM outbox WHERE id = ?'),
      unlogged: p('SELECT * FROM outbox WHERE logged = 0 ORDER BY updated_at LIMIT ?'),
      markLogged: p('UPDATE outbox SET logged = 1 WHERE id = ?'),
      owners: p(`SELECT DISTINCT lease_owner AS owner FROM outbox
        WHERE status = 'pending' AND lease_until > ? AND lease_owner IS NOT NULL`),
      releaseOwner:
        p(`UPDATE outbox SET lease_owner = NULL, lease_until = 0, next_attempt_at = ?, updated_at = ?
        WHERE lease_owner = ? AND status = 'pending'`),
      listAll: p('SELECT * FROM outbox ORDER BY seq DESC LIMIT ?'),
      listStatus: p('SELECT * FROM outbox WHERE status = ? ORDER BY seq DESC LIMIT ?'),
      stats: p(`SELECT
          (SELECT count(*) FROM outbox WHERE status = 'pending') AS pending,
          (SELECT count(*) FROM outbox WHERE status = 'dead') AS dead,
          (SELECT min(created_at) FROM outbox WHERE status = 'pending') AS oldest`),
      retry: p(`UPDATE outbox SET status = 'pending', reason = NULL, next_attempt_at = ?, horizon_start = ?,
          lease_owner = NULL, lease_until = 0, updated_at = ?
        WHERE id = ? AND status IN ('dead', 'dropped')`),
      drop: p(`UPDATE outbox SET status = 'dropped', reason = ?, lease_owner = NULL, lease_until = 0, logged = 0, updated_at = ?
        WHERE id = ? AND status IN ('pending', 'dead')`),
      prune: p(`DELETE FROM outbox WHERE status IN ('delivered', 'dropped') AND updated_at < ?`),
    };
  }

  append(specs: readonly ActionSpec[], nowMs: number): Promise<boolean[]> {
    return new Promise((resolve, reject) => {
      this.#batch.push({ specs, nowMs, resolve, reject });
      if (this.#scheduled) return;
      this.#scheduled = true;
      // Group commit: every append of this turn in one transaction.
      setImmediate(() => this.#commit());
    });
  }

  #commit(): void {
    this.#scheduled = false;
    const batch = this.#batch;
    this.#batch = [];
    if (batch.length === 0) return;
    if (this.#closed) {
      for (const b of batch) b.reject(new Error('the outbox is closed'));
      return;
    }
    const results: boolean[][] = [];
    try {
      this.#db.exec('BEGIN IMMEDIATE');
      try {
        for (const { specs, nowMs } of batch) {
          results.push(
            specs.map((s) => {
              const at = dueAtMs(s, nowMs);
              const added = this.#s.insert!.run(s.id, s.orderingKey, JSON.stringify(s), at, at, at, nowMs);
              return Number(added.changes) > 0;
            }),
          );
        }
        this.#db.exec('COMMIT');
      } catch (error) {
        this.#db.exec('ROLLBACK');
        throw error;
      }
    } catch (error) {
      for (const b of batch) b.reject(error);
      return;
    }
    for (const [i, b] of batch.entries()) b.resolve(results[i]!);
  }

  async claim(
    owner: string,
    limit: number,
    nowMs: number,
    leaseMs: number,
    options: ClaimOptions = {},
  ): Promise<OutboxEntry[]> {
    const claim = options.skipWebhooks === true ? this.#s.claimActions! : this.#s.claim!;
    const rows = claim.all({ owner, until: nowMs + leaseMs, now: nowMs, limit }) as unknown as Row[];
    return rows.sort((a, b) => a.seq - b.seq).map(entryOf);
  }

  async complete(id: string, owner: string, nowMs: number): Promise<boolean> {
    return Number(this.#s.complete!.run(nowMs, id, owner).changes) > 0;
  }

  async retryLater(
    id: string,
    owner: string,
    nextAttemptAtMs: number,
    lastError: string | undefined,
    countAttempt: boolean,
    nowMs: number,
  ): Promise<void> {
    this.#s.retryLater!.run(nextAttemptAtMs, lastError ?? null, countAttempt ? 0 : 1, nowMs, id, owner);
  }

  async deadLetter(id: string, owner: string, reason: string, nowMs: number): Promise<boolean> {
    return Number(this.#s.dead!.run(reason, nowMs, id, owner).changes) > 0;
  }

  async unlogged(limit: number): Promise<OutboxEntry[]> {
    return (this.#s.unlogged!.all(limit) as unknown as Row[]).map(entryOf);
  }

  async markLogged(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    this.#db.exec('BEGIN IMMEDIATE');
    try {
      for (const id of ids) this.#s.markLogged!.run(id);
      this.#db.exec('COMMIT');
    } catch (error) {
      this.#db.exec('ROLLBACK');
      throw error;
    }
  }

  async leaseOwners(nowMs: number): Promise<string[]> {
    return (this.#s.owners!.all(nowMs) as { owner: string }[]).map((r) => r.owner);
  }

  async releaseOwner(owner: string, nowMs: number): Promise<number> {
    return Number(this.#s.releaseOwner!.run(nowMs, nowMs, owner).changes);
  }

  async list(filter: OutboxListFilter): Promise<OutboxEntry[]> {
    const limit = filter.limit ?? 100;
    const rows = (filter.status === undefined
      ? this.#s.listAll!.all(limit)
      : this.#s.listStatus!.all(filter.status, limit)) as unknown as Row[];
    return rows.map(entryOf);
  }

  async get(id: string): Promise<OutboxEntry | undefined> {
    const row = this.#s.get!.get(id) as unknown as Row | undefined;
    return row === undefined ? undefined : entryOf(row);
  }

  async stats(nowMs: number): Promise<OutboxStats> {
    const r = this.#s.stats!.get() as { pending: number; dead: number; oldest: number | null };
    return {
      pending: r.pending,
      dead: r.dead,
      oldestPendingAgeMs: r.oldest === null ? 0 : Math.max(0, nowMs - r.oldest),
    };
  }

  async retry(id: string, nowMs: number): Promise<boolean> {
    return Number(this.#s.retry!.run(nowMs, nowMs, nowMs, id).changes) > 0;
  }

  async drop(id: string, reason: string, nowMs: number): Promise<boolean> {
    return Number(this.#s.drop!.run(reason, nowMs, id).changes) > 0;
  }

  async prune(beforeMs: number): Promise<number> {
    return Number(this.#s.prune!.run(beforeMs).changes);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#commit();
    this.#closed = true;
    this.#db.close();
  }
}
