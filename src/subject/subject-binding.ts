import type { AdminDevice, AdminUser } from '../admin/admin-schemas.ts';

/**
 * Subject binding: riskgate acts only on the identity it scored. The caller names the login
 * (`accountId`, the Trust Signals account) and, for user features and actions, the Admin API ids
 * (`userId`, `deviceId`); nothing stops a key holder from naming someone else's. So the Admin user
 * riskgate reads must be that account's (by default its `username` equals the `accountId`), and a
 * device the caller names must be one of that user's. A mismatch is refused (400, no action, no
 * one-time code); a subject that could not be verified (the Admin read failed) gets its verdict but
 * none of the actions that would touch it.
 */

/** How the Admin user of an account is recognised. `off` trusts the caller (not recommended). */
export type SubjectBindingMode = 'username' | 'off';

export type SubjectCheck =
  | { status: 'verified' }
  /** Nothing to verify: no `userId` named, or binding is off. */
  | { status: 'unbound' }
  /** The Admin user could not be read: no action may touch it. */
  | { status: 'unverified' }
  | { status: 'mismatch'; field: 'userId' | 'deviceId' };

export function checkSubject(
  mode: SubjectBindingMode,
  request: { accountId: string; userId?: string | undefined; deviceId?: string | undefined },
  user: AdminUser | undefined,
  devices: readonly AdminDevice[] | undefined,
): SubjectCheck {
  if (mode === 'off' || request.userId === undefined) return { status: 'unbound' };
  if (user === undefined) return { status: 'unverified' };
  if (user.user_id !== request.userId || user.username !== request.accountId) {
    return { status: 'mismatch', field: 'userId' };
  }
  if (request.deviceId !== undefined && devices !== undefined) {
    if (!devices.some((d) => d.device_id === request.deviceId))
      return { status: 'mismatch', field: 'deviceId' };
  }
  return { status: 'verified' };
}

/** The problem's message for a mismatch: which field, never whose account it really is. */
export function mismatchMessage(field: 'userId' | 'deviceId'): string {
  return field === 'userId'
    ? 'userId is not the Admin user of accountId: riskgate acts only on the user it scored (the Admin user whose username is the accountId).'
    : 'deviceId is not a device of userId: riskgate acts only on the user it scored and that user’s devices.';
}
