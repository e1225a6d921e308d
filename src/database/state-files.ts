import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  renameSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { withLockFile } from './state-lock.ts';

/**
 * The embedded state files under RISKGATE_STATE_DIR (docs/architecture.md, "Two kinds of state"):
 *
 * - `control.sqlite`: control state, the system of record (lists, lock-outs, the outbox, the audit
 *   trail). Never moved aside nor replaced by riskgate: unreadable means unavailable.
 * - `decisions.sqlite`: observations (the decision store). Moved aside and rebuilt when it cannot
 *   be used: it never stops a start.
 * - `state.json`: the marker written once the control file first exists. A control file absent
 *   while the marker is present was lost (deleted, a volume not mounted), not a first start: the
 *   control state is then unavailable, never silently empty.
 * - `riskgate.sqlite`: the single file of riskgate before the split, read once to seed the control
 *   file, then renamed aside (`riskgate.sqlite.pre-split-<ts>`; its decisions stay there).
 *
 * The directory is made 0700 and every SQLite file 0600 (SQLite creates `-wal` and `-shm` with the
 * mode of their database file): they hold IP addresses, user agents and the audit trail.
 */

export const CONTROL_FILE = 'control.sqlite';
export const DECISIONS_FILE = 'decisions.sqlite';
export const MARKER_FILE = 'state.json';

/**
 * Page size of a decisions file riskgate makes, bytes (issue 32). A stored decision carries its
 * logged line whole (~5 KB on the bench's mix): on SQLite's 4 KiB pages every row spilled into an
 * overflow page of its own, and a batch's commit wrote ~4.2 WAL frames per decision (each two
 * `pwrite`s, on riskgate's core) plus ~2.3 pages checkpointed. On 16 KiB pages three rows share a
 * leaf and each index has a quarter of the leaves: ~1.8 frames and ~0.6 pages, for more bytes per
 * write (bench/RESULTS.md, "the SQLite files' pages per decision"). The control file keeps
 * SQLite's default: its transactions touch one page per index however large the pages are.
 */
export const DECISIONS_PAGE_SIZE = 16_384;

/**
 * How much WAL the decisions file's writer lets build up before a commit checkpoints it, bytes
 * (`PRAGMA wal_autocheckpoint`, in pages of the file's size; issue 32). A checkpoint copies each
 * page the WAL holds once, however many batches changed it since the last one. At SQLite's default
 * (1,000 pages: 16 MB here) a store of 100,000 decisions was checkpointed after every batch of a
 * second at 200/s (~5.7 frames a decision: the indexes on random keys, user, IP, account, unit,
 * cost about a leaf a row), copying every frame; at 64 MiB ~3.4 pages a decision, and the
 * checkpoints' CPU ~0.6x (bench/RESULTS.md, "the decisions file's checkpoints"; 128 MiB copied
 * fewer pages for no less CPU). The price: readers look pages up in the WAL it keeps, and read
 * the recent ones there (the console's 1 h and 24 h charts ~0.5 ms slower, ~1.35x). After a burst
 * `journal_size_limit` trims the WAL back to this size: disk on top of
 * RISKGATE_DECISION_STORE_MAX_MB's lines.
 */
export const DECISIONS_WAL_BYTES = 64 * 1024 * 1024;
export const LEGACY_FILE = 'riskgate.sqlite';

/** SQLite's companions of a database file (WAL mode). */
const COMPANIONS = ['', '-wal', '-shm', '-journal'] as const;

export interface StateFiles {
  dir: string;
  control: string;
  decisions: string;
  marker: string;
  legacy: string;
}

export function stateFiles(dir: string): StateFiles {
  return {
    dir,
    control: join(dir, CONTROL_FILE),
    decisions: join(dir, DECISIONS_FILE),
    marker: join(dir, MARKER_FILE),
    legacy: join(dir, LEGACY_FILE),
  };
}

/**
 * Creates the state dir 0700 (or narrows an existing one to 0700). Returns a warning when the
 * mode cannot be set (a directory owned by someone else): the start goes on, and says so.
 */
export function prepareStateDir(dir: string): string | undefined {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    chmodSync(dir, 0o700);
    return undefined;
  } catch (error) {
    return `cannot make ${dir} 0700: ${(error as Error).message}`;
  }
}

/**
 * Creates `path` empty with mode 0600 if absent (SQLite takes an empty file for an empty
 * database), and narrows it and its companions to 0600 if present.
 */
export function ownerOnly(path: string): void {
  closeSync(openSync(path, 'a', 0o600));
  for (const suffix of COMPANIONS) {
    try {
      chmodSync(`${path}${suffix}`, 0o600);
    } catch {
      // Absent: SQLite creates it later with the database file's mode.
    }
  }
}

/**
 * Renames `path` and its companions to `<path>.<label>-<ts>` (kept for a look, never deleted).
 * Returns the new name of the main file.
 */
export function setAside(path: string, label: string, nowMs = Date.now()): string {
  const stamp = new Date(nowMs).toISOString().replace(/[:.]/g, '-');
  const aside = `${path}.${label}-${stamp}`;
  for (const suffix of COMPANIONS) {
    if (!existsSync(`${path}${suffix}`)) continue;
    renameSync(`${path}${suffix}`, `${aside}${suffix}`);
  }
  return aside;
}

/** Whether the marker says this state dir had a control file before. */
export function markerPresent(files: StateFiles): boolean {
  return existsSync(files.marker);
}

export function writeMarker(files: StateFiles, nowMs = Date.now()): void {
  if (existsSync(files.marker)) return;
  writeFileSync(
    files.marker,
    `${JSON.stringify({ control: CONTROL_FILE, decisions: DECISIONS_FILE, since: new Date(nowMs).toISOString() })}\n`,
    { mode: 0o600 },
  );
}

/** The file's identity as the watch compares it (inode and device), or undefined when absent. */
export function fileIdentity(path: string): { dev: number; ino: number; size: number } | undefined {
  try {
    const s = statSync(path);
    return { dev: s.dev, ino: s.ino, size: s.size };
  } catch {
    return undefined;
  }
}

/**
 * Runs `work` holding the state dir's start lock (`.start.lock`, src/database/state-lock.ts), so
 * the workers of one host (RISKGATE_WORKERS) prepare the files one at a time: the upgrade from the
 * single file, a file set aside, the marker. A lock left by a process that died, or by an earlier
 * life of this pid (a container's pid 1), is taken over. Waits at most `timeoutMs`, then goes on
 * without it (a start is never stopped by the lock).
 */
export async function withStartLock<T>(
  dir: string,
  work: () => Promise<T>,
  timeoutMs = 30_000,
  onTimeout?: () => void,
): Promise<T> {
  return withLockFile(join(dir, START_LOCK_FILE), work, { timeoutMs, ...(onTimeout && { onTimeout }) });
}

export const START_LOCK_FILE = '.start.lock';
