import type { BackupCodeRecord } from './admin-records.ts';
import type { AdminState } from './admin-state.ts';
import { randomDigits, spaceDigits, unspaceDigits } from './codes.ts';

/** Admin API backup codes and one-time codes, and the passcode check of simulated logins. */

export function getBackupCodes(s: AdminState, userId: string): Record<string, unknown> {
  s.user(userId);
  return { backup_codes: (s.backupCodes.get(userId) ?? []).map(backupCodeView) };
}

/** POST /users/{id}/backup_codes: replaces the whole list. */
export function createBackupCodes(
  s: AdminState,
  userId: string,
  body: { count?: number; length?: number; reuse_count?: number },
) {
  s.activeUser(userId);
  const count = body.count ?? 10;
  const length = body.length ?? 10;
  const reuse = body.reuse_count ?? 1;
  const codes: BackupCodeRecord[] = [];
  const seen = new Set<string>();
  while (codes.length < count) {
    const digits = randomDigits(length);
    if (seen.has(digits)) continue;
    seen.add(digits);
    codes.push(reuse === 0 ? { digits } : { digits, remaining: reuse });
  }
  s.backupCodes.set(userId, codes);
  return { backup_codes: codes.map(backupCodeView) };
}

/** POST /users/{id}/one_time_code: the new code replaces any earlier one. */
export function createOneTimeCode(
  s: AdminState,
  userId: string,
  body: { length?: number; valid_secs?: number },
) {
  s.activeUser(userId);
  const digits = randomDigits(body.length ?? 6);
  const expiration = s.nowSec() + (body.valid_secs ?? 180);
  s.oneTimeCodes.set(userId, { digits, expiration });
  return { one_time_code: spaceDigits(digits), expiration };
}

/**
 * Checks a passcode against the user's one-time code and backup codes, consuming what matched.
 * Returns the activity reason of the outcome.
 */
export function checkPasscode(
  s: AdminState,
  userId: string,
  passcode: string,
): { ok: boolean; reason: string } {
  const digits = unspaceDigits(passcode);
  const otc = s.oneTimeCodes.get(userId);
  if (otc && otc.digits === digits) {
    s.oneTimeCodes.delete(userId);
    if (s.nowSec() > otc.expiration) return { ok: false, reason: 'one_time_code expired' };
    return { ok: true, reason: 'one_time_code' };
  }
  const codes = s.backupCodes.get(userId) ?? [];
  const i = codes.findIndex((c) => c.digits === digits);
  if (i !== -1) {
    const code = codes[i]!;
    if (code.remaining !== undefined) {
      code.remaining -= 1;
      if (code.remaining <= 0) codes.splice(i, 1);
    }
    return { ok: true, reason: 'backup_code' };
  }
  return { ok: false, reason: 'invalid passcode' };
}

function backupCodeView(c: BackupCodeRecord): Record<string, unknown> {
  return c.remaining === undefined
    ? { code: spaceDigits(c.digits), infinite_uses: true }
    : { code: spaceDigits(c.digits), remaining_uses: c.remaining };
}
