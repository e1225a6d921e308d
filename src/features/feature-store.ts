import type { CheckpointStore } from '../logs/log-checkpoint.ts';

/**
 * Where riskgate keeps what it learns across decisions: velocity counters over its own traffic and
 * the per-user event history the Log API follower feeds. One process alone keeps it in memory (the
 * primary's, for RISKGATE_WORKERS > 1); replicas share Redis (src/features/redis-feature-store.ts).
 * Keys and members arrive hashed (src/features/velocity-counters.ts): the store never holds an
 * account id, IP address or user id in clear.
 */

/** One sliding-window counter instance, as the store sees it. */
export interface CounterOp {
  /** `<counter store id>:<hash of the key's values>`. */
  key: string;
  /** The window, milliseconds. */
  windowMs: number;
  /** For a distinct counter: the hash of this request's value (counted once per window). */
  member?: string | undefined;
}

/** What one counter read found. */
export interface CounterReadings {
  /** Per op: decisions (or distinct members) in the window, before this decision. */
  counts: number[];
  /** Per op: whether `member` is already among the distinct members (false without a member). */
  seen: boolean[];
}

/** The kinds of Log API event the history keeps (src/features/history-features.ts). */
export type HistoryKind =
  /** `authentication.failed` */
  | 'failed'
  /** `user.updated` / `admin-dashboard.user.updated` to `locked_out` */
  | 'locked'
  /** `authentication.totp.reused` */
  | 'totp'
  /** `device.enrollment.succeeded` / `device.created` (by device) */
  | 'device'
  /** `user.updated` / `admin-dashboard.user.updated` carrying a status */
  | 'status';

export interface HistoryEvent {
  /** Hash of the user id. */
  userKey: string;
  kind: HistoryKind;
  /** When it happened, epoch ms. */
  atMs: number;
  eventId: string;
  /** For `device`: hash of the device id (a device enrolled and created counts once). */
  deviceKey?: string | undefined;
}

export interface HistoryReading {
  events: HistoryEvent[];
  /** How far the follower has read (epoch ms), or undefined when it has not read anything yet. */
  cursorMs: number | undefined;
}

export interface FeatureStore {
  /** `memory` (this process), `redis` (shared by replicas) or `ipc` (the primary's memory, from a worker). */
  readonly kind: 'memory' | 'redis' | 'ipc';
  /** Counts of `ops` at `nowMs`, in one round trip. Rejects when the store cannot answer. */
  readCounters(ops: readonly CounterOp[], nowMs: number): Promise<CounterReadings>;
  /** Counts one decision into each op's window (atomically per op), in one round trip. */
  recordCounters(ops: readonly CounterOp[], nowMs: number): Promise<void>;
  /** Keeps the events (duplicates by `eventId` ignored) and moves the follower's cursor. */
  recordHistory(events: readonly HistoryEvent[], cursorMs: number): Promise<void>;
  /** One user's events of the last 24 hours, and the follower's cursor. */
  readHistory(userKey: string, nowMs: number): Promise<HistoryReading>;
  /**
   * Takes or renews the lease on following the Log API for `ttlMs`: true while `owner` holds it.
   * Several replicas on a shared store read the Log API once between them.
   */
  holdFollowerLease(owner: string, ttlMs: number): Promise<boolean>;
  /** How far the follower has read (epoch ms), or undefined before its first window. */
  followerCursor(): Promise<number | undefined>;
  /** Where the follower keeps its checkpoint when the store is shared (undefined: the state dir's file). */
  readonly followerCheckpoint?: CheckpointStore | undefined;
  /** False when the store starts empty on every start (memory): the follower reads the last 24 h again. */
  readonly durable: boolean;
  close(): Promise<void>;
}

/** History is kept this long, milliseconds: the longest history feature window. */
export const HISTORY_RETENTION_MS = 24 * 3600 * 1000;

/** Most events kept per user (the most recent): a flood of failures cannot grow one user without bound. */
export const HISTORY_MAX_EVENTS_PER_USER = 1000;

/**
 * Sub-windows per counter window. A count covers the current sub-window and the 12 before it, so it
 * holds every decision of the last `window` and possibly some of the `window / 12` before: counts
 * err high by at most that much, never low (a rule fires early rather than late).
 */
export const COUNTER_BUCKETS = 12;

/** Distinct members kept per counter instance (the most recent): counts saturate here. */
export const MAX_DISTINCT_MEMBERS = 1000;

/** The sub-window width of a window, milliseconds. */
export function bucketWidthMs(windowMs: number): number {
  return Math.max(1, Math.ceil(windowMs / COUNTER_BUCKETS));
}
