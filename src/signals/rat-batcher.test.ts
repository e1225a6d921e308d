import { afterEach, describe, expect, it, vi } from 'vitest';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import type { UpstreamResult } from '../upstream/upstream-result.ts';
import { type BatchItem, RatBatcher } from './rat-batcher.ts';
import type { RemoteAccessToolBatchItem } from './signal-schemas.ts';

const SERVICE = '7ef5fbc3-8a0d-4a44-8a5c-3b1f2a1e9c10';

function item(n: number | string): BatchItem {
  return {
    serviceId: SERVICE,
    accountId: `acct-${n}`,
    unitId: `acct-${n}-web`,
    verificationStatus: 'unverified',
    interactionId: `acct-${n}-login-1`,
  };
}
const key = (i: BatchItem) => `${i.accountId}|${i.interactionId}`;

/** An upstream stand-in that records batches and answers when told to. */
function fakeUpstream(answer: (it: BatchItem, i: number) => Partial<RemoteAccessToolBatchItem> = () => ({})) {
  const batches: BatchItem[][] = [];
  const pending: (() => void)[] = [];
  const send = (items: BatchItem[]) =>
    new Promise<UpstreamResult<RemoteAccessToolBatchItem[]>>((resolve) => {
      batches.push(items);
      pending.push(() =>
        resolve({
          ok: true,
          durationMs: 1,
          value: items.map((it, i) => ({
            accountId: it.accountId,
            unitId: it.unitId,
            verificationStatus: it.verificationStatus,
            interactionId: it.interactionId,
            success: true,
            result: { anomaly: it.accountId === 'acct-7', anomalyConfidence: 0.5 },
            ...answer(it, i),
          })),
        }),
      );
    });
  const answerAll = () => {
    for (const p of pending.splice(0)) p();
  };
  return { send, batches, answerAll };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('remote-access-tool batcher', () => {
  it('sends a lone lookup at the end of the current turn, without waiting for a window', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
    const up = fakeUpstream();
    const b = new RatBatcher(up.send, { windowMs: 2 });
    const p = b.lookup(key(item(1)), item(1), undefined);
    expect(up.batches).toHaveLength(0); // not synchronously: same-turn companions may still join
    vi.advanceTimersToNextTimer(); // the setImmediate, no time passes
    expect(up.batches).toHaveLength(1);
    up.answerAll();
    expect(await p).toMatchObject({
      ok: true,
      value: { signalType: 'remote_access_tool', unitId: 'acct-1-web' },
    });
  });

  it('coalesces 1000 same-turn lookups into 10 full batches, each caller getting its own item', async () => {
    const up = fakeUpstream();
    const b = new RatBatcher(up.send);
    const items = Array.from({ length: 1000 }, (_, i) => item(i));
    const ps = items.map((it) => b.lookup(key(it), it, undefined));
    expect(up.batches.map((x) => x.length)).toEqual(Array(10).fill(100)); // sent as each filled up
    up.answerAll();
    const rs = await Promise.all(ps);
    rs.forEach((r, i) => {
      expect(r.ok && r.value.interactionId).toBe(`acct-${i}-login-1`);
      expect(r.ok && r.value.result?.anomaly).toBe(i === 7);
    });
  });

  it('while a batch is in flight, waits up to windowMs to fill the next one', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
    const up = fakeUpstream();
    const b = new RatBatcher(up.send, { windowMs: 2 });
    void b.lookup('a', item('a'), undefined);
    vi.advanceTimersToNextTimer();
    expect(up.batches).toHaveLength(1); // in flight now
    void b.lookup('b', item('b'), undefined);
    await vi.advanceTimersByTimeAsync(1);
    void b.lookup('c', item('c'), undefined);
    expect(up.batches).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(up.batches).toHaveLength(2);
    expect(up.batches[1]!.map((i) => i.accountId)).toEqual(['acct-b', 'acct-c']);
  });

  it('takes an operator window of up to 50 ms (fuller batches), and no longer', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
    const up = fakeUpstream();
    const b = new RatBatcher(up.send, { windowMs: 500 });
    void b.lookup('a', item('a'), undefined);
    vi.advanceTimersToNextTimer();
    expect(up.batches).toHaveLength(1); // a lone lookup still goes at once
    for (let i = 0; i < 5; i++) {
      void b.lookup(`n${i}`, item(`n${i}`), undefined);
      await vi.advanceTimersByTimeAsync(9);
    }
    expect(up.batches).toHaveLength(1); // 45 ms: still collecting
    await vi.advanceTimersByTimeAsync(5);
    expect(up.batches).toHaveLength(2); // closed at 50 ms, the cap, not 500
    expect(up.batches[1]).toHaveLength(5);
  });

  it('sends identical items once and answers every caller', async () => {
    const up = fakeUpstream();
    const b = new RatBatcher(up.send);
    const ps = [
      b.lookup('x', item('x'), undefined),
      b.lookup('x', item('x'), undefined),
      b.lookup('y', item('y'), undefined),
    ];
    await new Promise((r) => setImmediate(r));
    expect(up.batches[0]).toHaveLength(2);
    up.answerAll();
    const rs = await Promise.all(ps);
    expect(rs.map((r) => r.ok && r.value.unitId)).toEqual(['acct-x-web', 'acct-x-web', 'acct-y-web']);
    expect(b.stats).toMatchObject({ lookups: 3, deduplicated: 1, batches: 1, items: 2 });
  });

  it('turns per-item forbidden and internalError into that caller’s typed error only', async () => {
    const up = fakeUpstream((it) =>
      it.accountId === 'acct-f'
        ? { success: false, reason: 'forbidden', result: undefined }
        : it.accountId === 'acct-e'
          ? { success: false, reason: 'internalError', result: undefined }
          : {},
    );
    const b = new RatBatcher(up.send);
    const [f, e, ok] = [
      b.lookup('f', item('f'), undefined),
      b.lookup('e', item('e'), undefined),
      b.lookup('k', item('k'), undefined),
    ];
    await new Promise((r) => setImmediate(r));
    up.answerAll();
    expect((await f).ok ? 'ok' : ((await f) as { error: UpstreamError }).error.code).toBe(
      ErrorCode.UPSTREAM_FORBIDDEN,
    );
    expect((await e).ok ? 'ok' : ((await e) as { error: UpstreamError }).error.code).toBe(
      ErrorCode.UPSTREAM_SERVER_ERROR,
    );
    expect((await ok).ok).toBe(true);
  });

  it('a failed batch fails each of its callers with the typed error', async () => {
    const err = new UpstreamError(ErrorCode.UPSTREAM_BAD_REQUEST, 'bare 400', {
      upstream: 'signals',
      status: 400,
    });
    const b = new RatBatcher(async () => ({ ok: false, error: err, durationMs: 1 }));
    const rs = await Promise.all([b.lookup('a', item('a'), undefined), b.lookup('b', item('b'), undefined)]);
    expect(rs.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual([
      ErrorCode.UPSTREAM_BAD_REQUEST,
      ErrorCode.UPSTREAM_BAD_REQUEST,
    ]);
  });

  it('releases a caller whose deadline passes while the batch goes on for the others', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
    const up = fakeUpstream();
    const b = new RatBatcher(up.send);
    const ac = new AbortController();
    const early = b.lookup('a', item('a'), { signal: ac.signal });
    const timed = b.lookup('t', item('t'), { timeoutMs: 50 });
    const patient = b.lookup('b', item('b'), undefined);
    vi.advanceTimersToNextTimer();
    expect(up.batches[0]).toHaveLength(3);
    ac.abort();
    expect(await early).toMatchObject({ ok: false, error: { code: ErrorCode.DEADLINE_EXCEEDED } });
    await vi.advanceTimersByTimeAsync(50);
    expect(await timed).toMatchObject({ ok: false, error: { code: ErrorCode.UPSTREAM_TIMEOUT } });
    up.answerAll();
    expect(await patient).toMatchObject({ ok: true });
    expect(b.stats.released).toBe(2);
  });

  it('a caller whose signal aborts before its own timeout sets no timer; one due first times out', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
    const up = fakeUpstream();
    const b = new RatBatcher(up.send);
    const timers = vi.spyOn(globalThis, 'setTimeout');
    const ac = new AbortController();
    const bounded = b.lookup('a', item('a'), {
      signal: ac.signal,
      timeoutMs: 500,
      signalAbortsAtMs: performance.now() + 100,
    });
    const due = b.lookup('t', item('t'), {
      signal: ac.signal,
      timeoutMs: 50,
      signalAbortsAtMs: performance.now() + 100,
    });
    expect(timers.mock.calls.map((c) => c[1])).toEqual([50]);
    timers.mockRestore();
    vi.advanceTimersToNextTimer();
    await vi.advanceTimersByTimeAsync(50);
    expect(await due).toMatchObject({ ok: false, error: { code: ErrorCode.UPSTREAM_TIMEOUT } });
    ac.abort();
    expect(await bounded).toMatchObject({ ok: false, error: { code: ErrorCode.DEADLINE_EXCEEDED } });
  });

  it('drops an item from the open batch when its only caller is released before sending', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
    const up = fakeUpstream();
    const b = new RatBatcher(up.send);
    const ac = new AbortController();
    const gone = b.lookup('a', item('a'), { signal: ac.signal });
    void b.lookup('b', item('b'), undefined);
    ac.abort();
    await gone;
    vi.advanceTimersToNextTimer();
    expect(up.batches[0]!.map((i) => i.accountId)).toEqual(['acct-b']);
  });

  it('a send that rejects answers every caller with RG_ERR_INTERNAL and leaves the batcher idle', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
    const up = fakeUpstream();
    let broken = true;
    const send = (items: BatchItem[]) => {
      if (!broken) return up.send(items);
      broken = false;
      up.batches.push(items);
      return Promise.reject(new TypeError('bug in send'));
    };
    const b = new RatBatcher(send, { windowMs: 2 });
    const ps = [b.lookup('a', item('a'), undefined), b.lookup('b', item('b'), undefined)];
    vi.advanceTimersByTime(0);
    expect(up.batches).toHaveLength(1);
    const rs = await Promise.all(ps);
    expect(rs.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual([ErrorCode.INTERNAL, ErrorCode.INTERNAL]);
    expect(rs[0]!.ok ? undefined : rs[0]!.error.cause).toBeInstanceOf(TypeError);
    // Nothing in flight any more: the next lone lookup goes out at the end of the turn, not after 2 ms.
    const next = b.lookup('c', item('c'), undefined);
    vi.advanceTimersByTime(0);
    expect(up.batches).toHaveLength(2);
    up.answerAll();
    expect(await next).toMatchObject({ ok: true, value: { unitId: 'acct-c-web' } });
  });

  it('a send that throws, or answers fewer items than sent, fails its callers instead of hanging them', async () => {
    const thrower = new RatBatcher(() => {
      throw new Error('bug');
    });
    const thrown = await thrower.lookup('a', item('a'), undefined);
    expect(thrown.ok ? 'ok' : thrown.error.code).toBe(ErrorCode.INTERNAL);

    const short = new RatBatcher(async () => ({ ok: true, durationMs: 1, value: [] }));
    const rs = await Promise.all([
      short.lookup('a', item('a'), undefined),
      short.lookup('b', item('b'), undefined),
    ]);
    expect(rs.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual([ErrorCode.INTERNAL, ErrorCode.INTERNAL]);
  });
});
