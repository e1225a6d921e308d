import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The development caller key's file name under `RISKGATE_STATE_DIR`. */
export const DEV_API_KEY_FILE = 'dev-api-key';

/** Shortest key riskgate accepts (the same floor as RISKGATE_API_KEYS). */
const MIN_KEY_LENGTH = 16;

/**
 * The caller key of sandbox mode when RISKGATE_API_KEYS is unset: read from
 * `<stateDir>/dev-api-key` when a previous start wrote one, so the curl commands printed then keep
 * working after a restart; generated (24 random bytes) and written with mode 0600 otherwise.
 * Production never reaches this: with a vendor configured, RISKGATE_API_KEYS is required.
 */
export function loadOrCreateDevApiKey(stateDir: string): { key: string; file: string; created: boolean } {
  const file = join(stateDir, DEV_API_KEY_FILE);
  try {
    const kept = readFileSync(file, 'utf8').trim();
    if (kept.length >= MIN_KEY_LENGTH && !/[\s,]/.test(kept)) return { key: kept, file, created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const key = `rg_dev_${randomBytes(24).toString('base64url')}`;
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return { key, file, created: true };
}
