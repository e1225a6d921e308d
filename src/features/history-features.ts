import { hash } from 'node:crypto';
import { createdAtNs, type LogEvent } from '../logs/log-event.ts';
import type { HistoryEvent, HistoryKind, HistoryReading } from './feature-store.ts';

/**
 * Per-user event history from the Log API (docs/vendor-api.md#log-events), as the features policies
 * read (`history.<feature>` in CEL). The follower turns events into `HistoryEvent`s; a decision
 * reads the user's last 24 hours and counts them here.
 */

/** `history.maxLagSeconds` when the policy sets none. */
export const DEFAULT_HISTORY_MAX_LAG_SECONDS = 600;

/** The features, by the name policies use. Counts over the window in the name. */
export interface HistoryFeatures {
  /** How far behind now the follower has read, seconds (at least the Log API's 2-minute delay). */
  lagSeconds: number;
  failedAuthentications10m: number;
  failedAuthentications1h: number;
  failedAuthentications24h: number;
  /** The account was set to `locked_out` (by anyone: riskgate, the help desk, the dashboard). */
  lockOuts24h: number;
  /** The same TOTP was entered twice. */
  totpReuses24h: number;
  /** Devices enrolled or created for the user (each device once). */
  newDevices1h: number;
  newDevices24h: number;
  /** Status changes of the account (enabled, disabled, locked_out, bypass, ...). */
  statusChanges24h: number;
}

export const HISTORY_FEATURE_NAMES = [
  'lagSeconds',
  'failedAuthentications10m',
  'failedAuthentications1h',
  'failedAuthentications24h',
  'lockOuts24h',
  'totpReuses24h',
  'newDevices1h',
  'newDevices24h',
  'statusChanges24h',
] as const satisfies readonly (keyof HistoryFeatures)[];

const USER_UPDATES = new Set(['user.updated', 'admin-dashboard.user.updated']);

/** The hash users and devices are kept under (the store holds no identifier in clear). */
export function historyKey(id: string): string {
  return hash('sha256', id, 'base64url').slice(0, 22);
}

/** The history entries of one Log API event (none for the kinds the history does not keep). */
export function historyEventsOf(event: LogEvent): HistoryEvent[] {
  const userId = event.user_id;
  if (typeof userId !== 'string' || userId === '') return [];
  const ns = createdAtNs(event.created_at);
  if (ns === undefined) return [];
  const atMs = Number(ns / 1_000_000n);
  const userKey = historyKey(userId);
  const entry = (kind: HistoryKind, suffix = ''): HistoryEvent => ({
    userKey,
    kind,
    atMs,
    eventId: `${event.event_id}${suffix}`,
  });
  switch (event.type) {
    case 'authentication.failed':
      return [entry('failed')];
    case 'authentication.totp.reused':
      return [entry('totp')];
    case 'device.enrollment.succeeded':
    case 'device.created': {
      const deviceId = event.device_id;
      if (typeof deviceId !== 'string' || deviceId === '') return [];
      return [{ ...entry('device'), deviceKey: historyKey(deviceId) }];
    }
  }
  if (USER_UPDATES.has(event.type) && typeof event.status === 'string') {
    const out = [entry('status', '#status')];
    if (event.status === 'locked_out') out.push(entry('locked', '#locked'));
    return out;
  }
  return [];
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** A user with nothing in the history, read with the follower `lagSeconds` behind. */
export function quietHistory(lagSeconds: number): HistoryFeatures {
  return {
    lagSeconds,
    failedAuthentications10m: 0,
    failedAuthentications1h: 0,
    failedAuthentications24h: 0,
    lockOuts24h: 0,
    totpReuses24h: 0,
    newDevices1h: 0,
    newDevices24h: 0,
    statusChanges24h: 0,
  };
}

/** The features of one user's events at `nowMs`. */
export function historyFeatures(reading: HistoryReading, nowMs: number): HistoryFeatures {
  const f = quietHistory(
    reading.cursorMs === undefined ? Number.POSITIVE_INFINITY : (nowMs - reading.cursorMs) / 1000,
  );
  const devices1h = new Set<string>();
  const devices24h = new Set<string>();
  for (const e of reading.events) {
    const age = nowMs - e.atMs;
    if (age > 24 * HOUR) continue;
    switch (e.kind) {
      case 'failed':
        f.failedAuthentications24h++;
        if (age <= HOUR) f.failedAuthentications1h++;
        if (age <= 10 * MINUTE) f.failedAuthentications10m++;
        break;
      case 'locked':
        f.lockOuts24h++;
        break;
      case 'totp':
        f.totpReuses24h++;
        break;
      case 'status':
        f.statusChanges24h++;
        break;
      case 'device':
        devices24h.add(e.deviceKey ?? e.eventId);
        if (age <= HOUR) devices1h.add(e.deviceKey ?? e.eventId);
        break;
    }
  }
  f.newDevices1h = devices1h.size;
  f.newDevices24h = devices24h.size;
  return f;
}
