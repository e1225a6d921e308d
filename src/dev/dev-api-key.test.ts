import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEV_API_KEY_FILE,
  DEV_OPS_KEY_FILE,
  loadOrCreateDevApiKey,
  loadOrCreateDevOpsKey,
} from './dev-api-key.ts';

describe('loadOrCreateDevApiKey', () => {
  it('creates the key once, private to its owner, and returns the same key on every later start', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'riskgate-devkey-')), 'state');
    const first = loadOrCreateDevApiKey(dir);
    expect(first.created).toBe(true);
    expect(first.key).toMatch(/^rg_dev_[A-Za-z0-9_-]{32}$/);
    expect(first.file).toBe(join(dir, DEV_API_KEY_FILE));
    expect(statSync(first.file).mode & 0o777).toBe(0o600);
    const second = loadOrCreateDevApiKey(dir);
    expect(second).toEqual({ key: first.key, file: first.file, created: false });
  });

  it('replaces a kept file that is too short or malformed to be a caller key', () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-devkey-'));
    writeFileSync(join(dir, DEV_API_KEY_FILE), 'short\n');
    const key = loadOrCreateDevApiKey(dir);
    expect(key.created).toBe(true);
    expect(readFileSync(key.file, 'utf8').trim()).toBe(key.key);
  });
});

describe('loadOrCreateDevOpsKey', () => {
  it('keeps an operator key of its own beside the caller key, private to its owner', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'riskgate-devkey-')), 'state');
    const caller = loadOrCreateDevApiKey(dir);
    const ops = loadOrCreateDevOpsKey(dir);
    expect(ops.key).toMatch(/^rg_devops_[A-Za-z0-9_-]{32}$/);
    expect(ops.key).not.toBe(caller.key);
    expect(ops.file).toBe(join(dir, DEV_OPS_KEY_FILE));
    expect(statSync(ops.file).mode & 0o777).toBe(0o600);
    expect(loadOrCreateDevOpsKey(dir)).toEqual({ key: ops.key, file: ops.file, created: false });
  });
});
