import { describe, expect, it } from 'vitest';
import { MemoryFeatureStore } from '../src/features/memory-feature-store.ts';
import {
  floodDistinctMembers,
  floodHistory,
  floodNewKeys,
  heapAfterGcBytes,
} from './support/feature-store-flood.ts';
import { timersArmedBy } from './support/timers-armed.ts';

/**
 * Issue 22, item 10: a flood grew the memory feature store without bound (3,000 keys reaching
 * 3 M members took +375 MB; 600,000 history events +203 MB), because a distinct counter was
 * priced once, when new, and history's cap counted users. Each flood here offers some four times
 * the store's bound (scaled down from the issue's, so the test takes seconds) and the heap it leaves
 * after a full GC must stay within that bound, plus a little for the cache's own tables. The floods
 * and prices: bench/feature-store-memory.ts.
 */

const MiB = 1024 * 1024;
const COUNTER_BOUND = 16 * MiB;
const HISTORY_BOUND = 12 * MiB;
/** The cache's tables and the GC's rounding, beyond the priced entries. */
const SLACK = 3 * MiB;

function heapGrowth(flood: (store: MemoryFeatureStore) => void) {
  const store = new MemoryFeatureStore({ maxCounterBytes: COUNTER_BOUND, maxHistoryBytes: HISTORY_BOUND });
  const before = heapAfterGcBytes();
  flood(store);
  const bytes = heapAfterGcBytes() - before;
  // Used after measuring, so the store is alive when the heap is measured.
  return { bytes, store };
}

describe('the memory feature store under a flood', () => {
  it('stays within its counter bound when a few keys collect ever more distinct members', () => {
    const { bytes, store } = heapGrowth((s) => floodDistinctMembers(s, 500, 1000));
    expect(bytes).toBeLessThan(COUNTER_BOUND + SLACK);
    // The bound was reached (this flood is about 75 MB priced), and the newest keys kept whole.
    expect(store.heldBytes().counters).toBeGreaterThan(COUNTER_BOUND * 0.95);
  }, 60_000);

  it('stays within its counter bound under a flood of new keys', () => {
    const { bytes, store } = heapGrowth((s) => floodNewKeys(s, 50_000));
    expect(bytes).toBeLessThan(COUNTER_BOUND + SLACK);
    expect(store.heldBytes().counters).toBeGreaterThan(COUNTER_BOUND * 0.95);
  }, 60_000);

  it('stays within its history bound however the events are spread over users', () => {
    const few = heapGrowth((s) => floodHistory(s, 150, 1000));
    expect(few.bytes).toBeLessThan(HISTORY_BOUND + SLACK);
    expect(few.store.heldBytes().history).toBeGreaterThan(HISTORY_BOUND * 0.95);
    const many = heapGrowth((s) => floodHistory(s, 75_000, 1));
    expect(many.bytes).toBeLessThan(HISTORY_BOUND + SLACK);
    expect(many.store.heldBytes().history).toBeGreaterThan(HISTORY_BOUND * 0.95);
  }, 60_000);
});

describe('the memory feature store on the event loop', () => {
  it('arms no timer to record or read counters (a timer would wake the event loop per decision)', async () => {
    const store = new MemoryFeatureStore();
    const ops = [
      { key: 'attempts:user-1', windowMs: 60_000 },
      { key: 'ips:user-1', windowMs: 3_600_000, member: 'ip-a' },
    ];
    const nowMs = Date.now();
    const timers = timersArmedBy(() => {
      for (let i = 0; i < 50; i++) {
        store.recordCountersNow(ops, nowMs + i);
        store.readCountersNow(ops, nowMs + i);
      }
    });
    expect(timers).toBe(0);
    expect(store.readCountersNow(ops, nowMs + 50).counts).toEqual([50, 1]);
    await store.close();
  });
});
