import { randomUUID } from 'node:crypto';
import type { AdminDevice } from '../../admin/admin-schemas.ts';
import type { DeviceStatus, QueryParams } from './admin-input.ts';
import { type DeviceRecord, deviceStatus, deviceView } from './admin-records.ts';
import type { AdminState, EventClient } from './admin-state.ts';
import { statusAfterDeviceDelete } from './user-status.ts';

/** Admin API devices: creation, listing with filters, rename, archival. */

const CAPABILITIES: Record<AdminDevice['type'], string[]> = {
  android: ['approve', 'mobile_auth', 'mobile_totp', 'qr_code'],
  ios: ['approve', 'mobile_auth', 'mobile_totp', 'qr_code'],
  sms: ['sms'],
  hwtoken: ['hwtoken_hotp'],
};
const DEFAULT_MODEL: Record<AdminDevice['type'], string> = {
  android: 'Pixel 8',
  ios: 'iPhone 15',
  sms: '',
  hwtoken: 'Hardware token',
};

export function addDevice(
  s: AdminState,
  userId: string,
  init: Partial<DeviceRecord> & { type: AdminDevice['type']; enrolled: boolean },
  atSec = s.nowSec(),
): DeviceRecord {
  const mobile = init.type === 'android' || init.type === 'ios';
  const d: DeviceRecord = {
    device_id: init.device_id ?? randomUUID(),
    user_id: userId,
    capabilities: [...CAPABILITIES[init.type]],
    display_name: init.display_name ?? (DEFAULT_MODEL[init.type] || (init.number ?? '')),
    enrolled: init.enrolled,
    ...(init.enrolled ? { enrolled_at: init.enrolled_at ?? atSec } : {}),
    created_at: atSec,
    updated_at: atSec,
    type: init.type,
    ...(mobile
      ? {
          version: init.version ?? '4.2.0',
          version_supported: init.version_supported ?? true,
          account_recovery_flow_binding_enabled: init.account_recovery_flow_binding_enabled ?? false,
        }
      : {}),
    ...(init.number === undefined ? {} : { number: init.number }),
    ...(init.device_integrity === undefined
      ? {}
      : { device_integrity: init.device_integrity, device_integrity_updated_at: atSec }),
    ...(init.migrated_from_device_id === undefined
      ? {}
      : { migrated_from_device_id: init.migrated_from_device_id, migrated_at: init.migrated_at }),
    sdk_lock_config_type: 'none',
    seq: s.nextSeq(),
  };
  if (s.devices.has(d.device_id)) throw new Error(`duplicate device_id ${d.device_id}`);
  s.devices.set(d.device_id, d);
  const list = s.deviceIdsByUser.get(userId) ?? [];
  list.push(d.device_id);
  s.deviceIdsByUser.set(userId, list);
  return d;
}

/** GET /users/{id}/devices. */
export function listUserDevices(s: AdminState, userId: string, q: QueryParams): Record<string, unknown> {
  s.user(userId);
  const statuses = q.list('status', ['enrolled', 'unenrolled', 'archived'] as const);
  const types = q.list('type', ['android', 'ios', 'hwtoken', 'sms'] as const);
  const devices = s
    .userDevices(userId)
    .filter((d) => deviceMatches(d, statuses, types))
    .map(deviceView);
  return { count: devices.length, devices };
}

function deviceMatches(
  d: DeviceRecord,
  statuses: DeviceStatus[] | undefined,
  types: string[] | undefined,
): boolean {
  return (
    (statuses === undefined || statuses.includes(deviceStatus(d))) &&
    (types === undefined || types.includes(d.type))
  );
}

/** GET /devices (docs/vendor-api.md#admin-endpoints). */
export function listDevices(s: AdminState, q: QueryParams): Record<string, unknown> {
  const statuses = q.list('status', ['enrolled', 'unenrolled', 'archived'] as const);
  const types = q.list('type', ['android', 'ios', 'hwtoken', 'sms'] as const);
  const userId = q.string('user_id');
  const offset = q.int('offset', 0, Number.MAX_SAFE_INTEGER, 0);
  const limit = q.int('limit', 0, 100, 25);
  const source = userId === undefined ? [...s.devices.values()] : s.userDevices(userId);
  const matches = source.filter((d) => deviceMatches(d, statuses, types)).sort((a, b) => a.seq - b.seq);
  const page = matches.slice(offset, offset + limit).map(deviceView);
  return { devices: page, count: page.length, total: matches.length, limit, offset };
}

export function getDevice(s: AdminState, id: string): AdminDevice {
  return deviceView(s.device(id));
}

/** PUT /devices/{id}: `{display_name}` or undefined for 304. */
export function updateDevice(
  s: AdminState,
  id: string,
  body: { display_name?: string },
  client: EventClient,
): Record<string, unknown> | undefined {
  const d = s.activeDevice(id);
  if (body.display_name === undefined || body.display_name === d.display_name) return undefined;
  d.display_name = body.display_name;
  d.updated_at = s.nowSec();
  s.emitDeviceUpdated(d, client);
  return { display_name: d.display_name };
}

/** DELETE /devices/{id}: archives; the owner may become disabled (`success_2fa_disabled`). */
export function deleteDevice(
  s: AdminState,
  id: string,
  client: EventClient,
): { result: string; archived_at: number } {
  const d = s.activeDevice(id);
  const now = s.nowSec();
  d.enrolled = false;
  d.archived_at = now;
  d.updated_at = now;
  s.emitDeviceUpdated(d, client);
  const u = s.users.get(d.user_id);
  let result: 'success' | 'success_2fa_disabled' = 'success';
  if (u) {
    const outcome = statusAfterDeviceDelete(u.status, s.enrolledDevices(u.user_id).length);
    result = outcome.result;
    if (outcome.status !== u.status) {
      u.status = outcome.status;
      u.updated_at = now;
      s.emitUserUpdated(u, client);
    }
  }
  return { result, archived_at: now };
}

/** Devices of a user (for seeding events). */
export function devicesOf(s: AdminState, userId: string): AdminDevice[] {
  return s.userDevices(userId).map(deviceView);
}
