import { randomUUID } from 'node:crypto';
import type { AdminDevice, AdminUser } from '../../admin/admin-schemas.ts';
import { invalidParameter } from '../vendor-api-errors.ts';
import { type EnrollmentBody, FACTORS, type QueryParams, USER_STATUSES } from './admin-input.ts';
import { type DeviceRecord, enrollmentStatus, type UserRecord, userView } from './admin-records.ts';
import { ADMIN_DEFAULTS, type AdminState, type EventClient, normalizeFactors } from './admin-state.ts';
import { addDevice } from './devices.ts';
import { checkEnrollmentBody, enroll, invalidateEnrollment } from './enrollments.ts';
import { type SettableStatus, statusAfterPut } from './user-status.ts';

/** Admin API users: lookup, creation (with its first enrollment), update, archival, scenario seeding. */

export function getUser(s: AdminState, id: string): AdminUser {
  return userView(s.user(id));
}

/** GET /users with every filter, sort and the page limits of docs/vendor-api.md#admin-limits. */
export function lookupUsers(s: AdminState, q: QueryParams): Record<string, unknown> {
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

  const matches = [...s.users.values()].filter(
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

export function newUser(
  s: AdminState,
  username: string | undefined,
  displayName: string | undefined,
): UserRecord {
  if (username !== undefined && s.userIdByName.has(username)) {
    throw invalidParameter('username', 'already exists');
  }
  const now = s.nowSec();
  let name = username;
  while (name === undefined || s.userIdByName.has(name)) {
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
    seq: s.nextSeq(),
  };
  s.users.set(u.user_id, u);
  s.userIdByName.set(u.username, u.user_id);
  return u;
}

/** POST /users: a new user with a mobile enrollment or an SMS device. */
export function createUser(
  s: AdminState,
  body: EnrollmentBody & { username?: string; display_name?: string },
  origin: string,
  client: EventClient,
): Record<string, unknown> {
  checkEnrollmentBody(s, body);
  const u = newUser(s, body.username, body.display_name);
  return enroll(s, u, body, origin, client);
}

/**
 * PUT /users/{id}: returns only the updated attributes (plus max_attempts when updated), or
 * undefined for 304.
 */
export function updateUser(
  s: AdminState,
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
  const u = s.activeUser(id);
  const changed: Record<string, unknown> = {};
  if (body.allowed_factors !== undefined) {
    const next = normalizeFactors(body.allowed_factors);
    if (next.join(',') !== u.allowed_factors.join(',')) changed.allowed_factors = next;
  }
  if (body.username !== undefined && body.username !== u.username) {
    if (s.userIdByName.has(body.username)) throw invalidParameter('username', 'already exists');
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
    const enrolled = s.enrolledDevices(u.user_id);
    const outcome = statusAfterPut(body.status, enrolled.length > 0);
    unenroll = outcome.unenrollDevices ? enrolled : [];
    resetFailures = outcome.resetFailedAttempts && u.failed_attempts > 0;
    // A status PUT that only resets the lock-out count or unenrolls devices still modified the user.
    if (outcome.status !== u.status || resetFailures || unenroll.length > 0) changed.status = outcome.status;
  }
  if (Object.keys(changed).length === 0) return undefined;

  const now = s.nowSec();
  if (changed.username !== undefined) {
    s.userIdByName.delete(u.username);
    u.username = changed.username as string;
    s.userIdByName.set(u.username, u.user_id);
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
    s.emitDeviceUpdated(d, client);
  }
  s.emitUserUpdated(u, client);
  return changed;
}

/** DELETE /users/{id}: archives the user, its devices and pending enrollments. */
export function archiveUser(s: AdminState, id: string, client: EventClient): void {
  const u = s.activeUser(id);
  const now = s.nowSec();
  u.status = 'archived';
  u.archived_at = now;
  u.updated_at = now;
  for (const d of s.userDevices(id)) {
    if (d.archived_at !== undefined) continue;
    d.enrolled = false;
    d.archived_at = now;
    d.updated_at = now;
    s.emitDeviceUpdated(d, client);
  }
  for (const eid of s.enrollmentIdsByUser.get(id) ?? []) {
    const e = s.enrollments.get(eid)!;
    if (enrollmentStatus(e, now) === 'pending') invalidateEnrollment(s, e, client);
  }
  s.oneTimeCodes.delete(id);
  s.emitUserUpdated(u, client);
}

/** Creates a user from scenario data; `createdAtSec` and device times are given by the caller. */
export function seedUser(
  s: AdminState,
  seed: {
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
  },
): UserRecord {
  if (s.userIdByName.has(seed.username)) throw new Error(`scenario: duplicate username ${seed.username}`);
  const userId = seed.user_id ?? randomUUID();
  if (s.users.has(userId)) throw new Error(`scenario: duplicate user_id ${userId}`);
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
    seq: s.nextSeq(),
  };
  s.users.set(u.user_id, u);
  s.userIdByName.set(u.username, u.user_id);
  for (const sd of seed.devices) {
    const { enrolledAtSec, ...init } = sd;
    addDevice(
      s,
      u.user_id,
      { ...init, ...(sd.enrolled ? { enrolled_at: enrolledAtSec } : {}) },
      enrolledAtSec,
    );
  }
  const enrolled = s.enrolledDevices(u.user_id);
  // A seeded status follows the same table as a PUT: enabled without a device is disabled, and a
  // disabled user has no enrolled device.
  const outcome = statusAfterPut(seed.status ?? 'enabled', enrolled.length > 0);
  u.status = outcome.status;
  if (outcome.unenrollDevices) for (const d of enrolled) d.enrolled = false;
  return u;
}
