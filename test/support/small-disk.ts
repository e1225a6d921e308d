import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A real full disk for the tests of what riskgate does on one: a small tmpfs mounted on a fresh
 * temp dir, filled up with a file, and freed again. Mounting needs root on Linux (CI runs as
 * root); elsewhere a test skips on `CAN_MOUNT`.
 */

/** Whether this process can mount a tmpfs (Linux, root). */
export const CAN_MOUNT = process.platform === 'linux' && process.getuid?.() === 0;

export interface SmallDisk {
  dir: string;
  /** Writes a file until the disk is full (ENOSPC); its path (remove it: space is back). */
  fillUp(): string;
  /** Unmounts (lazily: a file still open does not stop it) and removes the dir. */
  remove(): void;
}

/** A tmpfs of `size` (mount's size, e.g. `4m`) on a fresh temp dir named from `prefix`, mode 0700. */
export function mountSmallDisk(prefix: string, size: string): SmallDisk {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir]);
  return {
    dir,
    fillUp() {
      const filler = join(dir, 'filler');
      const fd = openSync(filler, 'w');
      try {
        for (;;) writeSync(fd, new Uint8Array(16 * 1024));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
      } finally {
        closeSync(fd);
      }
      return filler;
    },
    remove() {
      execFileSync('umount', ['-l', dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
