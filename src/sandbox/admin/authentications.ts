import { randomUUID } from 'node:crypto';
import { invalidParameter, notFound } from '../vendor-api-errors.ts';
import { insertActivity } from './activity.ts';
import type { ActivityRecord, DeviceRecord } from './admin-records.ts';
import type { AdminState, EventClient } from './admin-state.ts';
import { checkPasscode } from './passcodes.ts';
import { statusAfterFailure } from './user-status.ts';

/**
 * A simulated authentication through the (not emulated) authentication API: activity record,
 * authentication.* events, failed_attempts and lock-out. A `passcode` is checked against the
 * user's one-time and backup codes and decides the result.
 */
export function simulateAuthentication(
  s: AdminState,
  input: {
    user_id?: string;
    username?: string;
    result?: 'success' | 'failure';
    factor?: string;
    device_id?: string;
    ip?: string;
    location?: string;
    reason?: string;
    type?: string;
    totp_reused?: boolean;
    passcode?: string;
  },
  client: EventClient,
): Record<string, unknown> {
  const userId =
    input.user_id ?? (input.username === undefined ? undefined : s.userIdByName.get(input.username));
  if (userId === undefined || !s.users.has(userId)) {
    throw notFound(`user not found: ${input.user_id ?? input.username}`);
  }
  const u = s.users.get(userId)!;
  let device: DeviceRecord | undefined;
  if (input.device_id !== undefined) {
    device = s.devices.get(input.device_id);
    if (!device || device.user_id !== userId)
      throw invalidParameter('device_id', 'not a device of this user');
  } else if (input.passcode === undefined) {
    device = s.enrolledDevices(userId)[0];
  }
  let factor: string | undefined =
    input.factor ??
    (input.passcode !== undefined
      ? 'passcode'
      : device?.type === 'sms'
        ? 'sms'
        : device
          ? 'approve'
          : 'passcode');

  const sessionId = randomUUID();
  const now = s.nowSec();
  let allow: boolean;
  let reason = input.reason;
  let failureStatus = 'deny';
  switch (u.status) {
    case 'archived':
    case 'disabled':
    case 'locked_out':
      // The service refuses before any factor is used; nothing is counted.
      allow = false;
      factor = undefined;
      failureStatus = u.status === 'locked_out' ? 'locked_out' : 'deny';
      reason ??= `user ${u.status}`;
      break;
    case 'bypass':
      allow = true;
      factor = undefined;
      reason ??= 'bypass';
      break;
    case 'enabled': {
      if (input.passcode !== undefined) {
        const check = checkPasscode(s, userId, input.passcode);
        allow = check.ok;
        reason ??= check.reason;
      } else {
        allow = input.result === 'success';
      }
      if (allow) {
        u.failed_attempts = 0;
      } else {
        const next = statusAfterFailure(u.status, u.failed_attempts, u.max_attempts);
        u.failed_attempts = next.failedAttempts;
        if (next.lockedOut) {
          u.status = next.status;
          u.updated_at = now;
          s.emitUserUpdated(u, client);
        }
      }
      break;
    }
  }
  const loginIp = input.ip ?? '198.51.100.10';
  const record: ActivityRecord = {
    user_id: userId,
    timestamp: now,
    ...(factor === undefined ? {} : { factor }),
    result: allow ? 'allow' : 'deny',
    type: input.type ?? 'Login',
    ...(reason === undefined ? {} : { reason }),
    backend_ip: client?.ip ?? '127.0.0.1',
    login_device_ip: loginIp,
    ...(input.location === undefined ? {} : { login_device_location: input.location }),
    ...(device
      ? {
          trusted_device: {
            id: device.device_id,
            type: device.type,
            display_name: device.display_name,
            ...(device.version === undefined ? {} : { app_version: device.version }),
          },
        }
      : {}),
  };
  insertActivity(s, record);

  const deviceId = device?.device_id ?? '';
  s.events.emitServiceEvent(
    'authentication.started',
    {
      device_id: deviceId,
      factor: factor ?? '',
      session_id: sessionId,
      fallback_session_id: '',
      user_id: userId,
    },
    client,
  );
  if (input.totp_reused) {
    s.events.emitServiceEvent(
      'authentication.totp.reused',
      {
        device_id: deviceId,
        user_id: userId,
        source_device_kind: device?.type === 'hwtoken' ? 'hwtoken_totp' : 'mobile_totp',
      },
      client,
    );
  }
  const loginPort = String(40000 + (now % 20000));
  if (allow) {
    s.events.emitServiceEvent(
      'authentication.succeeded',
      {
        device_id: deviceId,
        login_device_ip_address: loginIp,
        login_device_port: loginPort,
        session_id: sessionId,
        status: 'allow',
        user_id: userId,
      },
      client,
    );
  } else {
    s.events.emitServiceEvent(
      'authentication.failed',
      {
        device_id: deviceId,
        login_device_ip_address: loginIp,
        login_device_port: loginPort,
        reason: reason ?? 'denied',
        session_id: sessionId,
        status: failureStatus,
        user_id: userId,
      },
      client,
    );
  }
  return {
    user_id: userId,
    result: allow ? 'allow' : 'deny',
    status: u.status,
    failed_attempts: u.failed_attempts,
    max_attempts: u.max_attempts,
    session_id: sessionId,
    activity: record,
  };
}
