import type { AdminDevice, AdminUser, UserStatus } from '../../admin/admin-schemas.ts';
import type { DeviceStatus } from './admin-input.ts';

/** What the emulated Admin API stores. Views strip the internal fields before answering. */

export interface UserRecord {
  user_id: string;
  username: string;
  display_name: string;
  allowed_factors: string[];
  failed_attempts: number;
  max_attempts: number;
  service_defined_username: boolean;
  status: UserStatus;
  created_at: number;
  updated_at: number;
  archived_at?: number;
  /** Creation order, for stable sorting of equal timestamps. */
  seq: number;
}

export type DeviceRecord = AdminDevice & {
  /** Reported in device.created events; the Admin API does not show it. */
  sdk_lock_config_type: string;
  seq: number;
};

export interface EnrollmentRecord {
  enrollment_id: string;
  user_id: string;
  activation_code: string;
  activation_code_short?: string;
  activation_qrcode_url: string;
  created_at: number;
  updated_at: number;
  expires_at: number;
  /** `expired` is derived on read from `pending` and `expires_at`. */
  status: 'pending' | 'success' | 'archived';
  enrolled_device_id?: string;
  account_recovery_flow_binding_enabled: boolean;
  enrollment_flow_binding_enabled: boolean;
  success_callback_url?: string;
  seq: number;
}

export interface ActivityRecord {
  user_id: string;
  timestamp: number;
  factor?: string;
  result: 'allow' | 'deny';
  type: string;
  reason?: string;
  backend_ip: string;
  login_device_ip?: string;
  login_device_location?: string;
  trusted_device?: {
    id?: string;
    type?: string;
    ip?: string;
    location?: string;
    display_name?: string;
    app_version?: string;
  };
}

export interface BackupCodeRecord {
  /** Digits without spaces. */
  digits: string;
  /** Remaining uses; undefined for unlimited codes. */
  remaining?: number;
}

export interface OneTimeCodeRecord {
  digits: string;
  expiration: number;
}

export interface ServiceInfo {
  name: string;
  trial: boolean;
  description?: string;
  expires_at?: number;
  accounts_migration_callback_url?: string;
  session_timeout: number;
}

export function userView(u: UserRecord): AdminUser {
  return {
    user_id: u.user_id,
    username: u.username,
    display_name: u.display_name,
    allowed_factors: [...u.allowed_factors],
    failed_attempts: u.failed_attempts,
    max_attempts: u.max_attempts,
    service_defined_username: u.service_defined_username,
    status: u.status,
    created_at: u.created_at,
    updated_at: u.updated_at,
    ...(u.archived_at === undefined ? {} : { archived_at: u.archived_at }),
  };
}

/** The user fields of `user.updated` events (the dashboard's and the Admin API's alike). */
export function userEventFields(u: UserRecord): Record<string, unknown> {
  return {
    user_id: u.user_id,
    username: u.username,
    display_name: u.display_name,
    allowed_factors: [...u.allowed_factors],
    status: u.status,
    max_attempts: String(u.max_attempts),
  };
}

export function deviceView(d: DeviceRecord): AdminDevice {
  const { sdk_lock_config_type: _lock, seq: _seq, ...view } = d;
  return { ...view, capabilities: [...d.capabilities] };
}

/** docs/vendor-api.md#admin-resources: archived_at → archived; not enrolled → unenrolled; else enrolled. */
export function deviceStatus(d: DeviceRecord): DeviceStatus {
  if (d.archived_at !== undefined) return 'archived';
  return d.enrolled ? 'enrolled' : 'unenrolled';
}

/** An enrollment is `expired` when pending and past `expires_at` (docs/vendor-api.md#admin-resources). */
export function enrollmentStatus(e: EnrollmentRecord, nowSec: number): string {
  if (e.status === 'pending' && nowSec > e.expires_at) return 'expired';
  return e.status;
}

export function enrollmentView(e: EnrollmentRecord, nowSec: number): Record<string, unknown> {
  return {
    enrollment_id: e.enrollment_id,
    user_id: e.user_id,
    activation_code: e.activation_code,
    activation_qrcode_url: e.activation_qrcode_url,
    created_at: e.created_at,
    updated_at: e.updated_at,
    expires_at: e.expires_at,
    status: enrollmentStatus(e, nowSec),
    ...(e.enrolled_device_id === undefined ? {} : { enrolled_device_id: e.enrolled_device_id }),
    account_recovery_flow_binding_enabled: e.account_recovery_flow_binding_enabled,
  };
}
