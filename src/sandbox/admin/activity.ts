import { invalidParameter } from '../vendor-api-errors.ts';
import type { QueryParams } from './admin-input.ts';
import { type ActivityRecord, userView } from './admin-records.ts';
import { ADMIN_DEFAULTS, type AdminState } from './admin-state.ts';

/** Admin API authentication activity (service and per user) and active users. */

function activityWindow(s: AdminState, q: QueryParams, defaultSince: number): number {
  const now = s.nowSec();
  const since = q.int('since', 0, Number.MAX_SAFE_INTEGER) ?? defaultSince;
  if (since < now - ADMIN_DEFAULTS.activityMaxAgeSecs) {
    throw invalidParameter('since', 'must be at most one month in the past');
  }
  return since;
}

/** GET /activity. */
export function serviceActivity(s: AdminState, q: QueryParams): Record<string, unknown> {
  const since = activityWindow(s, q, startOfMonthSec(s.ctx.clock.now()));
  const until = q.int('until', 0, Number.MAX_SAFE_INTEGER, 0);
  const offset = q.int('offset', 0, Number.MAX_SAFE_INTEGER, 0);
  const limit = q.int('limit', 0, 1000, 1000);
  const factor = q.string('factor');
  const result = q.oneOf('result', ['allow', 'deny'] as const);
  const hasReason = q.has('reason');
  const reason = q.string('reason');
  const type = q.string('type');
  const location = q.string('location');
  const matches = s.activity.filter(
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

/** GET /users/{id}/activity (ascending; no since = one month back, docs/vendor-api.md#admin-endpoints). */
export function userActivity(s: AdminState, userId: string, q: QueryParams): Record<string, unknown> {
  s.user(userId);
  const since = activityWindow(s, q, s.nowSec() - ADMIN_DEFAULTS.activityMaxAgeSecs);
  const deviceId = q.string('device_id');
  const limit = q.int('limit', 1, 1000, 1000);
  const records = s.activity
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
export function activeUsers(s: AdminState, q: QueryParams): Record<string, unknown> {
  const nowMs = s.ctx.clock.now();
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
  for (const a of s.activity) {
    if (a.result === 'allow' && a.timestamp >= since && a.timestamp <= until)
      last.set(a.user_id, a.timestamp);
  }
  const rows = [...last.entries()]
    .filter(([id]) => s.users.has(id))
    .sort((a, b) => (order === 'asc' ? a[1] - b[1] : b[1] - a[1]));
  const page = rows.slice(offset, offset + limit).map(([id, ts]) => ({
    ...userView(s.users.get(id)!),
    last_active_at: new Date(ts * 1000).toISOString(),
  }));
  return { users: page, count: page.length, total: rows.length, since, until, limit, offset };
}

export function insertActivity(s: AdminState, record: ActivityRecord): void {
  let i = s.activity.length;
  while (i > 0 && s.activity[i - 1]!.timestamp > record.timestamp) i--;
  s.activity.splice(i, 0, record);
}

function startOfMonthSec(nowMs: number): number {
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1) / 1000;
}

function startOfNextMonthSec(nowMs: number): number {
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) / 1000;
}
