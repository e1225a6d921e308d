import { createHash, randomUUID } from 'node:crypto';
import type { AdminDevice, AdminUser } from '../../admin/admin-schemas.ts';
import type { EventSink, SandboxModuleContext } from '../sandbox-module.ts';
import { gone, invalidParameter, notFound, VendorApiError } from '../vendor-api-errors.ts';
import {
  checkCallbackUrl,
  type DeviceStatus,
  type EnrollmentBody,
  FACTORS,
  PHONE_NUMBER_PATTERN,
  type QueryParams,
  USER_STATUSES,
} from './admin-input.ts';
import {
  type ActivityRecord,
  type BackupCodeRecord,
  type DeviceRecord,
  deviceStatus,
  deviceView,
  type EnrollmentRecord,
  enrollmentStatus,
  enrollmentView,
  type OneTimeCodeRecord,
  type ServiceInfo,
  type UserRecord,
  userEventFields,
  userView,
} from './admin-records.ts';
import type { CallbackDelivery, CallbackSender } from './callback-delivery.ts';
import { randomActivationCode, randomDigits, spaceDigits, unspaceDigits } from './codes.ts';
import {
  type SettableStatus,
  statusAfterDeviceDelete,
  statusAfterEnrollment,
  statusAfterFailure,
  statusAfterPut,
} from './user-status.ts';

/** Who caused an event (the HTTP client), for the Log API's client_ip_address / client_port. */
export type EventClient = { ip: string; port: string } | undefined;

/** Defaults a real vendor configures per Service; kept here so one edit changes them. */
export const ADMIN_DEFAULTS = {
  maxAttempts: 15,
  allowedFactors: ['approve', 'mobile_auth', 'mobile_totp', 'passcode', 'qr_code', 'sms'],
  validSecs: 604_800,
  sessionTimeout: 60,
  appScheme: 'svcauth',
  universalLinkBase: 'https://enroll.sandbox.invalid/enroll',
  /** Activity `since` may reach this far back ("one month"), seconds. */
  activityMaxAgeSecs: 31 * 86_400,
  /** Active users `since` may reach this far back ("two years"), seconds. */
  activeUsersMaxAgeSecs: 2 * 366 * 86_400,
} as const;

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

/** A 1×1 PNG: the sandbox's stand-in for QR code images. */
export const PLACEHOLDER_PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=',
  'base64',
);

/** Factors in their canonical order, `passcode` always present (admin-api.md). */
export function normalizeFactors(factors: readonly string[]): string[] {
  const set = new Set(factors);
  set.add('passcode');
  return FACTORS.filter((f) => set.has(f));
}

export interface AdminServiceOptions {
  /** Accept http://127.0.0.1 / localhost callback URLs (sandbox convenience). */
  allowInsecureCallbacks: boolean;
}

/**
 * State and rules of the emulated Admin API for one Service. Routes translate HTTP into these calls;
 * the control API (simulated authentications, enrollment completion, migrations) calls them too.
 */
export class AdminService {
  readonly #ctx: SandboxModuleContext;
  readonly #events: EventSink;
  readonly #callbacks: CallbackSender;
  readonly #opts: AdminServiceOptions;

  #users = new Map<string, UserRecord>();
  #userIdByName = new Map<string, string>();
  #devices = new Map<string, DeviceRecord>();
  #deviceIdsByUser = new Map<string, string[]>();
  #enrollments = new Map<string, EnrollmentRecord>();
  #enrollmentIdsByUser = new Map<string, string[]>();
  /** Ascending by timestamp. */
  #activity: ActivityRecord[] = [];
  #backupCodes = new Map<string, BackupCodeRecord[]>();
  #oneTimeCodes = new Map<string, OneTimeCodeRecord>();
  #info: ServiceInfo = AdminService.#defaultInfo();
  #logo: { id: string; bytes: Buffer } | undefined;
  #seq = 0;

  constructor(
    ctx: SandboxModuleContext,
    events: EventSink,
    callbacks: CallbackSender,
    opts: AdminServiceOptions,
  ) {
    this.#ctx = ctx;
    this.#events = events;
    this.#callbacks = callbacks;
    this.#opts = opts;
  }

  static #defaultInfo(): ServiceInfo {
    return {
      name: 'riskgate sandbox service',
      trial: false,
      description: 'Emulated service for riskgate',
      session_timeout: ADMIN_DEFAULTS.sessionTimeout,
    };
  }

  /** Forgets everything (POST /sandbox/reset). */
  clear(): void {
    this.#users.clear();
    this.#userIdByName.clear();
    this.#devices.clear();
    this.#deviceIdsByUser.clear();
    this.#enrollments.clear();
    this.#enrollmentIdsByUser.clear();
    this.#activity = [];
    this.#backupCodes.clear();
    this.#oneTimeCodes.clear();
    this.#info = AdminService.#defaultInfo();
    this.#logo = undefined;
    this.#seq = 0;
  }

  nowSec(): number {
    return Math.floor(this.#ctx.clock.now() / 1000);
  }

  // ---------------------------------------------------------------- users

  #user(id: string): UserRecord {
    const u = this.#users.get(id);
    if (!u) throw notFound(`user not found: ${id}`);
    return u;
  }

  /** The user, unless unknown (404) or archived (410). */
  #activeUser(id: string): UserRecord {
    const u = this.#user(id);
    if (u.status === 'archived') throw gone('user already archived');
    return u;
  }

  getUser(id: string): AdminUser {
    return userView(this.#user(id));
  }

  findUserIdByName(username: string): string | undefined {
    return this.#userIdByName.get(username);
  }

  #userDevices(userId: string): DeviceRecord[] {
    const ids = this.#deviceIdsByUser.get(userId) ?? [];
    return ids.map((id) => this.#devices.get(id)!);
  }

  #enrolledDevices(userId: string): DeviceRecord[] {
    return this.#userDevices(userId).filter((d) => deviceStatus(d) === 'enrolled');
  }

  #emitUserUpdated(u: UserRecord, client: EventClient): void {
    this.#events.emitServiceEvent('user.updated', userEventFields(u), client);
  }

  #emitDeviceUpdated(d: DeviceRecord, client: EventClient): void {
    const mobile = d.type === 'android' || d.type === 'ios';
    this.#events.emitServiceEvent(
      'device.updated',
      {
        device_id: d.device_id,
        enrolled: d.enrolled,
        ...(d.archived_at === undefined ? {} : { archived_at: d.archived_at }),
        display_name: d.display_name,
        ...(mobile
          ? { account_recovery_flow_binding_enabled: d.account_recovery_flow_binding_enabled ?? false }
          : {}),
        user_id: d.user_id,
      },
      client,
    );
  }

  #emitDeviceCreated(d: DeviceRecord, client: EventClient): void {
    this.#events.emitServiceEvent(
      'device.created',
      {
        device_id: d.device_id,
        enrolled: d.enrolled,
        ...(d.enrolled_at ? { enrolled_at: d.enrolled_at } : {}),
        sdk_lock_config_type: d.sdk_lock_config_type,
        user_id: d.user_id,
      },
      client,
    );
  }

  /** GET /users with every filter, sort and the page limits of admin-api.md. */
  lookupUsers(q: QueryParams): Record<string, unknown> {
    const username = q.string('username');
    const displayName = q.string('display_name')?.toLowerCase();
    const factors = q.list('allowed_factors', FACTORS);
    const sdu = q.bool('service_defined_username');
    const status = q.oneOf('status', USER_STATUSES);
    const offset = q.int('offset', 0, Number.MAX_SAFE_INTEGER, 0);
    const limit = q.int('limit', 0, 100, 25);
    const sortBy = q.oneOf(
      'sort_by',
      ['username', 'display_name', 'created_at', 'updated_at'] as const,
      'created_at',
    );
    const order = q.oneOf('order', ['asc', 'desc'] as const, 'asc');

    const matches = [...this.#users.values()].filter(
      (u) =>
        (username === undefined || u.username.includes(username)) &&
        (displayName === undefined || u.display_name.toLowerCase().includes(displayName)) &&
        (factors === undefined || factors.every((f) => u.allowed_factors.includes(f))) &&
        (sdu === undefined || u.service_defined_username === sdu) &&
        (status === undefined || u.status === status),
    );
    const dir = order === 'asc' ? 1 : -1;
    matches.sort((a, b) => {
      const av = a[sortBy];
      const bv = b[sortBy];
      const c = av < bv ? -1 : av > bv ? 1 : a.seq - b.seq;
      return c * dir;
    });
    const page = matches.slice(offset, offset + limit).map(userView);
    return { users: page, count: page.length, total: matches.length, limit, offset };
  }

  #newUser(username: string | undefined, displayName: string | undefined): UserRecord {
    if (username !== undefined && this.#userIdByName.has(username)) {
      throw invalidParameter('username', 'already exists');
    }
    const now = this.nowSec();
    let name = username;
    while (name === undefined || this.#userIdByName.has(name)) {
      name = `user-${randomUUID().slice(0, 8)}`;
    }
    const u: UserRecord = {
      user_id: randomUUID(),
      username: name,
      display_name: displayName ?? '',
      allowed_factors: [...ADMIN_DEFAULTS.allowedFactors],
      failed_attempts: 0,
      max_attempts: ADMIN_DEFAULTS.maxAttempts,
      service_defined_username: username !== undefined,
      status: 'disabled',
      created_at: now,
      updated_at: now,
      seq: ++this.#seq,
    };
    this.#users.set(u.user_id, u);
    this.#userIdByName.set(u.username, u.user_id);
    return u;
  }

  /**
   * Checks which enrollment variant a body asks for before anything is created, so a refused
   * variant leaves no half-made user behind.
   */
  #checkEnrollmentBody(body: EnrollmentBody): void {
    if (body.fido) {
      throw new VendorApiError(40300, 'Forbidden', 'the Service has no WebAuthn relying-party configuration');
    }
    if (body.hwtoken_id !== undefined) {
      throw new VendorApiError(50100, 'Not implemented', 'hardware token enrollment is not emulated');
    }
    if (body.phone_number !== undefined) {
      if (!PHONE_NUMBER_PATTERN.test(body.phone_number)) {
        throw new VendorApiError(
          40001,
          'Invalid phone number',
          'phone_number: international format required',
        );
      }
      return;
    }
    if (body.success_callback_url !== undefined) {
      checkCallbackUrl('success_callback_url', body.success_callback_url, this.#opts.allowInsecureCallbacks);
    }
  }

  /** POST /users: a new user with a mobile enrollment or an SMS device. */
  createUser(
    body: EnrollmentBody & { username?: string; display_name?: string },
    origin: string,
    client: EventClient,
  ): Record<string, unknown> {
    this.#checkEnrollmentBody(body);
    const u = this.#newUser(body.username, body.display_name);
    return this.#enroll(u, body, origin, client);
  }

  /** POST /users/{id}/devices and POST /devices. */
  addUserDevice(
    userId: string,
    body: EnrollmentBody,
    origin: string,
    client: EventClient,
  ): Record<string, unknown> {
    const u = this.#activeUser(userId);
    this.#checkEnrollmentBody(body);
    return this.#enroll(u, body, origin, client);
  }

  #enroll(u: UserRecord, body: EnrollmentBody, origin: string, client: EventClient): Record<string, unknown> {
    if (body.phone_number !== undefined) {
      const d = this.#addDevice(u.user_id, {
        type: 'sms',
        number: body.phone_number,
        display_name: body.phone_number,
        enrolled: false,
      });
      d.sms_activation_code = randomDigits(6);
      d.sms_code_expires_at = this.nowSec() + 300;
      this.#emitDeviceCreated(d, client);
      return { device_id: d.device_id, user_id: u.user_id, username: u.username };
    }
    const now = this.nowSec();
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
      seq: ++this.#seq,
    };
    this.#enrollments.set(enrollmentId, e);
    const list = this.#enrollmentIdsByUser.get(u.user_id) ?? [];
    list.push(enrollmentId);
    this.#enrollmentIdsByUser.set(u.user_id, list);
    this.#events.emitServiceEvent(
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

  hasEnrollment(enrollmentId: string): boolean {
    return this.#enrollments.has(enrollmentId);
  }

  /**
   * PUT /users/{id}: returns only the updated attributes (plus max_attempts when updated), or
   * undefined for 304.
   */
  updateUser(
    id: string,
    body: {
      allowed_factors?: string[];
      status?: SettableStatus;
      username?: string;
      display_name?: string;
      max_attempts?: number;
    },
    client: EventClient,
  ): Record<string, unknown> | undefined {
    const u = this.#activeUser(id);
    const changed: Record<string, unknown> = {};
    if (body.allowed_factors !== undefined) {
      const next = normalizeFactors(body.allowed_factors);
      if (next.join(',') !== u.allowed_factors.join(',')) changed.allowed_factors = next;
    }
    if (body.username !== undefined && body.username !== u.username) {
      if (this.#userIdByName.has(body.username)) throw invalidParameter('username', 'already exists');
      changed.username = body.username;
    }
    if (body.display_name !== undefined && body.display_name !== u.display_name) {
      changed.display_name = body.display_name;
    }
    if (body.max_attempts !== undefined && body.max_attempts !== u.max_attempts) {
      changed.max_attempts = body.max_attempts;
    }
    let unenroll: DeviceRecord[] = [];
    let resetFailures = false;
    if (body.status !== undefined) {
      const enrolled = this.#enrolledDevices(u.user_id);
      const outcome = statusAfterPut(body.status, enrolled.length > 0);
      unenroll = outcome.unenrollDevices ? enrolled : [];
      resetFailures = outcome.resetFailedAttempts && u.failed_attempts > 0;
      // A status PUT that only resets the lock-out count or unenrolls devices still modified the user.
      if (outcome.status !== u.status || resetFailures || unenroll.length > 0)
        changed.status = outcome.status;
    }
    if (Object.keys(changed).length === 0) return undefined;

    const now = this.nowSec();
    if (changed.username !== undefined) {
      this.#userIdByName.delete(u.username);
      u.username = changed.username as string;
      this.#userIdByName.set(u.username, u.user_id);
    }
    if (changed.allowed_factors !== undefined) u.allowed_factors = changed.allowed_factors as string[];
    if (changed.display_name !== undefined) u.display_name = changed.display_name as string;
    if (changed.max_attempts !== undefined) u.max_attempts = changed.max_attempts as number;
    if (changed.status !== undefined) u.status = changed.status as SettableStatus;
    if (resetFailures) u.failed_attempts = 0;
    u.updated_at = now;
    for (const d of unenroll) {
      d.enrolled = false;
      d.updated_at = now;
      this.#emitDeviceUpdated(d, client);
    }
    this.#emitUserUpdated(u, client);
    return changed;
  }

  /** DELETE /users/{id}: archives the user, its devices and pending enrollments. */
  archiveUser(id: string, client: EventClient): void {
    const u = this.#activeUser(id);
    const now = this.nowSec();
    u.status = 'archived';
    u.archived_at = now;
    u.updated_at = now;
    for (const d of this.#userDevices(id)) {
      if (d.archived_at !== undefined) continue;
      d.enrolled = false;
      d.archived_at = now;
      d.updated_at = now;
      this.#emitDeviceUpdated(d, client);
    }
    for (const eid of this.#enrollmentIdsByUser.get(id) ?? []) {
      const e = this.#enrollments.get(eid)!;
      if (enrollmentStatus(e, now) === 'pending') this.#invalidateEnrollment(e, client);
    }
    this.#oneTimeCodes.delete(id);
    this.#emitUserUpdated(u, client);
  }

  // -------------------------------------------------------------- devices

  #addDevice(
    userId: string,
    init: Partial<DeviceRecord> & { type: AdminDevice['type']; enrolled: boolean },
    atSec = this.nowSec(),
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
      seq: ++this.#seq,
    };
    if (this.#devices.has(d.device_id)) throw new Error(`duplicate device_id ${d.device_id}`);
    this.#devices.set(d.device_id, d);
    const list = this.#deviceIdsByUser.get(userId) ?? [];
    list.push(d.device_id);
    this.#deviceIdsByUser.set(userId, list);
    return d;
  }

  /** GET /users/{id}/devices. */
  listUserDevices(userId: string, q: QueryParams): Record<string, unknown> {
    this.#user(userId);
    const statuses = q.list('status', ['enrolled', 'unenrolled', 'archived'] as const);
    const types = q.list('type', ['android', 'ios', 'hwtoken', 'sms'] as const);
    const devices = this.#userDevices(userId)
      .filter((d) => this.#deviceMatches(d, statuses, types))
      .map(deviceView);
    return { count: devices.length, devices };
  }

  #deviceMatches(
    d: DeviceRecord,
    statuses: DeviceStatus[] | undefined,
    types: string[] | undefined,
  ): boolean {
    return (
      (statuses === undefined || statuses.includes(deviceStatus(d))) &&
      (types === undefined || types.includes(d.type))
    );
  }

  /** GET /devices (CONTRACT §5). */
  listDevices(q: QueryParams): Record<string, unknown> {
    const statuses = q.list('status', ['enrolled', 'unenrolled', 'archived'] as const);
    const types = q.list('type', ['android', 'ios', 'hwtoken', 'sms'] as const);
    const userId = q.string('user_id');
    const offset = q.int('offset', 0, Number.MAX_SAFE_INTEGER, 0);
    const limit = q.int('limit', 0, 100, 25);
    const source = userId === undefined ? [...this.#devices.values()] : this.#userDevices(userId);
    const matches = source
      .filter((d) => this.#deviceMatches(d, statuses, types))
      .sort((a, b) => a.seq - b.seq);
    const page = matches.slice(offset, offset + limit).map(deviceView);
    return { devices: page, count: page.length, total: matches.length, limit, offset };
  }

  #device(id: string): DeviceRecord {
    const d = this.#devices.get(id);
    if (!d) throw notFound(`device not found: ${id}`);
    return d;
  }

  #activeDevice(id: string): DeviceRecord {
    const d = this.#device(id);
    if (d.archived_at !== undefined) throw gone(`device already archived: ${id}`);
    return d;
  }

  getDevice(id: string): AdminDevice {
    return deviceView(this.#device(id));
  }

  /** PUT /devices/{id}: `{display_name}` or undefined for 304. */
  updateDevice(
    id: string,
    body: { display_name?: string },
    client: EventClient,
  ): Record<string, unknown> | undefined {
    const d = this.#activeDevice(id);
    if (body.display_name === undefined || body.display_name === d.display_name) return undefined;
    d.display_name = body.display_name;
    d.updated_at = this.nowSec();
    this.#emitDeviceUpdated(d, client);
    return { display_name: d.display_name };
  }

  /** DELETE /devices/{id}: archives; the owner may become disabled (`success_2fa_disabled`). */
  deleteDevice(id: string, client: EventClient): { result: string; archived_at: number } {
    const d = this.#activeDevice(id);
    const now = this.nowSec();
    d.enrolled = false;
    d.archived_at = now;
    d.updated_at = now;
    this.#emitDeviceUpdated(d, client);
    const u = this.#users.get(d.user_id);
    let result: 'success' | 'success_2fa_disabled' = 'success';
    if (u) {
      const outcome = statusAfterDeviceDelete(u.status, this.#enrolledDevices(u.user_id).length);
      result = outcome.result;
      if (outcome.status !== u.status) {
        u.status = outcome.status;
        u.updated_at = now;
        this.#emitUserUpdated(u, client);
      }
    }
    return { result, archived_at: now };
  }

  // ---------------------------------------------------------- enrollments

  listUserEnrollments(userId: string): Record<string, unknown> {
    this.#user(userId);
    const now = this.nowSec();
    const enrollments = (this.#enrollmentIdsByUser.get(userId) ?? []).map((id) =>
      enrollmentView(this.#enrollments.get(id)!, now),
    );
    return { count: enrollments.length, enrollments };
  }

  listEnrollments(q: QueryParams): Record<string, unknown> {
    const userId = q.string('user_id');
    const offset = q.int('offset', 0, Number.MAX_SAFE_INTEGER, 0);
    const limit = q.int('limit', 0, 100, 25);
    const now = this.nowSec();
    const all = [...this.#enrollments.values()]
      .filter((e) => userId === undefined || e.user_id === userId)
      .sort((a, b) => a.seq - b.seq);
    const page = all.slice(offset, offset + limit).map((e) => enrollmentView(e, now));
    return { enrollments: page, count: page.length, total: all.length, limit, offset };
  }

  #enrollment(id: string): EnrollmentRecord {
    const e = this.#enrollments.get(id);
    if (!e) throw notFound(`enrollment not found: ${id}`);
    return e;
  }

  getEnrollment(id: string): Record<string, unknown> {
    return enrollmentView(this.#enrollment(id), this.nowSec());
  }

  #invalidateEnrollment(e: EnrollmentRecord, client: EventClient): void {
    e.status = 'archived';
    e.updated_at = this.nowSec();
    this.#events.emitServiceEvent(
      'device.enrollment.invalidated',
      { enrollment_id: e.enrollment_id, user_id: e.user_id },
      client,
    );
  }

  /** DELETE /enrollments/{id}: pending → archived; 400 once succeeded or expired (1.23.0). */
  deleteEnrollment(id: string, client: EventClient): void {
    const e = this.#enrollment(id);
    const status = enrollmentStatus(e, this.nowSec());
    if (status === 'archived') throw gone(`enrollment already archived: ${id}`);
    if (status !== 'pending') throw invalidParameter('enrollment_id', `enrollment already ${status}`);
    this.#invalidateEnrollment(e, client);
  }

  // ------------------------------------------------- backup and one-time codes

  getBackupCodes(userId: string): Record<string, unknown> {
    this.#user(userId);
    return { backup_codes: (this.#backupCodes.get(userId) ?? []).map(backupCodeView) };
  }

  /** POST /users/{id}/backup_codes: replaces the whole list. */
  createBackupCodes(userId: string, body: { count?: number; length?: number; reuse_count?: number }) {
    this.#activeUser(userId);
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
    this.#backupCodes.set(userId, codes);
    return { backup_codes: codes.map(backupCodeView) };
  }

  /** POST /users/{id}/one_time_code: the new code replaces any earlier one. */
  createOneTimeCode(userId: string, body: { length?: number; valid_secs?: number }) {
    this.#activeUser(userId);
    const digits = randomDigits(body.length ?? 6);
    const expiration = this.nowSec() + (body.valid_secs ?? 180);
    this.#oneTimeCodes.set(userId, { digits, expiration });
    return { one_time_code: spaceDigits(digits), expiration };
  }

  /**
   * Checks a passcode against the user's one-time code and backup codes, consuming what matched.
   * Returns the activity reason of the outcome.
   */
  #checkPasscode(userId: string, passcode: string): { ok: boolean; reason: string } {
    const digits = unspaceDigits(passcode);
    const otc = this.#oneTimeCodes.get(userId);
    if (otc && otc.digits === digits) {
      this.#oneTimeCodes.delete(userId);
      if (this.nowSec() > otc.expiration) return { ok: false, reason: 'one_time_code expired' };
      return { ok: true, reason: 'one_time_code' };
    }
    const codes = this.#backupCodes.get(userId) ?? [];
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

  // ------------------------------------------------------------- activity

  #activityWindow(q: QueryParams, defaultSince: number): number {
    const now = this.nowSec();
    const since = q.int('since', 0, Number.MAX_SAFE_INTEGER) ?? defaultSince;
    if (since < now - ADMIN_DEFAULTS.activityMaxAgeSecs) {
      throw invalidParameter('since', 'must be at most one month in the past');
    }
    return since;
  }

  /** GET /activity. */
  serviceActivity(q: QueryParams): Record<string, unknown> {
    const since = this.#activityWindow(q, startOfMonthSec(this.#ctx.clock.now()));
    const until = q.int('until', 0, Number.MAX_SAFE_INTEGER, 0);
    const offset = q.int('offset', 0, Number.MAX_SAFE_INTEGER, 0);
    const limit = q.int('limit', 0, 1000, 1000);
    const factor = q.string('factor');
    const result = q.oneOf('result', ['allow', 'deny'] as const);
    const hasReason = q.has('reason');
    const reason = q.string('reason');
    const type = q.string('type');
    const location = q.string('location');
    const matches = this.#activity.filter(
      (a) =>
        a.timestamp >= since &&
        (until === 0 || a.timestamp <= until) &&
        (factor === undefined || a.factor === factor) &&
        (result === undefined || a.result === result) &&
        (!hasReason || (reason === '' ? a.reason === undefined : a.reason === reason)) &&
        (type === undefined || a.type === type) &&
        (location === undefined || a.login_device_location === location),
    );
    const page = matches.slice(offset, offset + limit);
    return { activity: page, count: page.length, total: matches.length, limit, offset };
  }

  /** GET /users/{id}/activity (ascending; no since = one month back, CONTRACT §5). */
  userActivity(userId: string, q: QueryParams): Record<string, unknown> {
    this.#user(userId);
    const since = this.#activityWindow(q, this.nowSec() - ADMIN_DEFAULTS.activityMaxAgeSecs);
    const deviceId = q.string('device_id');
    const limit = q.int('limit', 1, 1000, 1000);
    const records = this.#activity
      .filter(
        (a) =>
          a.user_id === userId &&
          a.timestamp >= since &&
          (deviceId === undefined || a.trusted_device?.id === deviceId),
      )
      .slice(0, limit);
    return { activity: records, count: records.length };
  }

  /** GET /active_users: users with an allowed authentication in [since, until]. */
  activeUsers(q: QueryParams): Record<string, unknown> {
    const nowMs = this.#ctx.clock.now();
    const now = Math.floor(nowMs / 1000);
    const endOfMonth = startOfNextMonthSec(nowMs) - 1;
    const since = q.int('since', 0, Number.MAX_SAFE_INTEGER, startOfMonthSec(nowMs));
    if (since < now - ADMIN_DEFAULTS.activeUsersMaxAgeSecs) {
      throw invalidParameter('since', 'must be at most two years in the past');
    }
    const until = q.int('until', 0, Number.MAX_SAFE_INTEGER, endOfMonth);
    if (until > endOfMonth) throw invalidParameter('until', 'must not be after the end of the current month');
    const offset = q.int('offset', 0, Number.MAX_SAFE_INTEGER, 0);
    const limit = q.int('limit', 0, 1000, 1000);
    const order = q.oneOf('order', ['asc', 'desc'] as const, 'asc');
    const last = new Map<string, number>();
    for (const a of this.#activity) {
      if (a.result === 'allow' && a.timestamp >= since && a.timestamp <= until)
        last.set(a.user_id, a.timestamp);
    }
    const rows = [...last.entries()]
      .filter(([id]) => this.#users.has(id))
      .sort((a, b) => (order === 'asc' ? a[1] - b[1] : b[1] - a[1]));
    const page = rows.slice(offset, offset + limit).map(([id, ts]) => ({
      ...userView(this.#users.get(id)!),
      last_active_at: new Date(ts * 1000).toISOString(),
    }));
    return { users: page, count: page.length, total: rows.length, since, until, limit, offset };
  }

  // ----------------------------------------------------------- service info

  getInfo(): ServiceInfo {
    return { ...this.#info };
  }

  /** PUT /info: answers both settings, or undefined for 304. */
  updateInfo(body: { accounts_migration_callback_url?: string; session_timeout?: number }) {
    let changed = false;
    if (body.accounts_migration_callback_url !== undefined) {
      checkCallbackUrl(
        'accounts_migration_callback_url',
        body.accounts_migration_callback_url,
        this.#opts.allowInsecureCallbacks,
      );
      if (body.accounts_migration_callback_url !== this.#info.accounts_migration_callback_url) {
        this.#info.accounts_migration_callback_url = body.accounts_migration_callback_url;
        changed = true;
      }
    }
    if (body.session_timeout !== undefined && body.session_timeout !== this.#info.session_timeout) {
      this.#info.session_timeout = body.session_timeout;
      changed = true;
    }
    if (!changed) return undefined;
    return {
      accounts_migration_callback_url: this.#info.accounts_migration_callback_url ?? '',
      session_timeout: this.#info.session_timeout,
    };
  }

  getLogo(): { id: string; bytes: Buffer } | undefined {
    return this.#logo;
  }

  /** POST /logo: Base64 PNG; replaces any earlier logo. */
  setLogo(base64: string): string {
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(base64) || base64.length % 4 !== 0) {
      throw invalidParameter('logo', 'must be Base64');
    }
    const bytes = Buffer.from(base64, 'base64');
    const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    if (bytes.length < 8 || !bytes.subarray(0, 8).equals(signature)) {
      throw invalidParameter('logo', 'must be PNG image data');
    }
    const id = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
    this.#logo = { id, bytes };
    return id;
  }

  deleteLogo(): boolean {
    const had = this.#logo !== undefined;
    this.#logo = undefined;
    return had;
  }

  // ------------------------------------------------------------ control API

  /**
   * A simulated authentication through the (not emulated) authentication API: activity record,
   * authentication.* events, failed_attempts and lock-out. A `passcode` is checked against the
   * user's one-time and backup codes and decides the result.
   */
  simulateAuthentication(
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
      input.user_id ?? (input.username === undefined ? undefined : this.#userIdByName.get(input.username));
    if (userId === undefined || !this.#users.has(userId)) {
      throw notFound(`user not found: ${input.user_id ?? input.username}`);
    }
    const u = this.#users.get(userId)!;
    let device: DeviceRecord | undefined;
    if (input.device_id !== undefined) {
      device = this.#devices.get(input.device_id);
      if (!device || device.user_id !== userId)
        throw invalidParameter('device_id', 'not a device of this user');
    } else if (input.passcode === undefined) {
      device = this.#enrolledDevices(userId)[0];
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
    const now = this.nowSec();
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
          const check = this.#checkPasscode(userId, input.passcode);
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
            this.#emitUserUpdated(u, client);
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
    this.#insertActivity(record);

    const deviceId = device?.device_id ?? '';
    this.#events.emitServiceEvent(
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
      this.#events.emitServiceEvent(
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
      this.#events.emitServiceEvent(
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
      this.#events.emitServiceEvent(
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

  #insertActivity(record: ActivityRecord): void {
    let i = this.#activity.length;
    while (i > 0 && this.#activity[i - 1]!.timestamp > record.timestamp) i--;
    this.#activity.splice(i, 0, record);
  }

  /**
   * Device activation finished: pending → success, the device is created and enrolled, the owner is
   * enabled if it was disabled, and the success callback goes out when one was asked for.
   */
  async completeEnrollment(
    enrollmentId: string,
    init: { type?: 'android' | 'ios'; display_name?: string; version?: string; device_integrity?: string },
    client: EventClient,
  ): Promise<Record<string, unknown>> {
    const e = this.#enrollment(enrollmentId);
    const now = this.nowSec();
    const status = enrollmentStatus(e, now);
    if (status !== 'pending') throw invalidParameter('enrollment_id', `enrollment is ${status}, not pending`);
    const u = this.#activeUser(e.user_id);
    const d = this.#addDevice(u.user_id, {
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
    this.#events.emitServiceEvent(
      'device.enrollment.succeeded',
      { device_type: 'sdk', enrollment_id: e.enrollment_id, device_id: d.device_id, user_id: u.user_id },
      client,
    );
    this.#emitDeviceCreated(d, client);
    this.#enableAfterEnrollment(u, client);
    let callback: CallbackDelivery | undefined;
    if (e.success_callback_url !== undefined) {
      callback = await this.#callbacks.send('enrollment_success', e.success_callback_url, {
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

  #enableAfterEnrollment(u: UserRecord, client: EventClient): void {
    const next = statusAfterEnrollment(u.status);
    if (next !== u.status) {
      u.status = next;
      u.updated_at = this.nowSec();
      this.#emitUserUpdated(u, client);
    }
  }

  /** An SMS device verified through the authentication API: it becomes enrolled. */
  verifySmsDevice(deviceId: string, client: EventClient): Record<string, unknown> {
    const d = this.#activeDevice(deviceId);
    if (d.type !== 'sms') throw invalidParameter('device_id', 'not an SMS device');
    if (d.enrolled) throw invalidParameter('device_id', 'already verified');
    const u = this.#activeUser(d.user_id);
    const now = this.nowSec();
    d.enrolled = true;
    d.enrolled_at = now;
    d.updated_at = now;
    this.#events.emitServiceEvent(
      'device.enrollment.succeeded',
      { device_type: 'sms', device_id: d.device_id, user_id: d.user_id },
      client,
    );
    this.#emitDeviceUpdated(d, client);
    this.#enableAfterEnrollment(u, client);
    return { device: deviceView(d), user: userView(u) };
  }

  /**
   * Automatic account recovery: each named enrolled device is replaced by a new one (migrated_*
   * fields on both), and one accounts-migration callback per migrated account goes out.
   */
  async migrate(
    target: { device_id?: string; user_id?: string },
    client: EventClient,
  ): Promise<Record<string, unknown>> {
    let devices: DeviceRecord[];
    if (target.device_id !== undefined) {
      const d = this.#activeDevice(target.device_id);
      if (!d.enrolled) throw invalidParameter('device_id', 'device is not enrolled');
      this.#activeUser(d.user_id);
      devices = [d];
    } else {
      this.#activeUser(target.user_id ?? '');
      devices = this.#enrolledDevices(target.user_id!);
      if (devices.length === 0) throw invalidParameter('user_id', 'user has no enrolled device to migrate');
    }
    const now = this.nowSec();
    const migrations: Record<string, unknown>[] = [];
    const callbacks: CallbackDelivery[] = [];
    for (const old of devices) {
      const fresh = this.#addDevice(old.user_id, {
        type: old.type,
        enrolled: true,
        display_name: old.display_name,
        ...(old.number === undefined ? {} : { number: old.number }),
        ...(old.version === undefined ? {} : { version: old.version }),
        account_recovery_flow_binding_enabled: old.account_recovery_flow_binding_enabled ?? false,
        migrated_from_device_id: old.device_id,
        migrated_at: now,
      });
      old.migrated_to_device_id = fresh.device_id;
      old.migrated_at = now;
      old.enrolled = false;
      old.archived_at = now;
      old.updated_at = now;
      this.#emitDeviceCreated(fresh, client);
      this.#emitDeviceUpdated(old, client);
      const migration = {
        user_id: old.user_id,
        device_id: old.device_id,
        migrated_to_device_id: fresh.device_id,
        migrated_at: now,
      };
      migrations.push(migration);
    }
    const url = this.#info.accounts_migration_callback_url;
    if (url !== undefined) {
      for (const m of migrations) callbacks.push(await this.#callbacks.send('accounts_migration', url, m));
    }
    return { migrations, callbacks };
  }

  // ----------------------------------------------------------------- seed

  /** Creates a user from scenario data; `createdAtSec` and device times are given by the caller. */
  seedUser(seed: {
    user_id?: string;
    username: string;
    display_name?: string;
    status?: SettableStatus;
    allowed_factors?: string[];
    failed_attempts: number;
    max_attempts?: number;
    createdAtSec: number;
    devices: (Partial<DeviceRecord> & {
      type: AdminDevice['type'];
      enrolled: boolean;
      enrolledAtSec: number;
    })[];
  }): UserRecord {
    if (this.#userIdByName.has(seed.username))
      throw new Error(`scenario: duplicate username ${seed.username}`);
    const userId = seed.user_id ?? randomUUID();
    if (this.#users.has(userId)) throw new Error(`scenario: duplicate user_id ${userId}`);
    const u: UserRecord = {
      user_id: userId,
      username: seed.username,
      display_name: seed.display_name ?? '',
      allowed_factors: normalizeFactors(seed.allowed_factors ?? ADMIN_DEFAULTS.allowedFactors),
      failed_attempts: seed.failed_attempts,
      max_attempts: seed.max_attempts ?? ADMIN_DEFAULTS.maxAttempts,
      service_defined_username: true,
      status: 'disabled',
      created_at: seed.createdAtSec,
      updated_at: seed.createdAtSec,
      seq: ++this.#seq,
    };
    this.#users.set(u.user_id, u);
    this.#userIdByName.set(u.username, u.user_id);
    for (const sd of seed.devices) {
      const { enrolledAtSec, ...init } = sd;
      this.#addDevice(
        u.user_id,
        { ...init, ...(sd.enrolled ? { enrolled_at: enrolledAtSec } : {}) },
        enrolledAtSec,
      );
    }
    const enrolled = this.#enrolledDevices(u.user_id);
    // A seeded status follows the same table as a PUT: enabled without a device is disabled, and a
    // disabled user has no enrolled device.
    const outcome = statusAfterPut(seed.status ?? 'enabled', enrolled.length > 0);
    u.status = outcome.status;
    if (outcome.unenrollDevices) for (const d of enrolled) d.enrolled = false;
    return u;
  }

  /** Devices of a user (for seeding events). */
  devicesOf(userId: string): AdminDevice[] {
    return this.#userDevices(userId).map(deviceView);
  }
}

function backupCodeView(c: BackupCodeRecord): Record<string, unknown> {
  return c.remaining === undefined
    ? { code: spaceDigits(c.digits), infinite_uses: true }
    : { code: spaceDigits(c.digits), remaining_uses: c.remaining };
}

function startOfMonthSec(nowMs: number): number {
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1) / 1000;
}

function startOfNextMonthSec(nowMs: number): number {
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) / 1000;
}
