import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isStale, LOCK_STALE_AFTER_MS, tryLockFile, withLockFile } from './state-lock.ts';

const fresh = () => join(mkdtempSync(join(tmpdir(), 'riskgate-lock-')), 'x.lock');
/** A pid that existed and is gone. */
const deadPid = () => spawnSync(process.execPath, ['-e', '']).pid!;
const ago = (path: string, ms: number) => {
  const at = (Date.now() - ms) / 1000;
  utimesSync(path, at, at);
};

describe('a state lock file', () => {
  it('is never seen empty: it appears whole, naming this process and host', () => {
    const path = fresh();
    const lock = tryLockFile(path)!;
    expect(lock).toBeDefined();
    expect(readFileSync(path, 'utf8')).toBe(`${process.pid} ${hostname()}\n`);
    lock.release();
    expect(existsSync(path)).toBe(false);
  });

  it('is held against a second taker in this process until released', async () => {
    const path = fresh();
    const first = tryLockFile(path)!;
    // Our own pid, but held by us now: live, not "an earlier life".
    expect(isStale(path)).toBe(false);
    expect(tryLockFile(path)).toBeUndefined();
    first.release();
    const second = tryLockFile(path);
    expect(second).toBeDefined();
    second!.release();
  });

  it('is taken over when it names this pid but this process does not hold it (a container’s pid 1 after a restart)', () => {
    const path = fresh();
    writeFileSync(path, `${process.pid} ${hostname()}\n`);
    expect(isStale(path)).toBe(true);
    const lock = tryLockFile(path);
    expect(lock).toBeDefined();
    lock!.release();
  });

  it('is taken over when its holder on this host is gone, in this version’s form and a former one’s (pid alone)', () => {
    for (const line of [`${deadPid()} ${hostname()}\n`, String(deadPid())]) {
      const path = fresh();
      writeFileSync(path, line);
      expect(isStale(path)).toBe(true);
      tryLockFile(path)!.release();
    }
  });

  it('holds while its holder on this host lives (the parent of this test)', () => {
    const path = fresh();
    writeFileSync(path, `${process.ppid} ${hostname()}\n`);
    expect(isStale(path)).toBe(false);
    expect(tryLockFile(path)).toBeUndefined();
  });

  it('holds when empty (being written by a former version) until it is old, then is taken over', () => {
    const path = fresh();
    writeFileSync(path, '');
    expect(isStale(path)).toBe(false);
    expect(tryLockFile(path)).toBeUndefined();
    ago(path, LOCK_STALE_AFTER_MS + 1000);
    expect(isStale(path)).toBe(true);
    tryLockFile(path)!.release();
  });

  it('holds when another host’s (a shared volume) until it is old', () => {
    const path = fresh();
    writeFileSync(path, `${process.pid} not-${hostname()}\n`);
    expect(isStale(path)).toBe(false);
    ago(path, LOCK_STALE_AFTER_MS + 1000);
    expect(isStale(path)).toBe(true);
  });

  it('lets one of many concurrent takers in at a time', async () => {
    const path = fresh();
    let inside = 0;
    let most = 0;
    const runs = Array.from({ length: 6 }, () =>
      withLockFile(
        path,
        async () => {
          inside++;
          most = Math.max(most, inside);
          await new Promise((r) => setImmediate(r));
          inside--;
        },
        { timeoutMs: 10_000, pollMs: 1 },
      ),
    );
    await Promise.all(runs);
    expect(most).toBe(1);
    expect(existsSync(path)).toBe(false);
  });

  it('releases only its own: a lock taken over from a stuck holder stays the new holder’s', () => {
    const path = fresh();
    const stuck = tryLockFile(path)!;
    // Another host took it over meanwhile (the stuck holder was past staleAfterMs).
    writeFileSync(path, `42 not-${hostname()}\n`);
    stuck.release();
    expect(readFileSync(path, 'utf8')).toBe(`42 not-${hostname()}\n`);
  });
});

describe('a stale state lock raced for by several processes', () => {
  it('goes to one of them at a time', async () => {
    const path = fresh();
    writeFileSync(path, `${deadPid()} ${hostname()}\n`);
    const journal = `${path}.journal`;
    writeFileSync(journal, '');
    const script = `
      import { appendFileSync } from 'node:fs';
      import { withLockFile } from ${JSON.stringify(join(import.meta.dirname, 'state-lock.ts'))};
      await withLockFile(${JSON.stringify(path)}, async () => {
        appendFileSync(${JSON.stringify(journal)}, 'in\\n');
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100); // held a while
        appendFileSync(${JSON.stringify(journal)}, 'out\\n');
      }, { timeoutMs: 60_000, pollMs: 5 });
    `;
    const runs = Array.from(
      { length: 6 },
      () =>
        new Promise<number | null>((resolve) => {
          const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'inherit' });
          child.on('exit', resolve);
        }),
    );
    expect(await Promise.all(runs)).toEqual([0, 0, 0, 0, 0, 0]);
    // Never two inside at once: every "in" is followed by its "out".
    expect(readFileSync(journal, 'utf8')).toBe('in\nout\n'.repeat(6));
  }, 60_000);
});
