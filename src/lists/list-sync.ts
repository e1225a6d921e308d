import type { MarkerPoll, MarkerWatch } from '../database/marker-poll.ts';
import { ErrorCode, UpstreamError, type UpstreamName } from '../errors/riskgate-error.ts';
import type { ListLookup } from '../policy/policy-types.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { UpstreamResult } from '../upstream/upstream-result.ts';
import { ListSnapshot, type SnapshotEntry } from './list-snapshot.ts';

/**
 * Keeps this process's list snapshot current: every `pollMs` it reads the change marker (one
 * tiny row), and reloads the entries only when another replica (or this one) changed them, so a
 * change anywhere is seen everywhere within a poll and a load. A decision reads the snapshot in
 * memory and never waits on the database.
 *
 * A snapshot nobody could confirm for `staleAfterMs` is unavailable to decisions, never used as
 * if current: a deny list that cannot be read must not turn permissive silently. Rules reading it
 * are then skipped with the lists' onUnavailable, and the degraded floor (policies/README.md,
 * "Degraded decisions") holds the verdict at challenge at least when a risk-raising rule reads it.
 */

/** How often the change marker is read, milliseconds. */
export const DEFAULT_LIST_POLL_MS = 500;
/** How long an unconfirmed snapshot is still used, milliseconds. */
export const DEFAULT_LIST_STALE_AFTER_MS = 10_000;

/** What a polled snapshot reads: the cheap change marker, and the active rows as of a version. */
export interface SnapshotSource<E> {
  version(): Promise<number>;
  loadActive(nowMs: number): Promise<{ version: number; entries: E[] }>;
  /** The marker's query, for a shared {@link MarkerPoll} to read with the others. */
  marker?(): MarkerWatch['marker'];
}

export interface ListSyncOptions {
  store: SnapshotSource<SnapshotEntry>;
  /** Default `DEFAULT_LIST_POLL_MS` (500). */
  pollMs?: number;
  /** Default `DEFAULT_LIST_STALE_AFTER_MS` (10 000). */
  staleAfterMs?: number;
  /** Snapshots are confirmed on its wall time (decisions read them at theirs). Default {@link systemClock}. */
  clock?: Clock;
  /** Told of a failed refresh (once per failure streak) and of the recovery. */
  log?: (line: Record<string, unknown>) => void;
  /**
   * The control database's one timer (src/database/marker-poll.ts): the marker is read there with
   * the others instead of on a timer of its own (when the store gives its `marker`).
   */
  poll?: MarkerPoll | undefined;
}

/** What a decision reads: the snapshot, or why it cannot be used. */
export interface ListReader {
  read(nowMs: number): UpstreamResult<ListLookup>;
}

/** What a kind of polled snapshot is: how it is built, what its staleness is called. */
export interface PolledSnapshotKind<E, S extends { readonly unreadable: readonly string[] }> {
  /** The snapshot of `entries`, with the rows it could not use named in its `unreadable`. */
  build(entries: E[]): S;
  /** The code of a stale snapshot's unavailability. */
  code: ErrorCode;
  /** What it is called in log lines (`list`, `snooze`). */
  name: string;
  /** Its upstream name in a stale snapshot's error. */
  upstream: UpstreamName;
}

/**
 * A snapshot of control-state rows kept in memory and polled (the lists here; the rule snoozes,
 * src/snoozes/, the same way): see the comment at the top of this file.
 */
export class PolledSnapshot<E, S extends { readonly unreadable: readonly string[] }> {
  readonly #o: Required<Omit<ListSyncOptions, 'log' | 'store' | 'poll'>> &
    Pick<ListSyncOptions, 'log' | 'poll'> & { store: SnapshotSource<E> };
  readonly #kind: PolledSnapshotKind<E, S>;
  #snapshot: S | undefined;
  #version = -1;
  /** When the snapshot was last confirmed current (epoch ms). */
  #confirmedMs = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;
  #unwatch: (() => void) | undefined;
  #running: Promise<void> | undefined;
  #failing = false;
  #lastError: string | undefined;
  /** Refreshes that failed, since start. */
  failures = 0;
  /** Reloads of the entries (the marker changed), since start. */
  reloads = 0;

  constructor(
    options: Omit<ListSyncOptions, 'store'> & { store: SnapshotSource<E> },
    kind: PolledSnapshotKind<E, S>,
  ) {
    this.#kind = kind;
    this.#o = {
      pollMs: DEFAULT_LIST_POLL_MS,
      staleAfterMs: DEFAULT_LIST_STALE_AFTER_MS,
      clock: systemClock,
      ...options,
    };
  }

  /** Loads the first snapshot (rejects when the database does not answer), then polls. */
  async start(): Promise<void> {
    // A database that does not answer at start does not stop riskgate: until a poll loads the
    // lists, rules reading them see them unavailable (their onUnavailable and the degraded floor).
    await this.refresh(true).catch(() => {});
    const marker = this.#o.store.marker?.();
    if (this.#o.poll !== undefined && marker !== undefined) {
      this.#unwatch = this.#o.poll.watch({
        marker,
        pollMs: this.#o.pollMs,
        // Often enough that a database which stops answering makes the snapshot stale on time.
        fullReadEveryMs: this.#o.staleAfterMs / 4,
        observe: (seen) => this.#observe(seen),
      });
      return;
    }
    this.#timer = setInterval(() => void this.refresh(false).catch(() => {}), this.#o.pollMs);
    this.#timer.unref();
  }

  stop(): Promise<void> {
    this.#unwatch?.();
    clearInterval(this.#timer);
    // A refresh failing as the process stops (the database gone) was reported already: not a failed stop.
    return this.#running?.catch(() => {}) ?? Promise.resolve();
  }

  /**
   * Reads the marker and reloads when it moved (or when `force`). One refresh at a time: a call
   * during one waits for it. Rejects when the database fails; the snapshot is then unconfirmed.
   */
  refresh(force = false): Promise<void> {
    if (this.#running !== undefined)
      return this.#running.then(() => (force ? this.refresh(true) : undefined));
    this.#running = this.#refresh(force).finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #refresh(force: boolean): Promise<void> {
    const startedMs = this.#o.clock.nowMs();
    try {
      const version = await this.#o.store.version();
      if (force || version !== this.#version || this.#snapshot === undefined) {
        const loaded = await this.#o.store.loadActive(startedMs);
        const built = this.#kind.build(loaded.entries);
        this.#reportUnreadable(built.unreadable, this.#snapshot?.unreadable.length ?? 0);
        this.#snapshot = built;
        this.#version = loaded.version;
        this.reloads++;
      }
      this.#confirmed(startedMs);
    } catch (error) {
      this.#failed(error);
      throw error;
    }
  }

  /**
   * The shared poll's reading of the marker: unchanged (or the file untouched) confirms the
   * snapshot without a query of its own; moved, it reloads; unreadable, the snapshot is unconfirmed.
   */
  #observe(seen: Parameters<MarkerWatch['observe']>[0]): void {
    if ('error' in seen) {
      // A refresh under way reports its own outcome.
      if (this.#running === undefined) this.#failed(seen.error);
      return;
    }
    if (this.#snapshot === undefined || (seen.value !== undefined && seen.value !== this.#version)) {
      void this.refresh(false).catch(() => {});
      return;
    }
    // A refresh under way may be reloading a change the marker does not show yet: it confirms.
    if (this.#running === undefined && !(this.#failing && seen.value === undefined))
      this.#confirmed(seen.readAtMs);
  }

  /** Confirmed as of when the read started: a slow read does not make it look fresher. */
  #confirmed(startedMs: number): void {
    this.#confirmedMs = Math.max(this.#confirmedMs, startedMs);
    if (this.#failing) this.#o.log?.({ level: 'info', msg: `${this.#kind.name} snapshot current again` });
    this.#failing = false;
    this.#lastError = undefined;
  }

  #failed(error: unknown): void {
    this.failures++;
    if (!this.#failing) {
      this.#o.log?.({
        level: 'warn',
        msg: `${this.#kind.name} snapshot refresh failed`,
        error: (error as Error).message,
      });
    }
    this.#failing = true;
    // Its code, not its message (which may name a host): it is shown on /readyz.
    const code = (error as { code?: unknown }).code;
    this.#lastError = typeof code === 'string' ? code : (error as Error).name;
  }

  /** How old the snapshot's confirmation is, milliseconds (Infinity before the first). */
  ageMs(nowMs = this.#o.clock.nowMs()): number {
    return nowMs - this.#confirmedMs;
  }

  /**
   * Why the last refresh failed (the database error's code, else its name), while refreshes fail;
   * undefined once one succeeds (and before the first).
   */
  lastError(): string | undefined {
    return this.#lastError;
  }

  /** The snapshot itself (counts for the API); undefined before the first load. */
  /**
   * Rows of the current snapshot it could not use (a hand-edited value that is not one of its
   * kind): left out of what decisions read, so a deny-list entry or a snooze of that row does not
   * apply. A gauge of each kind and a warning whenever their number changes say so.
   */
  unreadableRows(): number {
    return this.#snapshot?.unreadable.length ?? 0;
  }

  #reportUnreadable(unreadable: readonly string[], before: number): void {
    if (unreadable.length === before) return;
    this.#o.log?.({
      level: unreadable.length > 0 ? 'warn' : 'info',
      msg:
        unreadable.length > 0
          ? `${this.#kind.name} rows left out: their values cannot be read (fix or remove them)`
          : `${this.#kind.name} rows all readable again`,
      unreadable: unreadable.length,
      rows: unreadable.slice(0, 10),
    });
  }

  snapshot(): S | undefined {
    return this.#snapshot;
  }

  read(nowMs: number): UpstreamResult<S> {
    const snapshot = this.#snapshot;
    if (snapshot !== undefined && nowMs - this.#confirmedMs <= this.#o.staleAfterMs) {
      return { ok: true, value: snapshot, durationMs: 0 };
    }
    const error = new UpstreamError(
      this.#kind.code,
      `the ${this.#kind.name} snapshot was last confirmed ${Math.round(this.ageMs(nowMs))} ms ago (bound ${this.#o.staleAfterMs} ms)`,
      { upstream: this.#kind.upstream },
    );
    return { ok: false, error, durationMs: 0 };
  }
}

/** The runtime lists' snapshot, as decisions read it. */
export class ListSync extends PolledSnapshot<SnapshotEntry, ListSnapshot> implements ListReader {
  constructor(options: ListSyncOptions) {
    super(options, {
      build: (entries) => new ListSnapshot(entries),
      code: ErrorCode.LISTS_UNAVAILABLE,
      name: 'list',
      upstream: 'lists',
    });
  }
}
