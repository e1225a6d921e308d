import { randomUUID } from 'node:crypto';
import { gone, invalidParameter, VendorApiError } from '../vendor-api-errors.ts';
import {
  checkCallbackUrl,
  type EnrollmentBody,
  PHONE_NUMBER_PATTERN,
  type QueryParams,
} from './admin-input.ts';
import {
  deviceView,
  type EnrollmentRecord,
  enrollmentStatus,
  enrollmentView,
  type UserRecord,
  userView,
} from './admin-records.ts';
import { ADMIN_DEFAULTS, type AdminState, type EventClient, PLACEHOLDER_PNG } from './admin-state.ts';
import type { CallbackDelivery } from './callback-delivery.ts';
import { randomActivationCode, randomDigits } from './codes.ts';
import { addDevice } from './devices.ts';
import { statusAfterEnrollment } from './user-status.ts';

/**
 * Admin API enrollments: starting one (mobile activation or SMS device), listing, invalidation, and
 * the control API's completion of an activation or SMS verification.
 */

/**
 * Checks which enrollment variant a body asks for before anything is created, so a refused
 * variant leaves no half-made user behind.
 */
export function checkEnrollmentBody(s: AdminState, body: EnrollmentBody): void {
  if (body.fido) {
    throw new VendorApiError(40300, 'Forbidden', 'the Service has no WebAuthn relying-party configuration');
  }
  // The sandbox stores no hardware tokens, so every `hwtoken_id` names a missing one: 400 / 40000
  // (docs/vendor-api.md#admin-users), not the 501 of the hardware-token endpoints themselves.
  if (body.hwtoken_id !== undefined) throw invalidParameter('hwtoken_id', 'no hardware token with this id');
  if (body.phone_number !== undefined) {
    if (!PHONE_NUMBER_PATTERN.test(body.phone_number)) {
      throw new VendorApiError(40001, 'Invalid phone number', 'phone_number: international format required');
    }
    return;
  }
  if (body.success_callback_url !== undefined) {
    checkCallbackUrl('success_callback_url', body.success_callback_url, s.opts.allowInsecureCallbacks);
  }
}

/** POST /users/{id}/devices and POST /devices. */
export function addUserDevice(
  s: AdminState,
  userId: string,
  body: EnrollmentBody,
  origin: string,
  client: EventClient,
): Record<string, unknown> {
  const u = s.activeUser(userId);
  checkEnrollmentBody(s, body);
  return enroll(s, u, body, origin, client);
}

export function enroll(
  s: AdminState,
  u: UserRecord,
  body: EnrollmentBody,
  origin: string,
  client: EventClient,
): Record<string, unknown> {
  if (body.phone_number !== undefined) {
    const d = addDevice(s, u.user_id, {
      type: 'sms',
      number: body.phone_number,
      display_name: body.phone_number,
      enrolled: false,
    });
    d.sms_activation_code = randomDigits(6);
    d.sms_code_expires_at = s.nowSec() + 300;
    s.emitDeviceCreated(d, client);
    return { device_id: d.device_id, user_id: u.user_id, username: u.username };
  }
  const now = s.nowSec();
  const enrollmentId = randomUUID();
  const code = randomActivationCode();
  const e: EnrollmentRecord = {
    enrollment_id: enrollmentId,
    user_id: u.user_id,
    activation_code: code,
    ...(body.short_code ? { activation_code_short: randomDigits(8) } : {}),
    activation_qrcode_url: `${origin}/sandbox/qrcode/${enrollmentId}.png`,
    created_at: now,
    updated_at: now,
    expires_at: now + (body.valid_secs ?? ADMIN_DEFAULTS.validSecs),
    status: 'pending',
    account_recovery_flow_binding_enabled: body.account_recovery_flow_binding_enabled ?? false,
    enrollment_flow_binding_enabled: body.enrollment_flow_binding_enabled ?? false,
    ...(body.success_callback_url === undefined ? {} : { success_callback_url: body.success_callback_url }),
    seq: s.nextSeq(),
  };
  s.enrollments.set(enrollmentId, e);
  const list = s.enrollmentIdsByUser.get(u.user_id) ?? [];
  list.push(enrollmentId);
  s.enrollmentIdsByUser.set(u.user_id, list);
  s.events.emitServiceEvent(
    'device.enrollment.started',
    { device_type: 'sdk', enrollment_id: enrollmentId, user_id: u.user_id },
    client,
  );
  const link = `${ADMIN_DEFAULTS.universalLinkBase}?activation_code=${code}`;
  return {
    activation_code: code,
    enrollment_id: enrollmentId,
    activation_code_uri: `${ADMIN_DEFAULTS.appScheme}://enroll?activation_code=${code}`,
    activation_universal_link: link,
    activation_code_universal_link: link,
    activation_qrcode_data_uri: `data:image/png;base64,${PLACEHOLDER_PNG.toString('base64')}`,
    activation_qrcode_url: e.activation_qrcode_url,
    ...(e.activation_code_short === undefined ? {} : { activation_code_short: e.activation_code_short }),
    expiration: e.expires_at,
    user_id: u.user_id,
    username: u.username,
  };
}

export function hasEnrollment(s: AdminState, enrollmentId: string): boolean {
  return s.enrollments.has(enrollmentId);
}

export function listUserEnrollments(s: AdminState, userId: string): Record<string, unknown> {
  s.user(userId);
  const now = s.nowSec();
  const enrollments = (s.enrollmentIdsByUser.get(userId) ?? []).map((id) =>
    enrollmentView(s.enrollments.get(id)!, now),
  );
  return { count: enrollments.length, enrollments };
}

export function listEnrollments(s: AdminState, q: QueryParams): Record<string, unknown> {
  const userId = q.string('user_id');
  const offset = q.int('offset', 0, Number.MAX_SAFE_INTEGER, 0);
  const limit = q.int('limit', 0, 100, 25);
  const now = s.nowSec();
  const all = [...s.enrollments.values()]
    .filter((e) => userId === undefined || e.user_id === userId)
    .sort((a, b) => a.seq - b.seq);
  const page = all.slice(offset, offset + limit).map((e) => enrollmentView(e, now));
  return { enrollments: page, count: page.length, total: all.length, limit, offset };
}

export function getEnrollment(s: AdminState, id: string): Record<string, unknown> {
  return enrollmentView(s.enrollment(id), s.nowSec());
}

export function invalidateEnrollment(s: AdminState, e: EnrollmentRecord, client: EventClient): void {
  e.status = 'archived';
  e.updated_at = s.nowSec();
  s.events.emitServiceEvent(
    'device.enrollment.invalidated',
    { enrollment_id: e.enrollment_id, user_id: e.user_id },
    client,
  );
}

/** DELETE /enrollments/{id}: pending → archived; 400 once succeeded or expired (1.23.0). */
export function deleteEnrollment(s: AdminState, id: string, client: EventClient): void {
  const e = s.enrollment(id);
  const status = enrollmentStatus(e, s.nowSec());
  if (status === 'archived') throw gone(`enrollment already archived: ${id}`);
  if (status !== 'pending') throw invalidParameter('enrollment_id', `enrollment already ${status}`);
  invalidateEnrollment(s, e, client);
}

/**
 * Device activation finished: pending → success, the device is created and enrolled, the owner is
 * enabled if it was disabled, and the success callback goes out when one was asked for.
 */
export async function completeEnrollment(
  s: AdminState,
  enrollmentId: string,
  init: { type?: 'android' | 'ios'; display_name?: string; version?: string; device_integrity?: string },
  client: EventClient,
): Promise<Record<string, unknown>> {
  const e = s.enrollment(enrollmentId);
  const now = s.nowSec();
  const status = enrollmentStatus(e, now);
  if (status !== 'pending') throw invalidParameter('enrollment_id', `enrollment is ${status}, not pending`);
  const u = s.activeUser(e.user_id);
  const d = addDevice(s, u.user_id, {
    type: init.type ?? 'android',
    enrolled: true,
    ...(init.display_name === undefined ? {} : { display_name: init.display_name }),
    ...(init.version === undefined ? {} : { version: init.version }),
    ...(init.device_integrity === undefined ? {} : { device_integrity: init.device_integrity }),
    account_recovery_flow_binding_enabled: e.account_recovery_flow_binding_enabled,
  });
  e.status = 'success';
  e.enrolled_device_id = d.device_id;
  e.updated_at = now;
  s.events.emitServiceEvent(
    'device.enrollment.succeeded',
    { device_type: 'sdk', enrollment_id: e.enrollment_id, device_id: d.device_id, user_id: u.user_id },
    client,
  );
  s.emitDeviceCreated(d, client);
  enableAfterEnrollment(s, u, client);
  let callback: CallbackDelivery | undefined;
  if (e.success_callback_url !== undefined) {
    callback = await s.callbacks.send('enrollment_success', e.success_callback_url, {
      user_id: u.user_id,
      username: u.username,
      enrollment_id: e.enrollment_id,
      activation_code: e.activation_code,
      device_id: d.device_id,
      result: 'success',
    });
  }
  return {
    enrollment: enrollmentView(e, now),
    device: deviceView(d),
    user: userView(u),
    ...(callback ? { callback } : {}),
  };
}

function enableAfterEnrollment(s: AdminState, u: UserRecord, client: EventClient): void {
  const next = statusAfterEnrollment(u.status);
  if (next !== u.status) {
    u.status = next;
    u.updated_at = s.nowSec();
    s.emitUserUpdated(u, client);
  }
}

/** An SMS device verified through the authentication API: it becomes enrolled. */
export function verifySmsDevice(
  s: AdminState,
  deviceId: string,
  client: EventClient,
): Record<string, unknown> {
  const d = s.activeDevice(deviceId);
  if (d.type !== 'sms') throw invalidParameter('device_id', 'not an SMS device');
  if (d.enrolled) throw invalidParameter('device_id', 'already verified');
  const u = s.activeUser(d.user_id);
  const now = s.nowSec();
  d.enrolled = true;
  d.enrolled_at = now;
  d.updated_at = now;
  s.events.emitServiceEvent(
    'device.enrollment.succeeded',
    { device_type: 'sms', device_id: d.device_id, user_id: d.user_id },
    client,
  );
  s.emitDeviceUpdated(d, client);
  enableAfterEnrollment(s, u, client);
  return { device: deviceView(d), user: userView(u) };
}
