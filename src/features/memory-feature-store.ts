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

/**
 * A count per sub-window, in a ring of COUNTER_BUCKETS + 1 slots stamped with their sub-window:
 * `ring[slot]` is the slot's sub-window, `ring[SLOTS + slot]` its count (one array: a typed array
 * costs some 200 bytes before its first element).
 */
interface CountEntry {
  kind: 'count';
  ring: Float64Array;
  /** The size the cache holds for this entry, bytes. */
  bytes: number;
}

/** Distinct members by last sighting, oldest first (Map keeps insertion order). */
interface DistinctEntry {
  kind: 'distinct';
  lastSeen: Map<string, number>;
  /** The size the cache holds for this entry, bytes. */
  bytes: number;
}

type CounterEntry = CountEntry | DistinctEntry;

/** One user's events, oldest first. */
interface HistoryList {
  events: HistoryEvent[];
  /** The size the cache holds for this list, bytes. */
  bytes: number;
}

const SLOTS = COUNTER_BUCKETS + 1;

/**
 * What the store's entries cost in the heap, bytes, each with its key and its share of the LRU's
 * own arrays and map. Measured with bench/feature-store-memory.ts (heap used and array buffers
 * after a full GC, Node 24, one process: the dearer case, as a digest sliced from its hash keeps
 * the whole hash string; through the workers' IPC the strings are flat and cost less): a new key's
 * count and one-member distinct counter together 1,186 (697 and 577 apart); a distinct counter's
 * member 125-148 more (its digest, the map entry and the map's spare capacity); a user's history
 * 604 with one event, 307-309 an event at 100-1,000 (the event object, its id and key strings, the
 * array slot). Rounded up: the bound errs toward evicting early, never toward growing past it.
 */
export const ENTRY_BYTES = {
  count: 720,
  distinct: 480,
  distinctMember: 150,
  history: 360,
  historyEvent: 320,
} as const;

/** Counter memory by default, bytes (64 MiB). */
export const DEFAULT_MAX_COUNTER_BYTES = 64 * 1024 * 1024;
/** History memory by default, bytes (48 MiB: some 150,000 events). */
export const DEFAULT_MAX_HISTORY_BYTES = 48 * 1024 * 1024;

export interface MemoryFeatureStoreOptions {
  /**
   * Counter memory, bytes, as priced by ENTRY_BYTES. Default DEFAULT_MAX_COUNTER_BYTES (64 MiB).
   * Past it the least recently used counter instances go first, so a flood of new keys (a stuffing
   * list's IPs) or of new members (distinct IPs per account) cannot grow the heap. One distinct
   * counter holds at most MAX_DISTINCT_MEMBERS members (about 150 KB).
   */
  maxCounterBytes?: number;
  /**
   * History memory, bytes, all users together, as priced by ENTRY_BYTES. Default
   * DEFAULT_MAX_HISTORY_BYTES (48 MiB); past it the least recently recorded users go first.
   */
  maxHistoryBytes?: number;
}

/** The price of a counter entry, bytes (ENTRY_BYTES). */
function counterEntryBytes(entry: CounterEntry): number {
  return entry.kind === 'count'
    ? ENTRY_BYTES.count
    : ENTRY_BYTES.distinct + ENTRY_BYTES.distinctMember * entry.lastSeen.size;
}

/** The price of a user's history, bytes (ENTRY_BYTES). */
export function historyListBytes(events: readonly HistoryEvent[]): number {
  return ENTRY_BYTES.history + ENTRY_BYTES.historyEvent * events.length;
}

export class MemoryFeatureStore implements FeatureStore {
  readonly kind = 'memory';
  readonly durable = false;
  readonly followerCheckpoint = undefined;
  readonly #counters: LRUCache<string, CounterEntry>;
  readonly #history: LRUCache<string, HistoryList>;
  #cursorMs: number | undefined;
  #lease: { owner: string; untilMs: number } | undefined;

  constructor(options: MemoryFeatureStoreOptions = {}) {
    // Sizes are given on every set (`cache`): lru-cache sizes a value only when it is new.
    this.#counters = new LRUCache<string, CounterEntry>({
      maxSize: options.maxCounterBytes ?? DEFAULT_MAX_COUNTER_BYTES,
      // Expiry is checked on read; nothing sweeps (no timers in a store).
      ttlAutopurge: false,
      // Nor lru-cache's own: by default it keeps the time for 1 ms behind a timer, armed on nearly
      // every decision's record at a low rate, each firing a turn of the event loop of its own.
      ttlResolution: 0,
    });
    this.#history = new LRUCache<string, HistoryList>({
      maxSize: options.maxHistoryBytes ?? DEFAULT_MAX_HISTORY_BYTES,
    });
  }

  /** What the store holds now, bytes as priced by ENTRY_BYTES (each at most its bound). */
  heldBytes(): { counters: number; history: number } {
    return { counters: this.#counters.calculatedSize, history: this.#history.calculatedSize };
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
        for (let s = 0; s < SLOTS; s++) if (bucket - entry.ring[s]! < SLOTS) sum += entry.ring[SLOTS + s]!;
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
          const ring = new Float64Array(2 * SLOTS);
          ring.fill(-1e15, 0, SLOTS);
          entry = { kind: 'count', ring, bytes: 0 };
        }
        const bucket = Math.floor(nowMs / bucketWidthMs(op.windowMs));
        const slot = bucket % SLOTS;
        if (entry.ring[slot] !== bucket) {
          entry.ring[slot] = bucket;
          entry.ring[SLOTS + slot] = 0;
        }
        entry.ring[SLOTS + slot]! += 1;
      } else {
        if (entry?.kind !== 'distinct') entry = { kind: 'distinct', lastSeen: new Map(), bytes: 0 };
        // Re-inserted at the end: the map stays ordered by last sighting.
        entry.lastSeen.delete(op.member);
        entry.lastSeen.set(op.member, nowMs);
        trimDistinct(entry, nowMs - op.windowMs);
        while (entry.lastSeen.size > MAX_DISTINCT_MEMBERS) {
          entry.lastSeen.delete(entry.lastSeen.keys().next().value!);
        }
      }
      // Set again on every record: the TTL restarts and the size is counted afresh.
      cache(this.#counters, op.key, entry, counterEntryBytes(entry), ttl);
    }
  }

  recordCounters(ops: readonly CounterOp[], nowMs: number): Promise<void> {
    this.recordCountersNow(ops, nowMs);
    return Promise.resolve();
  }

  /** Synchronous form of `recordHistory`. */
  recordHistoryNow(events: readonly HistoryEvent[], cursorMs: number): void {
    const byUser = new Map<string, HistoryEvent[]>();
    for (const e of events) {
      const fresh = byUser.get(e.userKey);
      if (fresh === undefined) byUser.set(e.userKey, [e]);
      else fresh.push(e);
    }
    const oldest = cursorMs - HISTORY_RETENTION_MS;
    for (const [userKey, fresh] of byUser) {
      const entry = this.#history.get(userKey) ?? { events: [], bytes: 0 };
      const list = entry.events;
      const known = new Set(list.map((x) => x.eventId));
      for (const e of fresh) {
        if (known.has(e.eventId)) continue;
        known.add(e.eventId);
        list.push(e);
      }
      list.sort((a, b) => a.atMs - b.atMs);
      let drop = 0;
      while (drop < list.length && list[drop]!.atMs < oldest) drop++;
      drop = Math.max(drop, list.length - HISTORY_MAX_EVENTS_PER_USER);
      if (drop > 0) list.splice(0, drop);
      // Priced by its events: the cache bounds the events of every user together, not the users.
      cache(this.#history, userKey, entry, historyListBytes(list));
    }
    if (this.#cursorMs === undefined || cursorMs > this.#cursorMs) this.#cursorMs = cursorMs;
  }

  recordHistory(events: readonly HistoryEvent[], cursorMs: number): Promise<void> {
    this.recordHistoryNow(events, cursorMs);
    return Promise.resolve();
  }

  /** Synchronous form of `readHistory`. */
  readHistoryNow(userKey: string, nowMs: number): HistoryReading {
    const list = this.#history.peek(userKey)?.events ?? [];
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

/**
 * Sets `entry` (changed in place) under `key` at `bytes`. lru-cache takes a new size only with a
 * new value: set again as the same object, an entry keeps the size it had when first set (a
 * distinct counter that grew to 1,000 members was still counted as one). So an entry whose price
 * changed is taken out and set afresh, which also evicts the least recently used entries past the
 * cache's bound. A read that trims members leaves the price as it was (higher): the next record
 * corrects it.
 */
function cache<V extends { bytes: number }>(
  lru: LRUCache<string, V>,
  key: string,
  entry: V,
  bytes: number,
  ttl?: number,
): void {
  if (entry.bytes !== bytes) {
    lru.delete(key);
    entry.bytes = bytes;
  }
  lru.set(key, entry, ttl === undefined ? { size: bytes } : { size: bytes, ttl });
}

function trimDistinct(entry: DistinctEntry, oldestMs: number): void {
  for (const [member, at] of entry.lastSeen) {
    if (at >= oldestMs) break;
    entry.lastSeen.delete(member);
  }
}
