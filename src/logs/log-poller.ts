import { ErrorCode, type UpstreamError } from '../errors/riskgate-error.ts';
import { backoffDelayMs } from '../timing/backoff.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { sleep } from '../timing/sleep.ts';
import { type CheckpointStore, createFileCheckpointStore, type LogCheckpoint } from './log-checkpoint.ts';
import type { LogClient, LogScope, LogWindow } from './log-client.ts';
import { createdAtNs, type LogEvent } from './log-event.ts';

/**
 * Follows a scope's events through the Log API (docs/vendor-api.md#log-paging): windows that tile time
 * exactly (each starts where the previous ended), at most one hour per request, never closer to now than the
 * ingestion delay, each re-reading a short overlap before its start to catch late events, with
 * duplicates dropped by `event_id`. Events are delivered sorted by `created_at`; the checkpoint
 * moves (and is persisted) only after a window was fully read and delivered.
 */

/** Options of `createLogPoller`. Times in milliseconds. */
export interface LogPollerOptions {
  client: Pick<LogClient, 'readWindow'>;
  /** Default `service`. */
  scope?: LogScope;
  /** Checkpoint file path (the default store), or a store. One of the two is required. */
  checkpointFile?: string;
  checkpointStore?: CheckpointStore;
  /**
   * Receives each window's new events, sorted by `created_at`. The checkpoint moves only after it
   * resolves; if it throws, the window is read and delivered again (so make it idempotent by
   * `event_id` to be exactly-once across a crash between the two).
   */
  onEvents: (events: LogEvent[], window: LogWindow) => void | Promise<void>;
  /** Calls `onEvents` for a window without events too (a consumer that tracks how far it has read). Default false. */
  deliverEmptyWindows?: boolean;
  /**
   * Asked before each poll: false skips it (another replica holds the lease on following) and
   * waits `pollIntervalMs`. Default: always poll.
   */
  mayPoll?: () => Promise<boolean>;
  /** Where to begin without a checkpoint, epoch ms. Default: now − `ingestionDelayMs` (new events only). */
  startAt?: number;
  /** Longest request span, overlap included. 2000 to 3600000; default 3600000 (the API's maximum). */
  maxRequestMs?: number;
  /** Re-read before each window's start. Default 30000. */
  overlapMs?: number;
  /**
   * Windows end at least this long before now. At least 120000, the default
   * (docs/vendor-api.md#log-paging).
   */
  ingestionDelayMs?: number;
  /** Pause between polls once caught up. Default 30000. */
  pollIntervalMs?: number;
  /** First pause after a failed window; doubles per failure. Default 1000. */
  backoffInitialMs?: number;
  /** Cap of that pause. Default 60000. */
  backoffMaxMs?: number;
  /** Failures (a window, the checkpoint, `onEvents`), for logs and metrics. */
  onError?: (error: Error, window: LogWindow | undefined) => void;
  /** Windows are placed on its wall time, pauses run on its timers. Default {@link systemClock}. */
  clock?: Clock;
  /** Jitter in [0, 1). Default `Math.random`. */
  random?: () => number;
}

/** What one `pollOnce` did. */
export type PollOutcome =
  | { kind: 'delivered'; window: LogWindow; events: number; duplicates: number; caughtUp: boolean }
  | { kind: 'idle' }
  | { kind: 'failed'; window: LogWindow; error: Error; retryAfterMs?: number };

export interface LogPoller {
  /** Loads the checkpoint and polls in the background until `stop`. */
  start(): Promise<void>;
  /** Stops after the window in progress (its checkpoint is saved if it completes). */
  stop(): Promise<void>;
  /** Reads and delivers the next window, if one is due. Used by `start`; tests drive it directly. */
  pollOnce(): Promise<PollOutcome>;
  /** Start of the next window, epoch ms (after `start` or a first `pollOnce`). */
  cursor(): number | undefined;
}

const MIN_DELAY_MS = 120_000;
const MAX_REQUEST_MS = 3_600_000;
const MAX_START_AGE_MS = 30 * 24 * 3600 * 1000;

const floorSecond = (ms: number) => Math.floor(ms / 1000) * 1000;

/**
 * Creates a poller for one Log API scope (see the module comment for how windows tile time). Does
 * no I/O until `start()` or `pollOnce()`. Throws `TypeError` when neither `checkpointFile` nor
 * `checkpointStore` is given. Defaults (ms): 1 h requests with a 30 s overlap, windows ending
 * 120 s before now, a 30 s pause once caught up, backoff from 1 s to 60 s after a failure.
 */
export function createLogPoller(opts: LogPollerOptions): LogPoller {
  const store =
    opts.checkpointStore ??
    (opts.checkpointFile !== undefined ? createFileCheckpointStore(opts.checkpointFile) : undefined);
  if (store === undefined) throw new TypeError('log poller: give checkpointFile or checkpointStore');
  const scope = opts.scope ?? 'service';
  const clock = opts.clock ?? systemClock;
  const now = () => clock.nowMs();
  const random = opts.random ?? Math.random;
  const delayMs = Math.max(MIN_DELAY_MS, opts.ingestionDelayMs ?? MIN_DELAY_MS);
  const maxRequestMs = Math.min(MAX_REQUEST_MS, Math.max(2000, opts.maxRequestMs ?? MAX_REQUEST_MS));
  const overlapMs = floorSecond(Math.min(Math.max(0, opts.overlapMs ?? 30_000), maxRequestMs - 1000));
  const tileMs = floorSecond(maxRequestMs - overlapMs);
  const pollIntervalMs = opts.pollIntervalMs ?? 30_000;
  const backoffInitial = opts.backoffInitialMs ?? 1000;
  const backoffMax = opts.backoffMaxMs ?? 60_000;

  let state: LogCheckpoint | undefined;
  // No overlap before the very first window of a fresh start: nothing earlier was asked for.
  let overlapDue = false;
  let failures = 0;
  let running = false;
  // Aborted by stop(): ends the pause between windows at once.
  let wake: AbortController | undefined;
  let loop: Promise<void> | undefined;
  let busy: Promise<PollOutcome> | undefined;

  async function ensureState(): Promise<LogCheckpoint> {
    if (state) return state;
    const loaded = await store!.load();
    overlapDue = loaded !== undefined;
    state = loaded ?? {
      version: 1,
      cursorMs: floorSecond(opts.startAt ?? now() - delayMs),
      seen: [],
    };
    return state;
  }

  async function pollOnceInner(): Promise<PollOutcome> {
    const cp = await ensureState();
    const t = now();
    const readableEnd = floorSecond(t - delayMs);
    let cursor = cp.cursorMs;
    const oldest = floorSecond(t - MAX_START_AGE_MS) + 60_000;
    if (cursor < oldest) {
      // Older events can no longer be read: say so, and go on from the oldest readable second.
      opts.onError?.(
        new Error(`log poller: events before ${new Date(oldest).toISOString()} are out of the API's reach`),
        undefined,
      );
      cursor = oldest;
    }
    if (readableEnd - cursor < 1000) return { kind: 'idle' };
    const end = Math.min(cursor + tileMs, readableEnd);
    const overlapStart = overlapDue ? Math.max(oldest, cursor - overlapMs) : cursor;
    const window: LogWindow = { start: cursor, end };
    const request: LogWindow = { start: overlapStart, end };

    const seen = new Set(cp.seen.map(([id]) => id));
    const fresh = new Map<string, { event: LogEvent; ns: bigint }>();
    let duplicates = 0;
    const r = await opts.client.readWindow(scope, request, (event) => {
      if (seen.has(event.event_id) || fresh.has(event.event_id)) {
        duplicates++;
        return;
      }
      // Unreadable times sort last (never block the poller on one odd event).
      fresh.set(event.event_id, { event, ns: createdAtNs(event.created_at) ?? BigInt(end) * 1_000_000n });
    });
    if (!r.ok) return failed(window, r.error);

    const sorted = [...fresh.values()].sort((a, b) => (a.ns < b.ns ? -1 : a.ns > b.ns ? 1 : 0));
    if (sorted.length > 0 || opts.deliverEmptyWindows === true) {
      try {
        await opts.onEvents(
          sorted.map((e) => e.event),
          window,
        );
      } catch (err) {
        return failed(window, err as Error);
      }
    }
    // Remember what the next overlap will re-read: delivered events at or after end − overlap.
    const keepFrom = end - overlapMs;
    const nextSeen: [string, number][] = cp.seen.filter(([, at]) => at >= keepFrom);
    for (const { event, ns } of sorted) {
      const at = Number(ns / 1_000_000n);
      if (at >= keepFrom) nextSeen.push([event.event_id, at]);
    }
    const next: LogCheckpoint = { version: 1, cursorMs: end, seen: nextSeen };
    state = next;
    overlapDue = true;
    failures = 0;
    try {
      await store!.save(next);
    } catch (err) {
      // Delivered already; the in-memory cursor moves on, a restart may repeat this window.
      opts.onError?.(err as Error, window);
    }
    return {
      kind: 'delivered',
      window,
      events: sorted.length,
      duplicates,
      caughtUp: readableEnd - end < 1000,
    };
  }

  function failed(window: LogWindow, error: Error): PollOutcome {
    failures++;
    opts.onError?.(error, window);
    const retryAfterMs =
      (error as UpstreamError).code === ErrorCode.UPSTREAM_RATE_LIMITED
        ? (error as UpstreamError).retryAfterMs
        : undefined;
    return retryAfterMs === undefined
      ? { kind: 'failed', window, error }
      : { kind: 'failed', window, error, retryAfterMs };
  }

  function pollOnce(): Promise<PollOutcome> {
    // One window at a time, whoever asks.
    busy ??= pollOnceInner().finally(() => {
      busy = undefined;
    });
    return busy;
  }

  async function pause(ms: number): Promise<void> {
    wake = new AbortController();
    // At least one timer tick (Node's setTimeout(0) is 1 ms too): a 0 ms interval still yields.
    await sleep(Math.max(1, ms), wake.signal, clock);
  }

  async function run(): Promise<void> {
    while (running) {
      let wait = 0;
      try {
        if (opts.mayPoll !== undefined) {
          let may = false;
          try {
            may = await opts.mayPoll();
          } catch (err) {
            // The lease's store failed: ask again after a pause, not after the backoff cap.
            opts.onError?.(err as Error, undefined);
          }
          if (!may) {
            // Another replica moves the checkpoint meanwhile: read it again before polling next.
            state = undefined;
            if (running) await pause(pollIntervalMs);
            continue;
          }
        }
        const o = await pollOnce();
        if (o.kind === 'idle' || (o.kind === 'delivered' && o.caughtUp)) wait = pollIntervalMs;
        else if (o.kind === 'failed') {
          wait = backoffDelayMs(
            { initialMs: backoffInitial, maxMs: backoffMax, random },
            failures,
            o.retryAfterMs,
          );
        }
      } catch (err) {
        // Checkpoint unreadable and the like: report and keep trying at the backoff cap.
        opts.onError?.(err as Error, undefined);
        wait = backoffMax;
      }
      if (running && wait > 0) await pause(wait);
    }
  }

  return {
    async start() {
      if (running) return;
      await ensureState();
      running = true;
      loop = run();
    },
    async stop() {
      running = false;
      wake?.abort();
      await loop;
      loop = undefined;
    },
    pollOnce,
    cursor: () => state?.cursorMs,
  };
}
