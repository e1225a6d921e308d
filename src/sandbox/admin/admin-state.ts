import type { EventSink, SandboxModuleContext } from '../sandbox-module.ts';
import { gone, notFound } from '../vendor-api-errors.ts';
import { FACTORS } from './admin-input.ts';
import {
  type ActivityRecord,
  type BackupCodeRecord,
  type DeviceRecord,
  deviceStatus,
  type EnrollmentRecord,
  type OneTimeCodeRecord,
  type ServiceInfo,
  type UserRecord,
  userEventFields,
} from './admin-records.ts';
import type { CallbackSender } from './callback-delivery.ts';

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

/** A 1×1 PNG: the sandbox's stand-in for QR code images. */
export const PLACEHOLDER_PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=',
  'base64',
);

/** Factors in their canonical order, `passcode` always present (docs/vendor-api.md#admin-resources). */
export function normalizeFactors(factors: readonly string[]): string[] {
  const set = new Set(factors);
  set.add('passcode');
  return FACTORS.filter((f) => set.has(f));
}

export interface AdminStateOptions {
  /** Accept http://127.0.0.1 / localhost callback URLs (sandbox convenience). */
  allowInsecureCallbacks: boolean;
}

function defaultInfo(): ServiceInfo {
  return {
    name: 'riskgate sandbox service',
    trial: false,
    description: 'Emulated service for riskgate',
    session_timeout: ADMIN_DEFAULTS.sessionTimeout,
  };
}

/**
 * Everything the emulated Admin API stores for one Service, and the lookups and events every
 * concept shares. The rules live in one module per concept (users, devices, enrollments, passcodes,
 * activity, authentications, migrations, service-info), each a set of functions over this state.
 */
export class AdminState {
  readonly users = new Map<string, UserRecord>();
  readonly userIdByName = new Map<string, string>();
  readonly devices = new Map<string, DeviceRecord>();
  readonly deviceIdsByUser = new Map<string, string[]>();
  readonly enrollments = new Map<string, EnrollmentRecord>();
  readonly enrollmentIdsByUser = new Map<string, string[]>();
  /** Ascending by timestamp. */
  activity: ActivityRecord[] = [];
  readonly backupCodes = new Map<string, BackupCodeRecord[]>();
  readonly oneTimeCodes = new Map<string, OneTimeCodeRecord>();
  info: ServiceInfo = defaultInfo();
  logo: { id: string; bytes: Buffer } | undefined;
  #seq = 0;

  constructor(
    readonly ctx: SandboxModuleContext,
    readonly events: EventSink,
    readonly callbacks: CallbackSender,
    readonly opts: AdminStateOptions,
  ) {}

  /** Forgets everything (POST /sandbox/reset). */
  clear(): void {
    this.users.clear();
    this.userIdByName.clear();
    this.devices.clear();
    this.deviceIdsByUser.clear();
    this.enrollments.clear();
    this.enrollmentIdsByUser.clear();
    this.activity = [];
    this.backupCodes.clear();
    this.oneTimeCodes.clear();
    this.info = defaultInfo();
    this.logo = undefined;
    this.#seq = 0;
  }

  nowSec(): number {
    return Math.floor(this.ctx.clock.now() / 1000);
  }

  /** Creation order, for stable sorting of equal timestamps. */
  nextSeq(): number {
    return ++this.#seq;
  }

  user(id: string): UserRecord {
    const u = this.users.get(id);
    if (!u) throw notFound(`user not found: ${id}`);
    return u;
  }

  /** The user, unless unknown (404) or archived (410). */
  activeUser(id: string): UserRecord {
    const u = this.user(id);
    if (u.status === 'archived') throw gone('user already archived');
    return u;
  }

  userDevices(userId: string): DeviceRecord[] {
    const ids = this.deviceIdsByUser.get(userId) ?? [];
    return ids.map((id) => this.devices.get(id)!);
  }

  enrolledDevices(userId: string): DeviceRecord[] {
    return this.userDevices(userId).filter((d) => deviceStatus(d) === 'enrolled');
  }

  device(id: string): DeviceRecord {
    const d = this.devices.get(id);
    if (!d) throw notFound(`device not found: ${id}`);
    return d;
  }

  /** The device, unless unknown (404) or archived (410). */
  activeDevice(id: string): DeviceRecord {
    const d = this.device(id);
    if (d.archived_at !== undefined) throw gone(`device already archived: ${id}`);
    return d;
  }

  enrollment(id: string): EnrollmentRecord {
    const e = this.enrollments.get(id);
    if (!e) throw notFound(`enrollment not found: ${id}`);
    return e;
  }

  emitUserUpdated(u: UserRecord, client: EventClient): void {
    this.events.emitServiceEvent('user.updated', userEventFields(u), client);
  }

  emitDeviceUpdated(d: DeviceRecord, client: EventClient): void {
    const mobile = d.type === 'android' || d.type === 'ios';
    this.events.emitServiceEvent(
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

  emitDeviceCreated(d: DeviceRecord, client: EventClient): void {
    this.events.emitServiceEvent(
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
}
