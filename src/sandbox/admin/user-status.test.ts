import { describe, expect, it } from 'vitest';
import {
  statusAfterDeviceDelete,
  statusAfterEnrollment,
  statusAfterFailure,
  statusAfterPut,
} from './user-status.ts';

describe('user status transitions', () => {
  it('enabled with an enrolled device is enabled and resets lock-out', () => {
    expect(statusAfterPut('enabled', true)).toEqual({
      status: 'enabled',
      resetFailedAttempts: true,
      unenrollDevices: false,
    });
  });
  it('enabled without an enrolled device answers disabled', () => {
    expect(statusAfterPut('enabled', false).status).toBe('disabled');
  });
  it('locked_out keeps the failure count; disabled unenrolls devices', () => {
    expect(statusAfterPut('locked_out', true).resetFailedAttempts).toBe(false);
    expect(statusAfterPut('disabled', true)).toMatchObject({ status: 'disabled', unenrollDevices: true });
    expect(statusAfterPut('bypass', false)).toMatchObject({ status: 'bypass', resetFailedAttempts: true });
  });
  it('locks out on the failure after max_attempts, not before', () => {
    let s = { status: 'enabled' as const as 'enabled' | 'locked_out', failedAttempts: 0 };
    for (let i = 1; i <= 15; i++) {
      const r = statusAfterFailure(s.status, s.failedAttempts, 15);
      expect(r.lockedOut).toBe(false);
      s = { status: r.status as 'enabled', failedAttempts: r.failedAttempts };
    }
    const sixteenth = statusAfterFailure(s.status, s.failedAttempts, 15);
    expect(sixteenth).toEqual({ status: 'locked_out', failedAttempts: 16, lockedOut: true });
  });
  it('does not count failures of users that are not enabled', () => {
    expect(statusAfterFailure('bypass', 3, 5)).toEqual({
      status: 'bypass',
      failedAttempts: 3,
      lockedOut: false,
    });
  });
  it('disables an enabled user losing the only enrolled device', () => {
    expect(statusAfterDeviceDelete('enabled', 0)).toEqual({
      status: 'disabled',
      result: 'success_2fa_disabled',
    });
    expect(statusAfterDeviceDelete('enabled', 1)).toEqual({ status: 'enabled', result: 'success' });
    expect(statusAfterDeviceDelete('bypass', 0)).toEqual({ status: 'bypass', result: 'success' });
  });
  it('enables a disabled user on enrollment only', () => {
    expect(statusAfterEnrollment('disabled')).toBe('enabled');
    expect(statusAfterEnrollment('locked_out')).toBe('locked_out');
  });
});
