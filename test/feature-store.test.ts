import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bucketWidthMs,
  type FeatureStore,
  HISTORY_RETENTION_MS,
  MAX_DISTINCT_MEMBERS,
} from '../src/features/feature-store.ts';
import { ENTRY_BYTES, historyListBytes, MemoryFeatureStore } from '../src/features/memory-feature-store.ts';
import { RedisFeatureStore } from '../src/features/redis-feature-store.ts';
import { StoreTimeoutError } from '../src/store/store-deadline.ts';
import { eventually } from './support/eventually.ts';
import { type RunningRedis, redisAvailable, startRedis } from './support/redis-server.ts';

/**
 * The feature store's contract, run on both stores (memory, and a real redis-server): sliding
 * windows with the documented error bound, distinct counts, the history and the follower's lease.
 * Time is passed in, so windows are checked to the millisecond without waiting.
 */

const T0 = 1_800_000_000_000;
const TEN_MINUTES = 600_000;

function contract(
  name: string,
  open: () => Promise<FeatureStore>,
  close: () => Promise<void> = async () => {},
) {
  describe(`${name} feature store`, () => {
    let store: FeatureStore;
    let n = 0;
    // A fresh key per test: the Redis store is shared by the whole file.
    const key = () => `test-${name}-${n++}-${Math.random().toString(36).slice(2)}`;
    beforeAll(async () => {
      store = await open();
    });
    afterAll(async () => {
      await store?.close();
      await close();
    });

    it('counts every decision of the window, and errs high by at most a sub-window, never low', async () => {
      const op = { key: key(), windowMs: TEN_MINUTES };
      const width = bucketWidthMs(TEN_MINUTES);
      for (let i = 0; i < 3; i++) await store.recordCounters([op], T0 + i);
      expect((await store.readCounters([op], T0 + 10)).counts).toEqual([3]);
      // A whole window later, still counted (never low).
      expect((await store.readCounters([op], T0 + TEN_MINUTES)).counts).toEqual([3]);
      // A window and a sub-window later, gone.
      expect((await store.readCounters([op], T0 + TEN_MINUTES + width + 1)).counts).toEqual([0]);
    });

    it('keeps counters apart by key and reads several in one call', async () => {
      const a = { key: key(), windowMs: TEN_MINUTES };
      const b = { key: key(), windowMs: TEN_MINUTES };
      await store.recordCounters([a, b, a], T0);
      expect(await store.readCounters([a, b, { key: key(), windowMs: TEN_MINUTES }], T0)).toEqual({
        counts: [2, 1, 0],
        seen: [false, false, false],
      });
    });

    it('counts distinct members exactly over a sliding window, and says whether one was seen', async () => {
      const k = key();
      const at = (member: string) => ({ key: k, windowMs: TEN_MINUTES, member });
      await store.recordCounters([at('m1')], T0);
      await store.recordCounters([at('m2')], T0 + 1000);
      await store.recordCounters([at('m1')], T0 + 2000);
      expect(await store.readCounters([at('m1'), at('m3')], T0 + 3000)).toEqual({
        counts: [2, 2],
        seen: [true, false],
      });
      // m2 was last seen at T0 + 1000: one millisecond past its window it is gone, m1 is not.
      expect(await store.readCounters([at('m2')], T0 + 1001 + TEN_MINUTES)).toEqual({
        counts: [1],
        seen: [false],
      });
    });

    it(`keeps at most ${MAX_DISTINCT_MEMBERS} distinct members, the most recent`, async () => {
      const k = key();
      const ops = Array.from({ length: MAX_DISTINCT_MEMBERS + 5 }, (_, i) => ({
        key: k,
        windowMs: TEN_MINUTES,
        member: `m${i}`,
      }));
      await store.recordCounters(ops, T0);
      const r = await store.readCounters([ops[0]!, ops[ops.length - 1]!], T0);
      expect(r.counts).toEqual([MAX_DISTINCT_MEMBERS, MAX_DISTINCT_MEMBERS]);
      expect(r.seen).toEqual([false, true]);
    });

    it('keeps a user’s history once per event, for a day, with the follower’s cursor', async () => {
      const user = key();
      const failed = (id: string, atMs: number) => ({
        userKey: user,
        kind: 'failed' as const,
        atMs,
        eventId: id,
      });
      await store.recordHistory(
        [failed('e1', T0 - HISTORY_RETENTION_MS - 1), failed('e2', T0 - 1000)],
        T0 - 500,
      );
      await store.recordHistory([failed('e2', T0 - 1000), failed('e3', T0)], T0 + 500);
      const r = await store.readHistory(user, T0 + 1000);
      expect(r.events.map((e) => e.eventId).sort()).toEqual(['e2', 'e3']);
      expect(r.cursorMs).toBe(T0 + 500);
      const device = { userKey: user, kind: 'device' as const, atMs: T0, eventId: 'd1', deviceKey: 'dk' };
      await store.recordHistory([device], T0 + 500);
      expect((await store.readHistory(user, T0 + 1000)).events.find((e) => e.eventId === 'd1')).toEqual(
        device,
      );
    });

    it('gives the follower lease to one owner at a time until it lapses', async () => {
      expect(await store.holdFollowerLease('a', 300)).toBe(true);
      expect(await store.holdFollowerLease('b', 300)).toBe(false);
      expect(await store.holdFollowerLease('a', 300)).toBe(true);
      // The store's own expiry (Redis PX, the primary's timer) runs on real time: poll for the lapse.
      await eventually(() => store.holdFollowerLease('b', 300), { what: "a's lease lapsing" });
      expect(await store.holdFollowerLease('a', 300)).toBe(false);
    });
  });
}

contract('memory', async () => new MemoryFeatureStore());

let redis: RunningRedis | undefined;
if (redisAvailable()) {
  contract(
    'redis',
    async () => {
      redis = await startRedis();
      return RedisFeatureStore.connect({ url: redis.url });
    },
    async () => {
      await redis?.stop();
    },
  );
}

describe.runIf(redisAvailable())('the Redis feature store on a stopped server (SIGSTOP)', () => {
  /** The store's deadline here; an answer the stopped server held would come only after SIGCONT. */
  const DEADLINE_MS = 200;
  const HELD_MS = 3000;
  let stalled: RunningRedis;
  let store: RedisFeatureStore;
  beforeAll(async () => {
    stalled = await startRedis();
    store = await RedisFeatureStore.connect({ url: stalled.url, commandTimeoutMs: DEADLINE_MS });
  });
  afterAll(async () => {
    stalled?.resume();
    await stalled?.stop();
  });

  /** How `work` ended while the server is stopped: its error, `done`, or `held` past HELD_MS. */
  async function outcome(work: () => Promise<unknown>): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const held = new Promise((resolve) => {
      timer = setTimeout(() => resolve('held'), HELD_MS);
    });
    try {
      return await Promise.race([
        work().then(
          () => 'done',
          (error: unknown) => error,
        ),
        held,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  it('ends every call at its deadline, the plain commands as the scripts, and closes anyway', async () => {
    await store.recordCounters([{ key: 'stall', windowMs: TEN_MINUTES }], T0);
    stalled.pause();
    try {
      const checkpoint = { version: 1 as const, cursorMs: T0, seen: [] };
      for (const [what, call] of [
        ['readCounters', () => store.readCounters([{ key: 'stall', windowMs: TEN_MINUTES }], T0)],
        ['holdFollowerLease', () => store.holdFollowerLease('me', 10_000)],
        ['followerCursor', () => store.followerCursor()],
        ['checkpoint load', () => store.followerCheckpoint.load()],
        ['checkpoint save', () => store.followerCheckpoint.save(checkpoint)],
      ] as const) {
        expect(await outcome(call), what).toBeInstanceOf(StoreTimeoutError);
      }
      // QUIT is never answered: the socket is dropped at the deadline instead.
      expect(await outcome(() => store.close())).toBe('done');
    } finally {
      stalled.resume();
    }
  });
});

describe('the memory feature store under a flood of new keys', () => {
  it('stays within its bound, forgetting the least recently used counters first', async () => {
    const store = new MemoryFeatureStore({
      maxCounterBytes: 100 * ENTRY_BYTES.count,
      maxHistoryBytes: 50 * (ENTRY_BYTES.history + ENTRY_BYTES.historyEvent),
    });
    const op = (i: number) => ({ key: `flood-${i}`, windowMs: TEN_MINUTES });
    for (let i = 0; i < 1000; i++) await store.recordCounters([op(i)], T0);
    // The bound holds 100 count instances: the newest 100 are kept, the oldest are gone.
    expect((await store.readCounters([op(0), op(899), op(900), op(999)], T0)).counts).toEqual([0, 0, 1, 1]);
    const events = Array.from({ length: 200 }, (_, i) => ({
      userKey: `u${i}`,
      kind: 'failed' as const,
      atMs: T0,
      eventId: `e${i}`,
    }));
    await store.recordHistory(events, T0);
    expect((await store.readHistory('u0', T0)).events).toHaveLength(0);
    expect((await store.readHistory('u199', T0)).events).toHaveLength(1);
  });
});

describe('the memory feature store’s size accounting', () => {
  const member = (key: string, m: number) => ({ key, windowMs: TEN_MINUTES, member: `m${m}` });

  it('prices a distinct counter by its members every time it grows, not once when it was new', () => {
    const store = new MemoryFeatureStore();
    for (let m = 0; m < 10; m++) store.recordCountersNow([member('k', m)], T0 + m);
    expect(store.heldBytes().counters).toBe(ENTRY_BYTES.distinct + 10 * ENTRY_BYTES.distinctMember);
    // Growing in one call counts too, and a member seen again costs nothing more.
    store.recordCountersNow([member('k', 10), member('k', 11), member('k', 3)], T0 + 20);
    expect(store.heldBytes().counters).toBe(ENTRY_BYTES.distinct + 12 * ENTRY_BYTES.distinctMember);
    store.recordCountersNow([{ key: 'c', windowMs: TEN_MINUTES }], T0);
    store.recordCountersNow([{ key: 'c', windowMs: TEN_MINUTES }], T0 + 1);
    expect(store.heldBytes().counters).toBe(
      ENTRY_BYTES.distinct + 12 * ENTRY_BYTES.distinctMember + ENTRY_BYTES.count,
    );
  });

  it('evicts the least recently used counters once a growing one passes the bound', () => {
    // Room for one counter of 100 members and a little more.
    const full = ENTRY_BYTES.distinct + 100 * ENTRY_BYTES.distinctMember;
    const store = new MemoryFeatureStore({ maxCounterBytes: full + ENTRY_BYTES.count });
    store.recordCountersNow([{ key: 'old', windowMs: TEN_MINUTES }], T0);
    for (let m = 0; m < 100; m++) store.recordCountersNow([member('grows', m)], T0 + m);
    expect(store.heldBytes().counters).toBe(full + ENTRY_BYTES.count);
    store.recordCountersNow([member('grows', 100)], T0 + 100);
    // The count instance made room; the growing counter has all its members.
    const r = store.readCountersNow([{ key: 'old', windowMs: TEN_MINUTES }, member('grows', 0)], T0 + 100);
    expect(r.counts).toEqual([0, 101]);
    expect(store.heldBytes().counters).toBe(ENTRY_BYTES.distinct + 101 * ENTRY_BYTES.distinctMember);
    expect(store.heldBytes().counters).toBeLessThanOrEqual(full + ENTRY_BYTES.count);
  });

  it('bounds history by the events of every user together, not by the number of users', () => {
    const eventsOf = (user: string, n: number, from = 0) =>
      Array.from({ length: n }, (_, i) => ({
        userKey: user,
        kind: 'failed' as const,
        atMs: T0 - i,
        eventId: `${user}-${from + i}`,
      }));
    const store = new MemoryFeatureStore({ maxHistoryBytes: 2 * historyListBytes(eventsOf('x', 100)) });
    store.recordHistoryNow(eventsOf('a', 50), T0);
    store.recordHistoryNow(eventsOf('a', 50, 50), T0);
    // Priced by its 100 events after growing in place; a duplicate adds nothing.
    store.recordHistoryNow(eventsOf('a', 1), T0);
    expect(store.heldBytes().history).toBe(historyListBytes(eventsOf('a', 100)));
    store.recordHistoryNow(eventsOf('b', 100), T0);
    expect(store.readHistoryNow('a', T0).events).toHaveLength(100);
    // Three users of 100 events do not fit in the room of two: the least recently recorded goes.
    store.recordHistoryNow(eventsOf('c', 100), T0);
    expect(store.readHistoryNow('a', T0).events).toHaveLength(0);
    expect(store.readHistoryNow('c', T0).events).toHaveLength(100);
    expect(store.heldBytes().history).toBe(2 * historyListBytes(eventsOf('x', 100)));
  });
});
