import { randomUUID } from 'node:crypto';
import { linkSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { type Clock, systemClock } from '../timing/clock.ts';
import { sleep } from '../timing/sleep.ts';

/**
 * A lock file in the state dir: the start lock (the workers of one host prepare the files one at a
 * time) and the drain of a former `outbox.sqlite`. One rule for both, because every way a lock can
 * lie has bitten a start:
 *
 * - It is never seen empty: the holder's line is written to a file of its own, then hard-linked
 *   into place (`link` fails when the lock exists). A lock created empty and filled after (the
 *   former way) was taken over by a second starter in between.
 * - A lock naming this process's own pid, which this process does not hold, is from an earlier life
 *   of the same pid: in a container every riskgate is pid 1, so "pid 1 is alive" held every restart
 *   30 s and left `outbox.sqlite` undrained for ever.
 * - A lock naming a process of this host that is gone (ESRCH) is stale. One naming another host
 *   (a shared volume) cannot be checked: it holds until `staleAfterMs` since it was written.
 * - An empty or unreadable lock (a former version's, between its create and its write) holds until
 *   `staleAfterMs` since it was written, then is stale.
 *
 * Locks this process holds are known in memory: two starts in one process (tests, a restart in
 * place) wait for each other instead of taking each other's lock as "our own pid, so stale".
 */

/** Lock paths this process holds now. */
const HELD = new Set<string>();

/** How old an unverifiable lock (empty, or another host's) must be to be taken over, ms. */
export const LOCK_STALE_AFTER_MS = 60_000;

export interface LockFileOptions {
  /** An unverifiable lock older than this is stale, ms. Default {@link LOCK_STALE_AFTER_MS}. */
  staleAfterMs?: number;
  /** Reads the lock's age (wall time) and the wait's deadline (monotonic). Default {@link systemClock}. */
  clock?: Clock | undefined;
}

/** A lock taken: release it once (releasing twice, or after a takeover, removes nothing of another's). */
export interface HeldLock {
  release(): void;
}

/** What a lock file says: this host's name and the holder's pid, one line. */
function lockLine(): string {
  return `${process.pid} ${hostname()}\n`;
}

/** Takes the lock at `path` now, or undefined when someone else holds it. */
export function tryLockFile(path: string, o: LockFileOptions = {}): HeldLock | undefined {
  for (let attempt = 0; attempt < 2; attempt++) {
    if (link(path)) return heldLock(path);
    if (!isStale(path, o)) return undefined;
    takeOver(path, o);
  }
  return undefined;
}

/**
 * Runs `work` holding the lock at `path`, polling every `pollMs` while another holds it. Past
 * `timeoutMs` it runs `work` without the lock (a start is never stopped by a lock) and says so
 * through `onTimeout`.
 */
export async function withLockFile<T>(
  path: string,
  work: () => Promise<T>,
  o: LockFileOptions & { timeoutMs: number; pollMs?: number; onTimeout?: () => void },
): Promise<T> {
  const clock = o.clock ?? systemClock;
  const until = clock.monotonicMs() + o.timeoutMs;
  let lock = tryLockFile(path, o);
  while (lock === undefined && clock.monotonicMs() < until) {
    await sleep(o.pollMs ?? 50);
    lock = tryLockFile(path, o);
  }
  if (lock === undefined) o.onTimeout?.();
  try {
    return await work();
  } finally {
    lock?.release();
  }
}

function link(path: string): boolean {
  if (HELD.has(path)) return false;
  const line = `${path}.${process.pid}.${randomUUID()}`;
  writeFileSync(line, lockLine(), { mode: 0o600 });
  try {
    linkSync(line, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    rmSync(line, { force: true });
  }
}

/**
 * Removes a lock judged stale without removing a fresh one by mistake: two takers can both judge
 * the old lock stale, and the second's plain remove would delete the first's new lock. The lock is
 * renamed aside (atomic: one taker gets it), judged again there, and put back when it is a live
 * holder's after all.
 */
function takeOver(path: string, o: LockFileOptions): void {
  const aside = `${path}.stale-${process.pid}-${randomUUID()}`;
  try {
    renameSync(path, aside);
  } catch {
    return; // Gone already: another taker moved it.
  }
  try {
    if (!isStale(aside, o, path)) linkSync(aside, path);
  } catch {
    // Another lock is in place since: it stands.
  } finally {
    rmSync(aside, { force: true });
  }
}

function heldLock(path: string): HeldLock {
  HELD.add(path);
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      HELD.delete(path);
      // Ours only: a lock taken over from us (we were stuck past staleAfterMs) stays its holder's.
      if (holderOf(path)?.line === lockLine()) rmSync(path, { force: true });
    },
  };
}

function holderOf(path: string): { line: string; pid: number; host: string } | undefined {
  let line: string;
  try {
    line = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  const [pid, host] = line.trim().split(' ');
  const n = Number(pid);
  if (!Number.isInteger(n) || n <= 0) return undefined;
  return { line, pid: n, host: host ?? '' };
}

/** Whether the lock at `path` may be taken over (see the module's comment for each case). */
export function isStale(path: string, o: LockFileOptions = {}, lockPath = path): boolean {
  if (HELD.has(lockPath)) return false;
  const holder = holderOf(path);
  // This host's (a former version wrote the pid alone, and ran on one host): the pid can be asked.
  if (holder !== undefined && (holder.host === hostname() || holder.host === '')) {
    return holder.pid === process.pid || !isProcessAlive(holder.pid);
  }
  // Empty, unreadable, or another host's: only its age can say.
  let mtimeMs: number;
  try {
    mtimeMs = statSync(path).mtimeMs;
  } catch {
    return true;
  }
  return (o.clock ?? systemClock).nowMs() - mtimeMs > (o.staleAfterMs ?? LOCK_STALE_AFTER_MS);
}

/**
 * Whether process `pid` may exist on this host: only "no such process" (ESRCH) says it is gone
 * (EPERM: it exists, owned by someone else). A pid that is not one is taken as alive: nothing is
 * taken from a holder that cannot be checked. The one liveness rule of the lock files and the
 * outbox's leases.
 */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}
