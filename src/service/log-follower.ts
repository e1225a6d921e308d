import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { AdminClient } from '../admin/admin-client.ts';
import type { UpstreamConfig } from '../config/riskgate-config.ts';
import { type FeatureStore, HISTORY_RETENTION_MS } from '../features/feature-store.ts';
import { historyEventsOf } from '../features/history-features.ts';
import type { ServiceLog } from '../http/create-app.ts';
import type { Component, InputWarmth } from '../lifecycle/component.ts';
import { type CheckpointStore, createFileCheckpointStore } from '../logs/log-checkpoint.ts';
import { createLogClient } from '../logs/log-client.ts';
import type { LogEvent } from '../logs/log-event.ts';
import { createLogPoller, type LogPoller } from '../logs/log-poller.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { CallTracer } from '../upstream/call-tracer.ts';
import type { CallInfo } from '../upstream/upstream-call.ts';

/**
 * Follows the service's Log API events in the background (never on a decision's path): each one is
 * counted by type, and one that changes what the Admin reads return (a user updated or locked out
 * elsewhere, a failed authentication moving `failed_attempts`, a device added, updated or archived)
 * drops that user's cached Admin reads, so the next decision reads them afresh. With a feature
 * store, the events policies read as history (src/features/history-features.ts) go there too, and
 * the follower starts 24 hours back so the history is whole once it has caught up (until then its
 * lag marks history unavailable). Replicas on a shared store take a lease: one of them follows.
 */

/**
 * Event types after which a user's cached Admin user and devices reads are stale
 * (docs/vendor-api.md#log-events).
 */
export const ADMIN_CACHE_INVALIDATING_EVENTS: ReadonlySet<string> = new Set([
  'user.updated',
  'admin-dashboard.user.updated',
  'authentication.failed',
  'device.created',
  'device.updated',
]);

/** Users invalidated per event-loop turn: a window of thousands of events never holds the loop. */
const INVALIDATIONS_PER_TURN = 200;

export interface LogFollowerOptions {
  upstream: Pick<UpstreamConfig, 'logsUrl' | 'logApiKey' | 'serviceId'>;
  /** The checkpoint goes to `<stateDir>/log-checkpoint-service.json`. */
  stateDir: string;
  admin: Pick<AdminClient, 'invalidateUser'>;
  metrics: Pick<RiskgateMetrics, 'recordLogEvents' | 'recordLogPollError'>;
  log: ServiceLog;
  onCall?: (info: CallInfo) => void;
  tracer?: CallTracer | undefined;
  /**
   * Its wall time places windows, dates requests and measures the lag; its monotonic time bounds
   * the lease. Default {@link systemClock} (tests step it with the sandbox clock).
   */
  clock?: Clock;
  /** Pause between polls once caught up, milliseconds. Default 30 000. */
  pollIntervalMs?: number;
  /** Where history goes (and, when shared, the checkpoint and the lease on following). */
  features?: FeatureStore | undefined;
}

export interface LogFollower {
  /** Starts polling in the background; a checkpoint that cannot be read is logged, not thrown. */
  start(): Promise<void>;
  /** Stops after the window in progress and closes the client. */
  stop(): Promise<void>;
  /** Start of the next window, epoch ms (the following replica's, when another one holds the lease). */
  cursor(): number | undefined;
  /** Whether this process reads the Log API (on a shared store, one replica holds the lease). */
  isFollowing(): boolean;
  /**
   * Why reading the Log API last failed, as an error code (a window, the history store, the
   * checkpoint), until a window is delivered again; undefined while it reads.
   */
  failing(): string | undefined;
}

/** Longest pause between tries while the Log API fails, milliseconds: a recovery is seen soon. */
const FOLLOWER_RETRY_MAX_MS = 5000;

/** How often a process that does not follow reads how far the follower has read, milliseconds. */
const SHARED_CURSOR_EVERY_MS = 500;

/** Undefined when the Log API is not configured. */
export function createLogFollower(opts: LogFollowerOptions): LogFollower | undefined {
  const { logsUrl, logApiKey, serviceId } = opts.upstream;
  if (logsUrl === undefined || logApiKey === undefined) return undefined;
  const client = createLogClient({
    baseUrl: logsUrl,
    service: { id: serviceId, apiKey: logApiKey },
    ...(opts.clock !== undefined && { clock: opts.clock }),
    ...(opts.onCall !== undefined && { onCall: opts.onCall }),
    tracer: opts.tracer,
  });
  const clock = opts.clock ?? systemClock;
  const now = () => clock.nowMs();
  const features = opts.features;
  const fileCheckpoint = createFileCheckpointStore(join(opts.stateDir, 'log-checkpoint-service.json'));
  const checkpointStore: CheckpointStore =
    features?.followerCheckpoint ??
    (features === undefined || features.durable ? fileCheckpoint : rereadLastDay(fileCheckpoint, now));
  const pollIntervalMs = opts.pollIntervalMs ?? 30_000;
  let failing: string | undefined;
  /** Until when the lease is held, on the clock's monotonic time. */
  let leaseUntilMs = 0;
  let sharedCursorMs: number | undefined;
  // Following means holding a lease that has not lapsed (a renewal that failed does not count).
  const following = () => features === undefined || clock.monotonicMs() < leaseUntilMs;
  const owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  // Long enough to outlive a pause between polls; a follower that died is replaced after it.
  const leaseMs = Math.max(3 * pollIntervalMs, 5000);
  const poller: LogPoller = createLogPoller({
    client,
    scope: 'service',
    checkpointStore,
    clock,
    pollIntervalMs,
    backoffMaxMs: FOLLOWER_RETRY_MAX_MS,
    ...(features !== undefined && {
      startAt: now() - HISTORY_RETENTION_MS,
      deliverEmptyWindows: true,
      mayPoll: async () => {
        const askedAt = clock.monotonicMs();
        const held = await features.holdFollowerLease(owner, leaseMs);
        leaseUntilMs = held ? askedAt + leaseMs : 0;
        // Another replica follows: how far it has read is this one's lag too (the metric).
        if (!held) sharedCursorMs = await features.followerCursor();
        return held;
      },
    }),
    onEvents: async (events, window) => {
      await handleEvents(events, window.end, opts);
      failing = undefined;
    },
    onError: (error, window) => {
      // Its code, not its message: /readyz is open to anyone, the message is for the service log.
      failing = errorCodeOf(error);
      opts.metrics.recordLogPollError();
      opts.log({
        level: 'warn',
        msg: 'log api window failed',
        error: error.message,
        ...(window !== undefined && { window: { start: window.start, end: window.end } }),
      });
    },
  });

  return {
    async start() {
      try {
        await poller.start();
      } catch (error) {
        failing = `its checkpoint is unreadable (${errorCodeOf(error)})`;
        opts.log({
          level: 'error',
          msg: 'log api follower not started: its checkpoint is unreadable',
          error: error instanceof Error ? error.message : String(error),
        });
      }
    },
    async stop() {
      await poller.stop();
      await client.close();
    },
    cursor: () => (following() ? poller.cursor() : (sharedCursorMs ?? poller.cursor())),
    isFollowing: following,
    failing: () => failing,
  };
}

/** An error's stable code (RG_ERR_*, a Node error code), else its name: never its message. */
export function errorCodeOf(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.name : 'error';
}

/**
 * The event history's warmth for `/readyz` at `nowMs` (the decisions' clock), against the active
 * policy's `maxLagMs`. Read by this process (`following`): warm within the bound; past it,
 * unavailable while the Log API fails (`failing`: every replica reads the same API), else behind
 * (reading the last day after start, or reading back after the API recovered). Read by another
 * process (a shared store): behind until first warm, then unavailable, since how far that process
 * has read is every replica's lag alike, never this one's own.
 */
export function historyWarmth(o: {
  cursorMs: number | undefined;
  following: boolean;
  failing: string | undefined;
  maxLagMs: number;
  nowMs: number;
  everWarm: boolean;
}): InputWarmth {
  const { cursorMs, maxLagMs, nowMs, everWarm } = o;
  const lagMs = cursorMs === undefined ? Number.POSITIVE_INFINITY : nowMs - cursorMs;
  if (lagMs <= maxLagMs) return { state: 'warm', everWarm: true };
  const behind = {
    everWarm,
    ...(cursorMs !== undefined && { sinceMs: cursorMs + maxLagMs, behindSeconds: lagMs / 1000 }),
  };
  const bound = `at most ${maxLagMs / 1000} s`;
  const read = cursorMs === undefined ? 'not read yet' : `${Math.round(lagMs / 1000)} s behind (${bound})`;
  if (o.following && o.failing !== undefined) {
    return {
      state: 'unavailable',
      ...behind,
      reason: `the Log API is failing: ${o.failing}; history ${read}`,
    };
  }
  if (o.following) return { state: 'behind', ...behind, reason: `reading the Log API history: ${read}` };
  if (!everWarm) {
    return {
      state: 'behind',
      ...behind,
      reason: `waiting for the process that follows the Log API: history ${read}`,
    };
  }
  return {
    state: 'unavailable',
    ...behind,
    reason: `the process that follows the Log API is behind, for every replica: history ${read}`,
  };
}

/**
 * The Log API follower as a component: created when the Log API is configured and `enabled`,
 * polling in the background from start (the first window is due two minutes after start at the
 * earliest), stopped after the window in progress. Its lag and leadership are gauges; the
 * history's warmth (`historyWarmth`) is its readiness check. A process that does not follow
 * (`enabled` false: cluster workers 2..N) reads how far the follower has read from the shared
 * store for that check.
 */
export function logFollowerComponent(
  opts: LogFollowerOptions & {
    enabled: boolean;
    /** The active policy's bound on the history's lag, milliseconds. */
    maxLagMs: () => number;
  },
): Component<LogFollower | undefined, RiskgateMetrics> {
  return {
    name: 'log follower',
    start() {
      const configured = opts.upstream.logsUrl !== undefined && opts.upstream.logApiKey !== undefined;
      const clock = opts.clock ?? systemClock;
      const logs = opts.enabled ? createLogFollower(opts) : undefined;
      if (logs === undefined) return configured ? sharedHistoryReadiness(opts) : { handle: undefined };
      const started = logs.start();
      let everWarm = false;
      return {
        handle: logs,
        stop: async () => {
          await started;
          await logs.stop();
        },
        ready: () => {
          const warmth = historyWarmth({
            cursorMs: logs.cursor(),
            following: logs.isFollowing(),
            failing: logs.failing(),
            maxLagMs: opts.maxLagMs(),
            nowMs: clock.nowMs(),
            everWarm,
          });
          everWarm = warmth.everWarm;
          return { history: warmth };
        },
        observe(metrics) {
          metrics.observeGauge(
            'riskgate_log_follower_lag_seconds',
            'How far behind now the Log API follower reads (at least the 2-minute ingestion delay)',
            () => {
              const cursor = logs.cursor();
              return cursor === undefined ? 0 : (clock.nowMs() - cursor) / 1000;
            },
          );
          metrics.observeGauge(
            'riskgate_log_follower_leader',
            '1 while this process reads the Log API; 0 while another replica holds the lease (its lag is shown)',
            () => (logs.isFollowing() ? 1 : 0),
          );
        },
      };
    },
  };
}

/**
 * The history's readiness check of a process that does not follow the Log API: how far the
 * follower has read, from the shared store (the primary's memory, Redis), every half second.
 */
function sharedHistoryReadiness(
  opts: Pick<LogFollowerOptions, 'features' | 'clock'> & { maxLagMs: () => number },
): ReturnType<Component<undefined, RiskgateMetrics>['start']> {
  const features = opts.features;
  if (features === undefined) return { handle: undefined };
  let cursorMs: number | undefined;
  let everWarm = false;
  const read = () => {
    features.followerCursor().then(
      (c) => {
        cursorMs = c;
      },
      () => {},
    );
  };
  read();
  const timer = setInterval(read, SHARED_CURSOR_EVERY_MS);
  timer.unref();
  return {
    handle: undefined,
    stop: () => clearInterval(timer),
    ready: () => {
      const warmth = historyWarmth({
        cursorMs,
        following: false,
        failing: undefined,
        maxLagMs: opts.maxLagMs(),
        nowMs: (opts.clock ?? systemClock).nowMs(),
        everWarm,
      });
      everWarm = warmth.everWarm;
      return { history: warmth };
    },
  };
}

/**
 * The file checkpoint, read back no later than a day ago: a store that starts empty (memory) gets
 * the last day's history again. Events re-read only drop cached Admin reads, which is harmless.
 */
function rereadLastDay(file: CheckpointStore, now: () => number): CheckpointStore {
  return {
    save: (checkpoint) => file.save(checkpoint),
    async load() {
      const loaded = await file.load();
      if (loaded === undefined) return undefined;
      const dayAgo = Math.floor((now() - HISTORY_RETENTION_MS) / 1000) * 1000;
      return loaded.cursorMs <= dayAgo ? loaded : { version: 1, cursorMs: dayAgo, seen: [] };
    },
  };
}

async function handleEvents(
  events: LogEvent[],
  windowEndMs: number,
  opts: LogFollowerOptions,
): Promise<void> {
  if (opts.features !== undefined) {
    // First: if the store fails, the window is read again, and no event is lost to the history.
    await opts.features.recordHistory(events.flatMap(historyEventsOf), windowEndMs);
  }
  const counts = new Map<string, number>();
  const users = new Set<string>();
  for (const event of events) {
    counts.set(event.type, (counts.get(event.type) ?? 0) + 1);
    const userId = event.user_id;
    if (ADMIN_CACHE_INVALIDATING_EVENTS.has(event.type) && typeof userId === 'string') users.add(userId);
  }
  for (const [type, count] of counts) opts.metrics.recordLogEvents(type, count);
  let done = 0;
  for (const userId of users) {
    opts.admin.invalidateUser(userId);
    if (++done % INVALIDATIONS_PER_TURN === 0) await new Promise((r) => setImmediate(r));
  }
}
