import { LRUCache } from 'lru-cache';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { Clock } from '../timing/clock.ts';
import { raceWithSignal } from '../upstream/abortable.ts';
import { internalError } from '../upstream/upstream-errors.ts';
import type { CallOptions, UpstreamResult } from '../upstream/upstream-result.ts';

/**
 * A short-lived cache of Admin reads used as decision features, with stale-while-revalidate: a
 * fresh entry is answered at once; a stale one is answered at once while one background request
 * refreshes it; a miss waits for a single shared request (each caller bounded by its own signal).
 * Errors are never cached; a 404 or 410 drops the entry.
 *
 * Writes win over reads in flight: every load carries a generation, and `invalidate` both drops
 * the cached entries and makes the loads in flight for them stale. A stale load still answers the
 * callers that were waiting on it (they asked before the write), but its value is never stored,
 * so no read that started before a write can put the old state back as fresh.
 */

/** Cache settings, milliseconds. */
export interface ReadCacheOptions {
  /** Age up to which an entry is fresh. Default 5000. */
  ttlMs?: number;
  /** Further age during which a stale entry is still served while it is refreshed. Default 30000. */
  staleMs?: number;
  /** Entries kept (least recently used dropped first). Default 10000. */
  max?: number;
}

interface Entry<T> {
  value: T;
  fetchedAt: number;
}

interface Load<T> {
  promise: Promise<UpstreamResult<T>>;
  generation: number;
}

export class ReadCache<T> {
  private readonly entries: LRUCache<string, Entry<T>>;
  private readonly inflight = new Map<string, Load<T>>();
  /** Source of load generations; a load may store its value only while it is the key's current one. */
  private generation = 0;
  private readonly ttlMs: number;
  private readonly staleMs: number;
  /** Hits (fresh or stale), misses, background refreshes. */
  readonly stats = { fresh: 0, stale: 0, misses: 0, refreshes: 0 };

  /**
   * @param opts sizes and ages (defaults above).
   * @param clock entries age on its monotonic time.
   * @param operation name of the cached read, for errors (e.g. `get-user`).
   */
  constructor(
    opts: ReadCacheOptions,
    private readonly clock: Clock,
    private readonly operation: string,
  ) {
    this.entries = new LRUCache({ max: opts.max ?? 10_000 });
    this.ttlMs = opts.ttlMs ?? 5000;
    this.staleMs = opts.staleMs ?? 30_000;
  }

  /**
   * The value for `key`. `load` runs without the caller's signal (others may share it); the
   * caller's `opts.signal` only releases that caller. Never rejects.
   */
  get(
    key: string,
    load: () => Promise<UpstreamResult<T>>,
    opts: CallOptions | undefined,
  ): Promise<UpstreamResult<T>> {
    const e = this.entries.get(key);
    if (e !== undefined) {
      const age = this.clock.monotonicMs() - e.fetchedAt;
      if (age < this.ttlMs) {
        this.stats.fresh++;
        return Promise.resolve({ ok: true, value: e.value, durationMs: 0 });
      }
      if (age < this.ttlMs + this.staleMs) {
        this.stats.stale++;
        if (!this.inflight.has(key)) {
          this.stats.refreshes++;
          void this.load(key, load);
        }
        return Promise.resolve({ ok: true, value: e.value, durationMs: 0 });
      }
    }
    this.stats.misses++;
    const p = this.inflight.get(key)?.promise ?? this.load(key, load);
    const signal = opts?.signal;
    return signal === undefined ? p : raceWithSignal(p, signal, 'admin', this.operation);
  }

  /**
   * Drops every entry whose key starts with `prefix` or whose value matches `pred`, and makes the
   * loads in flight for them stale (see above). With `pred`, every load in flight is made stale:
   * what it will return is not known yet.
   */
  invalidate(prefix: string | undefined, pred?: (value: T) => boolean): void {
    for (const [k, e] of this.entries.entries()) {
      if ((prefix !== undefined && k.startsWith(prefix)) || pred?.(e.value)) this.entries.delete(k);
    }
    for (const k of this.inflight.keys()) {
      if (pred !== undefined || (prefix !== undefined && k.startsWith(prefix))) this.inflight.delete(k);
    }
  }

  private load(key: string, load: () => Promise<UpstreamResult<T>>): Promise<UpstreamResult<T>> {
    const generation = ++this.generation;
    const started = performance.now();
    const isCurrent = (): boolean => this.inflight.get(key)?.generation === generation;
    let pending: Promise<UpstreamResult<T>>;
    try {
      pending = load();
    } catch (err) {
      pending = Promise.reject(err);
    }
    const promise = pending
      .then((r) => {
        if (isCurrent()) {
          if (r.ok) this.entries.set(key, { value: r.value, fetchedAt: this.clock.monotonicMs() });
          else if (
            r.error.code === ErrorCode.UPSTREAM_NOT_FOUND ||
            r.error.code === ErrorCode.UPSTREAM_GONE
          ) {
            this.entries.delete(key);
          }
        }
        return r;
      })
      // A bug (loads resolve to results, never reject): answer the waiters rather than leave them hanging.
      .catch(
        (err: unknown): UpstreamResult<T> => ({
          ok: false,
          error: internalError('admin', this.operation, err),
          durationMs: performance.now() - started,
        }),
      )
      .finally(() => {
        if (isCurrent()) this.inflight.delete(key);
      });
    this.inflight.set(key, { promise, generation });
    return promise;
  }
}
