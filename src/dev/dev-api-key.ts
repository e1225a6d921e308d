import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The development caller key's file name under `RISKGATE_STATE_DIR`. */
export const DEV_API_KEY_FILE = 'dev-api-key';
/** The development operator key's file name under `RISKGATE_STATE_DIR`. */
export const DEV_OPS_KEY_FILE = 'dev-ops-key';

/** Shortest key riskgate accepts (the same floor as RISKGATE_API_KEYS and RISKGATE_OPS_KEYS). */
const MIN_KEY_LENGTH = 16;

/**
 * The caller key of sandbox mode when RISKGATE_API_KEYS is unset: read from
 * `<stateDir>/dev-api-key` when a previous start wrote one, so the curl commands printed then keep
 * working after a restart; generated (24 random bytes) and written with mode 0600 otherwise.
 * Production never reaches this: with a vendor configured, RISKGATE_API_KEYS is required.
 */
export function loadOrCreateDevApiKey(stateDir: string): { key: string; file: string; created: boolean } {
  return loadOrCreateDevKey(stateDir, DEV_API_KEY_FILE, 'rg_dev_');
}

/**
 * The operator key of sandbox mode when RISKGATE_OPS_KEYS is unset (`<stateDir>/dev-ops-key`,
 * mode 0600), so `npm start` can show /metrics, /policies and /actions: operator endpoints never
 * take a caller key. Like the caller key it is printed once, in the start banner, and nowhere else.
 */
export function loadOrCreateDevOpsKey(stateDir: string): { key: string; file: string; created: boolean } {
  return loadOrCreateDevKey(stateDir, DEV_OPS_KEY_FILE, 'rg_devops_');
}

function loadOrCreateDevKey(
  stateDir: string,
  name: string,
  prefix: string,
): { key: string; file: string; created: boolean } {
  const file = join(stateDir, name);
  try {
    const kept = readFileSync(file, 'utf8').trim();
    if (kept.length >= MIN_KEY_LENGTH && !/[\s,]/.test(kept)) return { key: kept, file, created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const key = `${prefix}${randomBytes(24).toString('base64url')}`;
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return { key, file, created: true };
}
