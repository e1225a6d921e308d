import { isRefusedRow } from '../database/refused-row.ts';
import { safeErrorText } from '../errors/safe-error-text.ts';
import { backoffDelayMs } from '../timing/backoff.ts';
import { sleep } from '../timing/sleep.ts';
import { settlesWithin, withTimeout } from '../timing/with-timeout.ts';
import type { DecisionSink, Retention } from './decision-batch.ts';
import type { DecisionStoreStatus } from './decision-query.ts';
import type { Reject } from './decision-rejects.ts';
import { type StoreOp, storeOpOf } from './decision-rows.ts';

/**
 * Carries decision-log records into the store off the request path: `push` only appends to a
 * bounded buffer (never blocks, never throws); a timer writes them in batches, one transaction
 * each, under a deadline. A slow or dead store keeps the buffer and is retried with bounded
 * backoff; past `maxPending` records waiting, new ones are dropped and counted (exactly: every
 * record pushed is, in the end, written, dropped, rejected, or still pending). A record the
 * database refuses (a poison row) does not hold its batch: the batch is split in halves until the
 * refused records are alone, those are set aside (`keepRejected`, counted in `rejected`, one log
 * line each) and the rest is written. Between batches, retention deletes the oldest decisions in
 * bounded steps.
 */

export interface DecisionStoreWriterOptions {
  sink: DecisionSink;
  /** Records waiting (including a batch being written) before new ones are dropped. Default 20 000. */
  maxPending?: number;
  /** Most records per transaction. Default `STORE_BATCH_MAX` (2,000). */
  batchSize?: number;
  /** Longest a record waits for a batch to fill, milliseconds. Default `STORE_INTERVAL_MS` (1000). */
  intervalMs?: number;
  /** A batch write not done within this is a failure (and retried), milliseconds. Default 5000. */
  writeTimeoutMs?: number;
  /** Retry delays after failed writes, milliseconds. Default 100 doubling to 5000. */
  backoff?: { initialMs: number; maxMs: number };
  /** Retention; none when absent. */
  retention?: Retention;
  /** How often retention runs, milliseconds. Default 60 000. */
  pruneEveryMs?: number;
  /**
   * Told when writes start failing (with the reason), when the reason changes while they fail, and
   * when they succeed again (undefined).
   */
  onWritingChange?: (error: string | undefined) => void;
  /** Told of every failed write's error (a damaged file is set aside by whoever owns it). */
  onWriteError?: (error: unknown) => void;
  /**
   * Keeps records the database refused (set aside from their batch, which is written without
   * them). Default: none kept (still counted and logged).
   */
  keepRejected?: (rejects: Reject[]) => Promise<void>;
  /** Where set-aside records and records lost on close are logged. Default: not logged. */
  log?: (line: Record<string, unknown>) => void;
  /**
   * The decision log's redaction, for a record whose line the log did not write (the log off, or
   * the record dropped there): the store keeps what the log would have. Default: none.
   */
  redact?: (record: object) => object;
}

/**
 * How long a record waits for its batch by default, milliseconds. Each batch is a transaction on
 * the writer's thread, paid on the process's core: its commit writes every page the batch touched
 * to the WAL (each index's, once however many of its rows landed there), plus the hour counts'
 * upserts (one per group). At a few hundred decisions a second, batches of a second cost the
 * process ~100 µs less per record than batches of 100 ms (bench/RESULTS.md, "Issue 32: the SQLite
 * writer's cost per record"). The console is then at most about a second behind the decisions; an
 * operator's own write (a label) is flushed at once (`flush`); a SIGKILL loses at most a second of
 * records from the store (the decision log has them).
 */
export const STORE_INTERVAL_MS = 1000;

/**
 * Most records in one batch by default: batches are a second's records (`STORE_INTERVAL_MS`) up to
 * this, which a second of this host's busiest closed loop (~1,000 decisions/s) stays under. A
 * batch's pages are shared by its rows (each index's leaves, the commit's WAL frames, the next
 * checkpoint's copies): over 100,000 stored, batches of 1,000 cost the SQLite writer ~3.3 WAL frames
 * a decision against ~4.7 in batches of 500 (bench/RESULTS.md, "the decision store's writer thread
 * per stored decision"). The bound keeps one transaction (after an outage, the buffer's backlog)
 * well inside the write deadline.
 */
export const STORE_BATCH_MAX = 2000;

interface Entry {
  record: object;
  atMs: number;
  op?: StoreOp | undefined;
  mapped?: boolean;
}

export type WriterStatus = Omit<DecisionStoreStatus, 'engine'>;

export { safeErrorText };

export class DecisionStoreWriter {
  readonly #o: DecisionStoreWriterOptions;
  readonly #maxPending: number;
  readonly #batchSize: number;
  #queue: Entry[] = [];
  #dropped = 0;
  #written = 0;
  #rejected = 0;
  #writing = true;
  #lastError: string | undefined;
  #failures = 0;
  #busy = false;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  #pruneTimer: NodeJS.Timeout | undefined;
  #pruneDue = false;
  #idleWaiters: (() => void)[] = [];

  constructor(options: DecisionStoreWriterOptions) {
    this.#o = options;
    this.#maxPending = options.maxPending ?? 20_000;
    this.#batchSize = options.batchSize ?? STORE_BATCH_MAX;
    if (options.retention !== undefined) {
      this.#pruneTimer = setInterval(() => {
        this.#pruneDue = true;
        this.#schedule(0);
      }, options.pruneEveryMs ?? 60_000);
      this.#pruneTimer.unref();
    }
  }

  /** Keeps `record` for the next batch, or counts it dropped when the buffer is full. */
  push(record: object): void {
    if (this.#closed || this.#queue.length >= this.#maxPending) {
      this.#dropped++;
      return;
    }
    this.#queue.push({ record, atMs: Date.now() });
    if (this.#queue.length >= this.#batchSize) this.#schedule(0);
    else this.#schedule(this.#o.intervalMs ?? STORE_INTERVAL_MS);
  }

  status(): WriterStatus {
    const oldest = this.#queue[0];
    return {
      writing: this.#writing,
      pending: this.#queue.length,
      dropped: this.#dropped,
      written: this.#written,
      rejected: this.#rejected,
      lagMs: oldest === undefined ? 0 : Math.max(0, Date.now() - oldest.atMs),
      ...(!this.#writing && this.#lastError !== undefined && { lastError: this.#lastError }),
    };
  }

  /** Resolves once every record pushed so far is written, or `timeoutMs` passed (false then). */
  async flush(timeoutMs: number): Promise<boolean> {
    if (this.#queue.length === 0 && !this.#busy) return true;
    const idle = new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
    this.#schedule(0);
    return settlesWithin(idle, timeoutMs, { ref: false });
  }

  /**
   * Writes what is waiting for at most `timeoutMs`, then stops: records still waiting are counted
   * dropped. Closes the sink.
   */
  async close(timeoutMs: number): Promise<void> {
    clearInterval(this.#pruneTimer);
    this.#pruneDue = false;
    await this.flush(timeoutMs);
    this.#closed = true;
    clearTimeout(this.#timer);
    const lost = this.#queue.length;
    this.#dropped += lost;
    this.#queue = [];
    if (lost > 0) {
      this.#o.log?.({
        level: 'error',
        msg: 'decision store: records not written by the stop deadline are dropped',
        dropped: lost,
        timeoutMs,
        ...(this.#lastError !== undefined && { lastError: this.#lastError }),
      });
    }
    await this.#o.sink.close();
  }

  /** Runs a batch after `delayMs`; an earlier run already due is kept, a later one brought forward. */
  #schedule(delayMs: number): void {
    if (this.#closed || this.#busy) return;
    if (this.#timer !== undefined) {
      if (delayMs > 0) return;
      clearTimeout(this.#timer);
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#run();
    }, delayMs);
    this.#timer.unref();
  }

  async #run(): Promise<void> {
    if (this.#busy || this.#closed) return;
    this.#busy = true;
    let retryInMs: number | undefined;
    try {
      if (this.#queue.length > 0) retryInMs = await this.#writeBatch();
      if (retryInMs === undefined && this.#pruneDue) await this.#prune();
    } finally {
      this.#busy = false;
    }
    if (this.#queue.length === 0 && !this.#pruneDue) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const w of waiters) w();
      return;
    }
    this.#schedule(
      retryInMs ??
        (this.#queue.length >= this.#batchSize || this.#pruneDue
          ? 0
          : (this.#o.intervalMs ?? STORE_INTERVAL_MS)),
    );
  }

  /** Writes the oldest batch; on failure, waits out the backoff and returns 0 (retry at once after). */
  async #writeBatch(): Promise<number | undefined> {
    const batch = this.#queue.slice(0, this.#batchSize);
    const kept: Entry[] = [];
    for (const entry of batch) {
      if (!entry.mapped) {
        entry.op = storeOpOf(entry.record, entry.atMs, this.#o.redact);
        entry.mapped = true;
      }
      if (entry.op !== undefined) kept.push(entry);
    }
    const attempt = kept.length === 0 ? Promise.resolve([]) : this.#writeSplitting(kept);
    const timeoutMs = this.#o.writeTimeoutMs ?? 5000;
    let refused: { entry: Entry; error: unknown }[];
    try {
      refused = await withTimeout(attempt, {
        timeoutMs,
        ref: false,
        onTimeout: () => new Error(`a batch write took longer than ${timeoutMs} ms`),
      });
    } catch (error) {
      this.#o.onWriteError?.(error);
      this.#failures++;
      const text = safeErrorText(error);
      // Told when writes start failing, and again when the cause changes while they fail (a
      // stalled store that then fills its disk): the log says what is wrong now, not only first.
      if (this.#writing || text !== this.#lastError) this.#o.onWritingChange?.(text);
      this.#writing = false;
      this.#lastError = text;
      const backoff = this.#o.backoff ?? { initialMs: 100, maxMs: 5000 };
      // The timed-out write may still be running (it may land: writes are idempotent): the next one
      // waits for it, bounded by the backoff's longest wait, so a stalled store holds one at a time.
      await Promise.all([
        sleep(backoffDelayMs(backoff, this.#failures)),
        settlesWithin(
          attempt.catch(() => {}),
          backoff.maxMs,
          { ref: false },
        ),
      ]);
      return 0;
    }
    // close() may have emptied the queue meanwhile (counting it dropped): take only what is left.
    const done = Math.min(batch.length, this.#queue.length);
    this.#queue.splice(0, done);
    if (refused.length > 0 && done > 0) await this.#setAside(refused);
    this.#written += done - (done > 0 ? refused.length : 0);
    this.#failures = 0;
    if (!this.#writing) this.#o.onWritingChange?.(undefined);
    this.#writing = true;
    this.#lastError = undefined;
    return undefined;
  }

  /**
   * Writes `entries` in one transaction; when the database refuses a row, writes each half on its
   * own, down to the refused records alone, which are returned (the rest is written). Any other
   * failure (the store down, a full disk) rejects: the whole batch is retried.
   */
  async #writeSplitting(entries: Entry[]): Promise<{ entry: Entry; error: unknown }[]> {
    try {
      await this.#o.sink.write(entries.map((e) => e.op!));
      return [];
    } catch (error) {
      if (!isRefusedRow(error)) throw error;
      if (entries.length === 1) return [{ entry: entries[0]!, error }];
      const half = Math.ceil(entries.length / 2);
      const first = await this.#writeSplitting(entries.slice(0, half));
      return [...first, ...(await this.#writeSplitting(entries.slice(half)))];
    }
  }

  /** Counts, logs and keeps the refused records (keeping them may fail too: then only counted and logged). */
  async #setAside(refused: { entry: Entry; error: unknown }[]): Promise<void> {
    const rejects = refused.map(({ entry, error }) => ({
      record: entry.record,
      error: safeErrorText(error),
      atMs: Date.now(),
    }));
    let kept = this.#o.keepRejected !== undefined;
    try {
      await this.#o.keepRejected?.(rejects);
    } catch {
      kept = false;
    }
    for (const r of rejects) {
      const id = (r.record as { decisionId?: unknown }).decisionId;
      this.#o.log?.({
        level: 'error',
        msg: 'decision store: a record the database refused is set aside',
        decisionId: typeof id === 'string' ? id : undefined,
        kind: (r.record as { kind?: unknown }).kind,
        error: r.error,
        kept: kept ? 'decision_reject' : 'not kept',
      });
    }
    // Counted last: a status that says a record was set aside has its row and its log line.
    this.#rejected += refused.length;
  }

  /** One retention step per run, so writes go on between steps; due again while there is more. */
  async #prune(): Promise<void> {
    const retention = this.#o.retention;
    if (retention === undefined) {
      this.#pruneDue = false;
      return;
    }
    try {
      const deleted = await withTimeout(this.#o.sink.prune(retention, Date.now()), {
        timeoutMs: this.#o.writeTimeoutMs ?? 5000,
        ref: false,
        onTimeout: () => new Error('retention step timed out'),
      });
      this.#pruneDue = deleted >= retention.chunk;
    } catch {
      // A failing store fails the writes too, which say so; retention tries again next period.
      this.#pruneDue = false;
    }
  }
}
