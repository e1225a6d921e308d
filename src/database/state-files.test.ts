import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ownerOnly, prepareStateDir, setAside, withStartLock } from './state-files.ts';

const fresh = () => mkdtempSync(join(tmpdir(), 'riskgate-state-files-'));
const mode = (path: string) => statSync(path).mode & 0o777;

describe('the state dir and its files', () => {
  it('makes the directory 0700, and narrows one that was wider', () => {
    const dir = join(fresh(), 'state');
    expect(prepareStateDir(dir)).toBeUndefined();
    expect(mode(dir)).toBe(0o700);
    chmodSync(dir, 0o755);
    prepareStateDir(dir);
    expect(mode(dir)).toBe(0o700);
  });

  it('creates a database file 0600 and narrows an existing one and its WAL', () => {
    const dir = fresh();
    ownerOnly(join(dir, 'a.sqlite'));
    expect(mode(join(dir, 'a.sqlite'))).toBe(0o600);
    for (const f of ['b.sqlite', 'b.sqlite-wal']) writeFileSync(join(dir, f), 'x', { mode: 0o644 });
    ownerOnly(join(dir, 'b.sqlite'));
    expect(mode(join(dir, 'b.sqlite'))).toBe(0o600);
    expect(mode(join(dir, 'b.sqlite-wal'))).toBe(0o600);
  });

  it('sets a file aside with its companions, under one stamped name', () => {
    const dir = fresh();
    for (const f of ['d.sqlite', 'd.sqlite-wal', 'd.sqlite-shm']) writeFileSync(join(dir, f), 'x');
    const aside = setAside(join(dir, 'd.sqlite'), 'corrupt', Date.UTC(2026, 0, 2, 3, 4, 5, 6));
    expect(aside).toBe(join(dir, 'd.sqlite.corrupt-2026-01-02T03-04-05-006Z'));
    expect(readdirSync(dir).sort()).toEqual(
      ['', '-shm', '-wal'].map((s) => `d.sqlite.corrupt-2026-01-02T03-04-05-006Z${s}`),
    );
  });

  it('runs the starts of one host one at a time, and takes over a lock its holder left by dying', async () => {
    const dir = fresh();
    const order: string[] = [];
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const first = withStartLock(dir, async () => {
      order.push('first in');
      await held;
      order.push('first out');
    });
    const second = withStartLock(dir, async () => {
      order.push('second');
    });
    await new Promise((r) => setImmediate(r));
    expect(existsSync(join(dir, '.start.lock'))).toBe(true);
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['first in', 'first out', 'second']);
    expect(existsSync(join(dir, '.start.lock'))).toBe(false);

    // A lock whose process is gone (a start killed half-way) does not hold the next start.
    const dead = spawnSync(process.execPath, ['-e', '']).pid;
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, '.start.lock'), String(dead));
    await expect(withStartLock(dir, async () => 'ran', 5000)).resolves.toBe('ran');
  });
});
