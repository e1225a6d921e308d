import { LRUCache } from 'lru-cache';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import type { CallOptions, UpstreamResult } from '../upstream/upstream-result.ts';

/**
 * A short-lived cache of Admin reads used as decision features, with stale-while-revalidate: a
 * fresh entry is answered at once; a stale one is answered at once while one background request
 * refreshes it; a miss waits for a single shared request (each caller bounded by its own signal).
 * Errors are never cached; a 404 drops the entry.
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

export class ReadCache<T> {
  private readonly entries: LRUCache<string, Entry<T>>;
  private readonly inflight = new Map<string, Promise<UpstreamResult<T>>>();
  private readonly ttlMs: number;
  private readonly staleMs: number;
  /** Hits (fresh or stale), misses, background refreshes. */
  readonly stats = { fresh: 0, stale: 0, misses: 0, refreshes: 0 };

  constructor(
    opts: ReadCacheOptions,
    private readonly now: () => number,
  ) {
    this.entries = new LRUCache({ max: opts.max ?? 10_000 });
    this.ttlMs = opts.ttlMs ?? 5000;
    this.staleMs = opts.staleMs ?? 30_000;
  }

  /** The value for `key`; `load` runs without the caller's signal (others may share it). */
  get(
    key: string,
    load: () => Promise<UpstreamResult<T>>,
    opts: CallOptions | undefined,
  ): Promise<UpstreamResult<T>> {
    const e = this.entries.get(key);
    if (e !== undefined) {
      const age = this.now() - e.fetchedAt;
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
    const p = this.inflight.get(key) ?? this.load(key, load);
    const signal = opts?.signal;
    return signal === undefined ? p : raceSignal(p, signal);
  }

  /** Drops every entry whose key starts with `prefix` or whose value matches `pred`. */
  invalidate(prefix: string | undefined, pred?: (value: T) => boolean): void {
    for (const [k, e] of this.entries.entries()) {
      if ((prefix !== undefined && k.startsWith(prefix)) || (pred !== undefined && pred(e.value)))
        this.entries.delete(k);
    }
  }

  private load(key: string, load: () => Promise<UpstreamResult<T>>): Promise<UpstreamResult<T>> {
    const p = load().then((r) => {
      this.inflight.delete(key);
      if (r.ok) this.entries.set(key, { value: r.value, fetchedAt: this.now() });
      else if (r.error.code === ErrorCode.UPSTREAM_NOT_FOUND || r.error.code === ErrorCode.UPSTREAM_GONE) {
        this.entries.delete(key);
      }
      return r;
    });
    this.inflight.set(key, p);
    return p;
  }
}

function raceSignal<T>(p: Promise<UpstreamResult<T>>, signal: AbortSignal): Promise<UpstreamResult<T>> {
  const started = performance.now();
  const deadline = (): UpstreamResult<T> => ({
    ok: false,
    error: new UpstreamError(ErrorCode.DEADLINE_EXCEEDED, 'admin cached read: decision deadline passed', {
      upstream: 'admin',
    }),
    durationMs: performance.now() - started,
  });
  if (signal.aborted) return Promise.resolve(deadline());
  return new Promise((resolve) => {
    const onAbort = (): void => resolve(deadline());
    signal.addEventListener('abort', onAbort, { once: true });
    void p.then((r) => {
      signal.removeEventListener('abort', onAbort);
      resolve(r);
    });
  });
}
