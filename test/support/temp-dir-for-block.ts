import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/**
 * A temp directory named `prefix...` for a test file (call it at the top) or a `describe` block:
 * made now, at collection, and removed with all it holds after the block's last test.
 */
export function tempDirForBlock(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
