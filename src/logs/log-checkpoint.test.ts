import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createFileCheckpointStore } from './log-checkpoint.ts';

describe('the Log API checkpoint file', () => {
  it('is private like the rest of the state: a new state dir 700, the file 600, whatever the umask', async () => {
    const root = mkdtempSync(join(tmpdir(), 'checkpoint-mode-'));
    const state = join(root, 'state');
    const umask = process.umask(0o022);
    try {
      const store = createFileCheckpointStore(join(state, 'log-checkpoint-service.json'));
      await store.save({ version: 1, cursorMs: 1_800_000_000_000, seen: [] });
      expect(statSync(state).mode & 0o777).toBe(0o700);
      expect(statSync(join(state, 'log-checkpoint-service.json')).mode & 0o777).toBe(0o600);
      expect(await store.load()).toEqual({ version: 1, cursorMs: 1_800_000_000_000, seen: [] });
    } finally {
      process.umask(umask);
      rmSync(root, { recursive: true, force: true });
    }
  });
});
