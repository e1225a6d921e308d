import type { UserStatus } from '../../admin/admin-schemas.ts';

/**
 * The user status table of docs/vendor-api.md#user-status, as pure functions so each row is
 * one place to read and one place to change.
 */

/** Statuses a PUT /users/{id} may request. */
export type SettableStatus = Exclude<UserStatus, 'archived'>;

/** What a status PUT does besides setting the status. */
export interface StatusPutOutcome {
  status: SettableStatus;
  /** Lock-out (failed_attempts) is reset. */
  resetFailedAttempts: boolean;
  /** Every enrolled device is unenrolled (status=disabled). */
  unenrollDevices: boolean;
}

/**
 * PUT user with status=... on a non-archived user:
 * - enabled: enabled when the user has an enrolled device, else disabled (docs/vendor-api.md#user-status);
 *   removes bypass and lock-out;
 * - bypass: resets lock-out;
 * - locked_out: stays until reset by enabled or bypass (failed_attempts kept);
 * - disabled: unenrolls every enrolled device; resets bypass and lock-out.
 */
export function statusAfterPut(requested: SettableStatus, hasEnrolledDevice: boolean): StatusPutOutcome {
  switch (requested) {
    case 'enabled':
      return {
        status: hasEnrolledDevice ? 'enabled' : 'disabled',
        resetFailedAttempts: true,
        unenrollDevices: false,
      };
    case 'bypass':
      return { status: 'bypass', resetFailedAttempts: true, unenrollDevices: false };
    case 'locked_out':
      return { status: 'locked_out', resetFailedAttempts: false, unenrollDevices: false };
    case 'disabled':
      return { status: 'disabled', resetFailedAttempts: true, unenrollDevices: true };
  }
}

/**
 * One more consecutive failed authentication of an enabled user. Lock-out happens when the count
 * exceeds max_attempts: with the default 15, on the 16th consecutive failure.
 */
export function statusAfterFailure(
  status: UserStatus,
  failedAttempts: number,
  maxAttempts: number,
): { status: UserStatus; failedAttempts: number; lockedOut: boolean } {
  if (status !== 'enabled') return { status, failedAttempts, lockedOut: false };
  const next = failedAttempts + 1;
  if (next > maxAttempts) return { status: 'locked_out', failedAttempts: next, lockedOut: true };
  return { status, failedAttempts: next, lockedOut: false };
}

/**
 * DELETE of a device: an enabled user whose only enrolled device it was becomes disabled and the
 * response says `success_2fa_disabled`.
 */
export function statusAfterDeviceDelete(
  status: UserStatus,
  enrolledDevicesLeft: number,
): { status: UserStatus; result: 'success' | 'success_2fa_disabled' } {
  if (status === 'enabled' && enrolledDevicesLeft === 0) {
    return { status: 'disabled', result: 'success_2fa_disabled' };
  }
  return { status, result: 'success' };
}

/** A completed enrollment gives a disabled user (no device until now) an enrolled device. */
export function statusAfterEnrollment(status: UserStatus): UserStatus {
  return status === 'disabled' ? 'enabled' : status;
}
