import { existsSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { Kysely } from 'kysely';
import { parseStoredSpec } from '../actions/admin-actions.ts';
import type { RiskgateDatabase } from '../database/database.ts';
import { tryLockFile } from '../database/state-lock.ts';
import type { LifecycleLog } from '../lifecycle/component.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { OutboxTables } from './outbox-tables.ts';

/**
 * The outbox's former home, `outbox.sqlite` in RISKGATE_STATE_DIR (its own file, written on the
 * event loop), drained into the database's `outbox_entry` at the first start that finds it: the
 * pending and dead entries (and ended ones whose outcome line was never confirmed) keep their ids,
 * attempts, times and errors, in their order; leases are ended (their process is gone). Then the
 * file is renamed aside, `outbox.sqlite.migrated-<epoch ms>` (its `-wal` and `-shm` too), and the
 * counts logged. A repeat is harmless (ids are kept once); a row that cannot be read (not JSON, or not an action spec) is
 * left in the renamed file, counted and logged.
 *
 * Read once at start, before the outbox serves, with node:sqlite on the event loop (nothing else
 * runs yet). Workers starting together: one holds `outbox.sqlite.draining` (its pid) and drains;
 * the others go on, and claim the entries once they are in.
 */

/** The former outbox file's name under the state dir. */
export const LEGACY_OUTBOX_FILE = 'outbox.sqlite';

/** Rows per insert statement (16 columns each, far below either engine's parameter limit). */
const ROWS_PER_INSERT = 100;

export interface DrainResult {
  /** Entries written to the database (not there already). */
  moved: number;
  /** Rows left in the renamed file: unreadable. */
  skipped: number;
  /** Where the file went. */
  renamedTo: string;
}

interface LegacyRow {
  id: string;
  ordering_key: string;
  spec: string;
  status: string;
  attempts: number;
  created_at: number;
  horizon_start: number;
  next_attempt_at: number;
  updated_at: number;
  last_error: string | null;
  reason: string | null;
  logged: number;
}

/** Drains `<stateDir>/outbox.sqlite` into `database`, if there is one; undefined when there is none. */
export async function drainOutboxFile(o: {
  stateDir: string;
  database: RiskgateDatabase;
  log: LifecycleLog;
  /** Dates the drained file's new name. Default {@link systemClock}. */
  clock?: Clock | undefined;
}): Promise<DrainResult | undefined> {
  const path = join(o.stateDir, LEGACY_OUTBOX_FILE);
  if (!existsSync(path)) return undefined;
  const lock = tryLockFile(`${path}.draining`);
  if (lock === undefined) {
    o.log({ level: 'info', msg: 'outbox.sqlite is being drained by another process', path });
    return undefined;
  }
  try {
    // Checked again under the lock: the holder before us may have renamed it.
    if (!existsSync(path)) return undefined;
    const { rows, skipped } = readLegacy(path, o.log);
    const moved = await insertAll(o.database.db.withTables<OutboxTables>(), rows);
    const renamedTo = `${path}.migrated-${(o.clock ?? systemClock).nowMs()}`;
    for (const suffix of ['-wal', '-shm', '']) {
      if (existsSync(path + suffix)) renameSync(path + suffix, renamedTo + suffix);
    }
    o.log({
      level: 'warn',
      msg: 'the former outbox file was drained into the database and renamed aside',
      pending: rows.filter((r) => r.status === 'pending').length,
      dead: rows.filter((r) => r.status === 'dead').length,
      moved,
      skipped,
      renamedTo,
    });
    return { moved, skipped, renamedTo };
  } finally {
    lock.release();
  }
}

/** What the file holds that must go on: pending, dead, and ended but never told. */
function readLegacy(path: string, log: LifecycleLog): { rows: LegacyRow[]; skipped: number } {
  const db = new DatabaseSync(path);
  try {
    const columns = new Set(
      (db.prepare('PRAGMA table_info(outbox)').all() as { name: string }[]).map((c) => c.name),
    );
    if (columns.size === 0) return { rows: [], skipped: 0 };
    // A file from before the outcome-line column: every ended entry's line was told.
    const logged = columns.has('logged') ? 'logged' : '1 AS logged';
    const all = db
      .prepare(
        `SELECT id, ordering_key, spec, status, attempts, created_at, horizon_start, next_attempt_at,
           updated_at, last_error, reason, ${logged} FROM outbox
         WHERE status IN ('pending', 'dead') OR ${columns.has('logged') ? 'logged = 0' : '0'}
         ORDER BY seq`,
      )
      .all() as unknown as LegacyRow[];
    const rows: LegacyRow[] = [];
    let skipped = 0;
    for (const row of all) {
      if (typeOf(row.spec) === undefined) {
        skipped++;
        log({
          level: 'error',
          msg: 'an outbox.sqlite entry is unreadable: left in the renamed file',
          id: row.id,
        });
      } else rows.push(row);
    }
    return { rows, skipped };
  } finally {
    db.close();
  }
}

/**
 * The action type of a stored spec; undefined when it is not an action spec this version reads
 * (checked as the database store checks it when it claims: a row moved in that could not be
 * read would only be set aside there, away from the file an operator can inspect).
 */
function typeOf(spec: string): string | undefined {
  try {
    return parseStoredSpec(spec).type;
  } catch {
    return undefined;
  }
}

/** Inserts `rows` in order, in one transaction, each id once; how many were new. */
async function insertAll(db: Kysely<OutboxTables>, rows: readonly LegacyRow[]): Promise<number> {
  return db.transaction().execute(async (tx) => {
    let moved = 0;
    for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
      const values = rows.slice(i, i + ROWS_PER_INSERT).map((r) => ({
        id: r.id,
        ordering_key: r.ordering_key,
        action_type: typeOf(r.spec)!,
        spec: r.spec,
        status: r.status,
        attempts: Number(r.attempts),
        created_at: Number(r.created_at),
        horizon_start: Number(r.horizon_start),
        next_attempt_at: Number(r.next_attempt_at),
        updated_at: Number(r.updated_at),
        lease_owner: null,
        lease_until: 0,
        last_error: r.last_error,
        reason: r.reason,
        logged: Number(r.logged),
      }));
      const result = await tx
        .insertInto('outbox_entry')
        .values(values)
        .onConflict((oc) => oc.column('id').doNothing())
        .executeTakeFirst();
      moved += Number(result.numInsertedOrUpdatedRows ?? 0);
    }
    return moved;
  });
}
