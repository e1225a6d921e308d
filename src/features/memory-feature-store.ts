import { LRUCache } from 'lru-cache';
import {
  bucketWidthMs,
  COUNTER_BUCKETS,
  type CounterOp,
  type CounterReadings,
  type FeatureStore,
  HISTORY_MAX_EVENTS_PER_USER,
  HISTORY_RETENTION_MS,
  type HistoryEvent,
  type HistoryReading,
  MAX_DISTINCT_MEMBERS,
} from './feature-store.ts';

/**
 * The feature store of one process: counters and history in bounded LRU caches. Everything is
 * synchronous underneath (a read is a few map lookups); the async interface is the shared one.
 */

/** A count per sub-window, in a ring of COUNTER_BUCKETS + 1 slots stamped with their sub-window. */
interface CountEntry {
  kind: 'count';
  stamps: Float64Array;
  counts: Float64Array;
}

/** Distinct members by last sighting, oldest first (Map keeps insertion order). */
interface DistinctEntry {
  kind: 'distinct';
  lastSeen: Map<string, number>;
}

type CounterEntry = CountEntry | DistinctEntry;

const SLOTS = COUNTER_BUCKETS + 1;

export interface MemoryFeatureStoreOptions {
  /**
   * Counter memory, in units of about 120 bytes: a distinct member is one, a count instance (a ring
   * of 13 sub-windows) three. Default 500,000 (about 60 MB at most); past it the least recently
   * used instances go first, so a flood of new keys (a stuffing list's IPs) cannot grow the heap.
   */
  maxCounterUnits?: number;
  /** History events kept, all users together (about 150 bytes each). Default 300,000 (about 45 MB). */
  maxHistoryEvents?: number;
}

export class MemoryFeatureStore implements FeatureStore {
  readonly kind = 'memory';
  readonly durable = false;
  readonly followerCheckpoint = undefined;
  readonly #counters: LRUCache<string, CounterEntry>;
  readonly #history: LRUCache<string, HistoryEvent[]>;
  #cursorMs: number | undefined;
  #lease: { owner: string; untilMs: number } | undefined;

  constructor(options: MemoryFeatureStoreOptions = {}) {
    this.#counters = new LRUCache<string, CounterEntry>({
      maxSize: options.maxCounterUnits ?? 500_000,
      sizeCalculation: (e) => (e.kind === 'count' ? 3 : Math.max(1, e.lastSeen.size)),
      // Expiry is checked on read; nothing sweeps (no timers in a store).
      ttlAutopurge: false,
    });
    this.#history = new LRUCache<string, HistoryEvent[]>({
      maxSize: options.maxHistoryEvents ?? 300_000,
      sizeCalculation: (list) => Math.max(1, list.length),
    });
  }

  /** Synchronous form of `readCounters` (the IPC host answers with it). */
  readCountersNow(ops: readonly CounterOp[], nowMs: number): CounterReadings {
    const counts: number[] = new Array(ops.length);
    const seen: boolean[] = new Array(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i]!;
      const entry = this.#counters.get(op.key);
      counts[i] = 0;
      seen[i] = false;
      if (entry === undefined) continue;
      if (entry.kind === 'count') {
        const bucket = Math.floor(nowMs / bucketWidthMs(op.windowMs));
        let sum = 0;
        for (let s = 0; s < SLOTS; s++) if (bucket - entry.stamps[s]! < SLOTS) sum += entry.counts[s]!;
        counts[i] = sum;
      } else {
        trimDistinct(entry, nowMs - op.windowMs);
        counts[i] = entry.lastSeen.size;
        seen[i] = op.member !== undefined && entry.lastSeen.has(op.member);
      }
    }
    return { counts, seen };
  }

  readCounters(ops: readonly CounterOp[], nowMs: number): Promise<CounterReadings> {
    return Promise.resolve(this.readCountersNow(ops, nowMs));
  }

  /** Synchronous form of `recordCounters`. */
  recordCountersNow(ops: readonly CounterOp[], nowMs: number): void {
    for (const op of ops) {
      const ttl = op.windowMs + bucketWidthMs(op.windowMs);
      let entry = this.#counters.get(op.key);
      if (op.member === undefined) {
        if (entry?.kind !== 'count') {
          entry = {
            kind: 'count',
            stamps: new Float64Array(SLOTS).fill(-1e15),
            counts: new Float64Array(SLOTS),
          };
        }
        const bucket = Math.floor(nowMs / bucketWidthMs(op.windowMs));
        const slot = bucket % SLOTS;
        if (entry.stamps[slot] !== bucket) {
          entry.stamps[slot] = bucket;
          entry.counts[slot] = 0;
        }
        entry.counts[slot]! += 1;
      } else {
        if (entry?.kind !== 'distinct') entry = { kind: 'distinct', lastSeen: new Map() };
        // Re-inserted at the end: the map stays ordered by last sighting.
        entry.lastSeen.delete(op.member);
        entry.lastSeen.set(op.member, nowMs);
        trimDistinct(entry, nowMs - op.windowMs);
        while (entry.lastSeen.size > MAX_DISTINCT_MEMBERS) {
          entry.lastSeen.delete(entry.lastSeen.keys().next().value!);
        }
      }
      // Set again on every record: the TTL restarts and the size is counted afresh.
      this.#counters.set(op.key, entry, { ttl });
    }
  }

  recordCounters(ops: readonly CounterOp[], nowMs: number): Promise<void> {
    this.recordCountersNow(ops, nowMs);
    return Promise.resolve();
  }

  /** Synchronous form of `recordHistory`. */
  recordHistoryNow(events: readonly HistoryEvent[], cursorMs: number): void {
    const touched = new Set<string>();
    for (const e of events) {
      let list = this.#history.get(e.userKey);
      if (list === undefined) {
        list = [];
        this.#history.set(e.userKey, list);
      }
      if (list.some((x) => x.eventId === e.eventId)) continue;
      list.push(e);
      touched.add(e.userKey);
    }
    const oldest = cursorMs - HISTORY_RETENTION_MS;
    for (const userKey of touched) {
      // A flood of users in one window may have evicted an earlier one already.
      const list = this.#history.get(userKey);
      if (list === undefined) continue;
      list.sort((a, b) => a.atMs - b.atMs);
      let drop = 0;
      while (drop < list.length && list[drop]!.atMs < oldest) drop++;
      drop = Math.max(drop, list.length - HISTORY_MAX_EVENTS_PER_USER);
      if (drop > 0) list.splice(0, drop);
      // Set again: the list grew in place, and the cache bounds the events, not the users.
      this.#history.set(userKey, list);
    }
    if (this.#cursorMs === undefined || cursorMs > this.#cursorMs) this.#cursorMs = cursorMs;
  }

  recordHistory(events: readonly HistoryEvent[], cursorMs: number): Promise<void> {
    this.recordHistoryNow(events, cursorMs);
    return Promise.resolve();
  }

  /** Synchronous form of `readHistory`. */
  readHistoryNow(userKey: string, nowMs: number): HistoryReading {
    const list = this.#history.peek(userKey) ?? [];
    const oldest = nowMs - HISTORY_RETENTION_MS;
    return { events: list.filter((e) => e.atMs >= oldest), cursorMs: this.#cursorMs };
  }

  readHistory(userKey: string, nowMs: number): Promise<HistoryReading> {
    return Promise.resolve(this.readHistoryNow(userKey, nowMs));
  }

  followerCursorNow(): number | undefined {
    return this.#cursorMs;
  }

  followerCursor(): Promise<number | undefined> {
    return Promise.resolve(this.#cursorMs);
  }

  /** Synchronous form of `holdFollowerLease`. */
  holdFollowerLeaseNow(owner: string, ttlMs: number, nowMs = Date.now()): boolean {
    if (this.#lease === undefined || this.#lease.owner === owner || this.#lease.untilMs <= nowMs) {
      this.#lease = { owner, untilMs: nowMs + ttlMs };
      return true;
    }
    return false;
  }

  holdFollowerLease(owner: string, ttlMs: number): Promise<boolean> {
    return Promise.resolve(this.holdFollowerLeaseNow(owner, ttlMs));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

function trimDistinct(entry: DistinctEntry, oldestMs: number): void {
  for (const [member, at] of entry.lastSeen) {
    if (at >= oldestMs) break;
    entry.lastSeen.delete(member);
  }
}
