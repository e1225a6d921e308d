import type { AliasedExpression } from 'kysely';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { RiskgateDatabase } from './database.ts';
import { FileWatermark } from './file-watermark.ts';

/**
 * One timer for the control database's change markers (issue 32: an idle riskgate near no CPU).
 * The lists, the rule snoozes and the policy versions each keep a snapshot current by reading a
 * one-row marker and reloading only when it moved; read apart, that was a timer and a query round
 * trip each, several times a second, on a process doing nothing. Here every tick reads all their
 * markers in one query and tells each watcher its value, at the shortest of their intervals, so
 * each propagation bound (the lists' and snoozes' poll, RISKGATE_POLICY_VERSION_POLL_MS) holds as
 * before.
 *
 * On the embedded SQLite file a tick skips even that query when the file and its WAL are as they
 * were when the markers were last read: nothing was committed since, by this process or another
 * sharing the file (a cluster's workers), so each snapshot is still current and is confirmed
 * without a round trip to the database thread. A real read is still made at least every
 * `fullReadEveryMs`, so a database that stops answering is noticed (the snapshots go stale, as
 * before) within that of when it would have been.
 */

/** A marker read by the poll: a scalar subquery on the control database, and who is told its value. */
export interface MarkerWatch {
  /** The marker's scalar subquery (one row, one numeric column), aliased by the poll. */
  marker: { as(alias: string): AliasedExpression<unknown, string> };
  /** How often the marker must be read, milliseconds: the poll ticks at the shortest. */
  pollMs: number;
  /** Longest the poll may confirm the marker from the file alone, ms. Default: the poll's. */
  fullReadEveryMs?: number;
  /**
   * Told the marker as of `readAtMs` (`value` undefined: confirmed unchanged without reading it,
   * the file untouched since the last read), or why it could not be read. Never rejects.
   */
  observe(seen: { value?: number; readAtMs: number } | { error: unknown }): void;
}

export interface MarkerPollOptions {
  /** Timers and the time a read is as of. Default {@link systemClock}. */
  clock?: Clock;
  /**
   * Longest a tick confirms the markers from the file alone, ms (SQLite file only). Default 2000:
   * a failing database is seen within it, well inside the snapshots' 10 s staleness bound.
   */
  fullReadEveryMs?: number;
}

export class MarkerPoll {
  readonly #database: RiskgateDatabase;
  readonly #clock: Clock;
  readonly #fullReadEveryMs: number;
  readonly #file: FileWatermark | undefined;
  #watches: MarkerWatch[] = [];
  #timer: ReturnType<Clock['setTimeout']> | undefined;
  #tickMs = 0;
  #running = false;
  /** The file as it was just before the markers were last read; undefined: read them. */
  #readMark: string | undefined;
  #lastReadMs = Number.NEGATIVE_INFINITY;
  /** Ticks that read the markers, and ticks that confirmed them from the file alone, since start. */
  reads = 0;
  skips = 0;

  constructor(database: RiskgateDatabase, options: MarkerPollOptions = {}) {
    this.#database = database;
    this.#clock = options.clock ?? systemClock;
    this.#fullReadEveryMs = options.fullReadEveryMs ?? 2000;
    this.#file = database.file === undefined ? undefined : new FileWatermark(database.file);
  }

  /** Starts reading `watch`'s marker (the timer starts with the first watch); returns its removal. */
  watch(watch: MarkerWatch): () => void {
    this.#watches.push(watch);
    this.#reschedule();
    return () => {
      this.#watches = this.#watches.filter((w) => w !== watch);
      this.#reschedule();
    };
  }

  /** Reads every marker now (a local change: tests and callers that cannot wait for a tick). */
  async tick(): Promise<void> {
    if (this.#running || this.#watches.length === 0) return;
    this.#running = true;
    try {
      await this.#tick(this.#watches);
    } finally {
      this.#running = false;
    }
  }

  #reschedule(): void {
    if (this.#watches.length === 0) {
      this.#clock.clearTimeout(this.#timer);
      this.#timer = undefined;
      return;
    }
    const tickMs = Math.min(...this.#watches.map((w) => w.pollMs));
    if (this.#timer !== undefined && tickMs === this.#tickMs) return;
    this.#tickMs = tickMs;
    this.#arm();
  }

  /** The next tick in `#tickMs`; the one after is armed when it ends (unless a watch change armed one). */
  #arm(): void {
    this.#clock.clearTimeout(this.#timer);
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      void this.tick().finally(() => {
        if (this.#timer === undefined && this.#watches.length > 0) this.#arm();
      });
    }, this.#tickMs);
    this.#timer.unref();
  }

  async #tick(watches: readonly MarkerWatch[]): Promise<void> {
    const startedMs = this.#clock.nowMs();
    const fullReadEveryMs = Math.min(
      this.#fullReadEveryMs,
      ...watches.map((w) => w.fullReadEveryMs ?? Infinity),
    );
    if (this.#file?.unchangedSince(this.#readMark) && startedMs - this.#lastReadMs < fullReadEveryMs) {
      this.skips++;
      for (const w of watches) w.observe({ readAtMs: startedMs });
      return;
    }
    this.#readMark = this.#file?.mark();
    let row: Record<string, unknown> | undefined;
    try {
      // One statement, `select (marker 0) as m0, (marker 1) as m1, ...`: each marker's own query.
      row = (await this.#database.db
        .selectNoFrom(watches.map((w, i) => w.marker.as(`m${i}`)) as never)
        .executeTakeFirst()) as Record<string, unknown> | undefined;
      this.reads++;
      this.#lastReadMs = startedMs;
    } catch (error) {
      this.#readMark = undefined;
      for (const w of watches) w.observe({ error });
      return;
    }
    for (const [i, w] of watches.entries())
      w.observe({ value: Number(row?.[`m${i}`] ?? 0), readAtMs: startedMs });
  }
}
