import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { DecisionSink, Retention } from './decision-batch.ts';
import type { StoreOp } from './decision-rows.ts';
import {
  DecisionStoreWriter,
  STORE_BATCH_MAX,
  STORE_INTERVAL_MS,
  safeErrorText,
} from './decision-store-writer.ts';

/** A sink that keeps what it is given, and can be made to fail or hang. */
function fakeSink() {
  const written: StoreOp[][] = [];
  let mode: 'ok' | 'fail' | 'hang' = 'ok';
  const hung: (() => void)[] = [];
  const sink: DecisionSink & {
    written: StoreOp[][];
    set(m: typeof mode): void;
    release(): void;
    prunes: number;
  } = {
    written,
    prunes: 0,
    set: (m) => {
      mode = m;
    },
    release: () => {
      for (const r of hung.splice(0)) r();
    },
    write(ops) {
      if (mode === 'fail')
        return Promise.reject(new Error('connect ECONNREFUSED postgres://u:secret@db:5432/x'));
      if (mode === 'hang') return new Promise<void>((resolve) => hung.push(() => resolve()));
      written.push(ops);
      return Promise.resolve();
    },
    prune: async (_r: Retention) => {
      sink.prunes++;
      return 0;
    },
    close: async () => {},
  };
  return sink;
}

const decision = (n: number) => ({
  kind: 'decision',
  decisionId: `d-${n}`,
  at: new Date(0).toISOString(),
  outcome: { verdict: 'allow', score: 0 },
});
const ids = (sink: ReturnType<typeof fakeSink>) =>
  sink.written.flat().map((op) => (op.kind === 'decision' ? op.row.decision_id : ''));

// The tests drive the clock in steps of the interval they set (the default is STORE_INTERVAL_MS).
beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe('the decision store writer', () => {
  it('writes records in batches after the interval, never on push', async () => {
    const sink = fakeSink();
    const writer = new DecisionStoreWriter({ sink, batchSize: 3, intervalMs: 100 });
    writer.push(decision(1));
    writer.push(decision(2));
    expect(sink.written).toEqual([]);
    await vi.advanceTimersByTimeAsync(99);
    expect(sink.written).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(ids(sink)).toEqual(['d-1', 'd-2']);
    for (let n = 3; n <= 9; n++) writer.push(decision(n));
    await vi.advanceTimersByTimeAsync(1);
    // Full batches go at once, the rest after the interval.
    expect(sink.written.map((b) => b.length)).toEqual([2, 3, 3]);
    await vi.advanceTimersByTimeAsync(100);
    expect(writer.status()).toMatchObject({ pending: 0, written: 9, dropped: 0, writing: true, lagMs: 0 });
  });

  it("writes a second's records in one batch by default, up to STORE_BATCH_MAX", async () => {
    // Issue 32: a batch's pages are shared by its rows; a busy second (~1,000 decisions) is one
    // transaction, not two of 500.
    const sink = fakeSink();
    const writer = new DecisionStoreWriter({ sink });
    for (let n = 1; n <= 1500; n++) writer.push(decision(n));
    await vi.advanceTimersByTimeAsync(STORE_INTERVAL_MS - 1);
    expect(sink.written).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(sink.written.map((b) => b.length)).toEqual([1500]);
    // Past the bound a batch goes at once, the rest a second later.
    for (let n = 1; n <= STORE_BATCH_MAX + 10; n++) writer.push(decision(10_000 + n));
    await vi.advanceTimersByTimeAsync(1);
    expect(sink.written.map((b) => b.length)).toEqual([1500, STORE_BATCH_MAX]);
    await vi.advanceTimersByTimeAsync(STORE_INTERVAL_MS);
    expect(sink.written.map((b) => b.length)).toEqual([1500, STORE_BATCH_MAX, 10]);
    expect(writer.status()).toMatchObject({ pending: 0, written: 1500 + STORE_BATCH_MAX + 10, dropped: 0 });
  });

  it('keeps the buffer while the store fails, drops exactly what is past the bound, and catches up', async () => {
    const sink = fakeSink();
    const writer = new DecisionStoreWriter({
      intervalMs: 100,
      sink,
      maxPending: 10,
      batchSize: 4,
      backoff: { initialMs: 100, maxMs: 1000 },
    });
    sink.set('fail');
    for (let n = 1; n <= 17; n++) writer.push(decision(n));
    await vi.advanceTimersByTimeAsync(5000);
    const behind = writer.status();
    expect(behind).toMatchObject({ writing: false, pending: 10, dropped: 7, written: 0 });
    expect(behind.lagMs).toBeGreaterThanOrEqual(5000);
    // Never the URL (it may carry a password).
    expect(behind.lastError).toBe('connect ECONNREFUSED <url>');
    sink.set('ok');
    await vi.advanceTimersByTimeAsync(2000);
    expect(writer.status()).toMatchObject({ writing: true, pending: 0, dropped: 7, written: 10 });
    expect(writer.status().lastError).toBeUndefined();
    expect(ids(sink)).toEqual(Array.from({ length: 10 }, (_, i) => `d-${i + 1}`));
  });

  it('gives up on a write past its deadline, waits for it before the next, and writes the batch again', async () => {
    const sink = fakeSink();
    const changes: (string | undefined)[] = [];
    const writer = new DecisionStoreWriter({
      intervalMs: 100,
      sink,
      writeTimeoutMs: 500,
      backoff: { initialMs: 100, maxMs: 2000 },
      onWritingChange: (e) => changes.push(e),
    });
    sink.set('hang');
    writer.push(decision(1));
    await vi.advanceTimersByTimeAsync(100 + 500);
    expect(writer.status()).toMatchObject({ writing: false, pending: 1 });
    expect(changes).toEqual(['a batch write took longer than 500 ms']);
    // The hung write still holds the store: no second one starts beside it (up to the longest backoff).
    await vi.advanceTimersByTimeAsync(1000);
    sink.set('ok');
    sink.release();
    await vi.advanceTimersByTimeAsync(2000);
    expect(writer.status()).toMatchObject({ writing: true, pending: 0, written: 1 });
    expect(changes).toEqual(['a batch write took longer than 500 ms', undefined]);
  });

  it('says so again when the cause changes while writes fail, not again for the same cause', async () => {
    const sink = fakeSink();
    const changes: (string | undefined)[] = [];
    const writer = new DecisionStoreWriter({
      intervalMs: 100,
      sink,
      writeTimeoutMs: 500,
      backoff: { initialMs: 100, maxMs: 200 },
      onWritingChange: (e) => changes.push(e),
    });
    sink.set('hang');
    writer.push(decision(1));
    await vi.advanceTimersByTimeAsync(100 + 500);
    expect(changes).toEqual(['a batch write took longer than 500 ms']);
    sink.set('fail');
    sink.release();
    await vi.advanceTimersByTimeAsync(2000);
    // Several failed attempts of the new cause: told once, secret-free.
    expect(changes).toHaveLength(2);
    expect(changes[1]).toMatch(/ECONNREFUSED/);
    expect(changes[1]).not.toMatch(/secret/);
    sink.set('ok');
    await vi.advanceTimersByTimeAsync(1000);
    expect(changes.at(-1)).toBeUndefined();
    expect(writer.status()).toMatchObject({ writing: true, pending: 0, written: 1 });
  });

  it('on close, writes what waits within the deadline, then counts the rest dropped', async () => {
    const sink = fakeSink();
    const writer = new DecisionStoreWriter({ sink, intervalMs: 100 });
    writer.push(decision(1));
    const closed = writer.close(1000);
    await vi.advanceTimersByTimeAsync(10);
    await closed;
    expect(writer.status()).toMatchObject({ written: 1, dropped: 0, pending: 0 });
    writer.push(decision(2));
    expect(writer.status().dropped).toBe(1);

    const stuck = fakeSink();
    stuck.set('fail');
    const behind = new DecisionStoreWriter({ intervalMs: 100, sink: stuck });
    for (let n = 1; n <= 3; n++) behind.push(decision(n));
    const closing = behind.close(1000);
    await vi.advanceTimersByTimeAsync(1000);
    await closing;
    expect(behind.status()).toMatchObject({ written: 0, dropped: 3, pending: 0 });
  });

  it('runs retention periodically between batches', async () => {
    const sink = fakeSink();
    new DecisionStoreWriter({
      intervalMs: 100,
      sink,
      retention: { maxAgeMs: 1, maxBytes: 1, chunk: 10 },
      pruneEveryMs: 1000,
    });
    await vi.advanceTimersByTimeAsync(3500);
    expect(sink.prunes).toBe(3);
  });

  it('skips records it does not keep, counting them written', async () => {
    const sink = fakeSink();
    const writer = new DecisionStoreWriter({ intervalMs: 100, sink });
    writer.push({ kind: 'unserializable' });
    writer.push(decision(1));
    await vi.advanceTimersByTimeAsync(100);
    expect(ids(sink)).toEqual(['d-1']);
    expect(writer.status().written).toBe(2);
  });

  it('sets a refused record aside (split down to it), writes the rest of its batch, counts and logs it', async () => {
    const written: string[] = [];
    let writes = 0;
    const poisoned = (ops: StoreOp[]) =>
      ops.some((op) => op.kind === 'decision' && op.row.decision_id === 'd-5');
    const sink = {
      write: async (ops: StoreOp[]) => {
        writes++;
        if (poisoned(ops)) {
          throw Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), {
            code: '22021',
          });
        }
        for (const op of ops) if (op.kind === 'decision') written.push(op.row.decision_id);
      },
      prune: async () => 0,
      close: async () => {},
    };
    const kept: unknown[] = [];
    const log: Record<string, unknown>[] = [];
    const writer = new DecisionStoreWriter({
      intervalMs: 100,
      sink,
      batchSize: 8,
      keepRejected: async (rejects) => {
        kept.push(...rejects);
      },
      log: (line) => log.push(line),
    });
    for (let n = 1; n <= 8; n++) writer.push(decision(n));
    await vi.advanceTimersByTimeAsync(10);
    expect(written.sort()).toEqual(['d-1', 'd-2', 'd-3', 'd-4', 'd-6', 'd-7', 'd-8']);
    // 8 → 4+4 → (4 fine) 2+2 → 1+1: never the same batch for ever.
    expect(writes).toBeLessThanOrEqual(7);
    expect(writer.status()).toMatchObject({ written: 7, rejected: 1, pending: 0, writing: true });
    expect(kept).toEqual([
      expect.objectContaining({ record: decision(5), error: expect.stringContaining('0x00') }),
    ]);
    expect(log).toEqual([
      expect.objectContaining({ level: 'error', decisionId: 'd-5', kept: 'decision_reject' }),
    ]);
  });

  it('retries a batch the store fails for another reason (down, full) whole, never splitting it', async () => {
    const sizes: number[] = [];
    const sink = {
      write: async (ops: StoreOp[]) => {
        sizes.push(ops.length);
        throw Object.assign(new Error('database or disk is full'), { errcode: 13 });
      },
      prune: async () => 0,
      close: async () => {},
    };
    const writer = new DecisionStoreWriter({
      intervalMs: 100,
      sink,
      backoff: { initialMs: 100, maxMs: 100 },
    });
    for (let n = 1; n <= 4; n++) writer.push(decision(n));
    await vi.advanceTimersByTimeAsync(350);
    expect(sizes.length).toBeGreaterThanOrEqual(2);
    expect(new Set(sizes)).toEqual(new Set([4]));
    expect(writer.status()).toMatchObject({
      rejected: 0,
      pending: 4,
      writing: false,
      lastError: 'database or disk is full',
    });
  });

  it('logs how many records a stop could not write, with the count', async () => {
    const sink = fakeSink();
    sink.set('fail');
    const log: Record<string, unknown>[] = [];
    const writer = new DecisionStoreWriter({ intervalMs: 100, sink, log: (line) => log.push(line) });
    for (let n = 1; n <= 3; n++) writer.push(decision(n));
    const closing = writer.close(500);
    await vi.advanceTimersByTimeAsync(500);
    await closing;
    expect(log).toEqual([expect.objectContaining({ level: 'error', dropped: 3, timeoutMs: 500 })]);
  });

  it('never names a URL in an error', () => {
    expect(safeErrorText(new Error('failed for postgresql://a:b@h/db?x=1 now'))).toBe('failed for <url> now');
  });
});
