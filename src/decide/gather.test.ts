import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import { DrivenClock } from '../timing/driven-clock.ts';
import type { UpstreamResult } from '../upstream/upstream-result.ts';
import { type Gathered, gather, type InputSource } from './gather.ts';

/** Sources scripted on fake timers: each answers after `afterMs`, or never. */

type Call = Parameters<InputSource['fetch']>[0];

function source(
  name: string,
  timeoutMs: number,
  answer: { afterMs: number; result: UpstreamResult<unknown> } | 'hang' | 'reject',
): InputSource & { seen: Call[] } {
  const seen: Call[] = [];
  return {
    name,
    timeoutMs,
    seen,
    fetch(call) {
      seen.push(call);
      if (answer === 'hang') return new Promise(() => {});
      if (answer === 'reject') return Promise.reject(new Error('a client bug'));
      return new Promise((resolve) => setTimeout(() => resolve(answer.result), answer.afterMs));
    },
  };
}

const ok = (value: unknown, durationMs: number): UpstreamResult<unknown> => ({ ok: true, value, durationMs });
const failed = (code: ErrorCode, durationMs: number): UpstreamResult<unknown> => ({
  ok: false,
  error: new UpstreamError(code, code, { upstream: 'signals' }),
  durationMs,
});

/** Resolves `running` and says whether it had settled by now. */
function tracked(running: Promise<Gathered>) {
  const state: { done: boolean; value?: Gathered } = { done: false };
  void running.then((value) => {
    state.done = true;
    state.value = value;
  });
  return state;
}

describe('gather', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it('starts every source at once with one shared signal, and returns each outcome in source order', async () => {
    const a = source('a', 200, { afterMs: 30, result: ok('A', 30) });
    const b = source('b', 200, { afterMs: 10, result: failed(ErrorCode.UPSTREAM_RATE_LIMITED, 10) });
    const state = tracked(gather([a, b], { deadlineAtMs: performance.now() + 300 }));
    expect(a.seen).toHaveLength(1);
    expect(b.seen).toHaveLength(1);
    expect(a.seen[0]!.signal).toBe(b.seen[0]!.signal);
    await vi.advanceTimersByTimeAsync(30);
    expect(state.value).toEqual({
      outcomes: [
        { status: 'ok', value: 'A' },
        { status: 'unavailable', reason: 'RG_ERR_UPSTREAM_RATE_LIMITED' },
      ],
      // In the order they ended, with the clients' own durations.
      calls: [
        { name: 'b', durationMs: 10, outcome: 'RG_ERR_UPSTREAM_RATE_LIMITED' },
        { name: 'a', durationMs: 30, outcome: 'ok' },
      ],
    });
    expect(a.seen[0]!.signal.aborted).toBe(false);
  });

  it('ends each source at its own timeout (`timeout`), the others running on', async () => {
    const slow = source('slow', 100, 'hang');
    const slower = source('slower', 150, 'hang');
    const quick = source('quick', 100, { afterMs: 120, result: ok('late but within 300', 120) });
    const state = tracked(gather([slow, slower, quick], { deadlineAtMs: performance.now() + 300 }));
    // A client is told the earlier of its own timeout and the deadline (epoch ms; the clock starts at 0).
    expect(slow.seen[0]).toMatchObject({ timeoutMs: 100, deadlineAt: 100 });
    await vi.advanceTimersByTimeAsync(149);
    expect(state.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.value?.outcomes).toEqual([
      { status: 'unavailable', reason: 'timeout' },
      { status: 'unavailable', reason: 'timeout' },
      { status: 'unavailable', reason: 'timeout' },
    ]);
    expect(state.value?.calls).toEqual([
      { name: 'slow', durationMs: 100, outcome: 'timeout' },
      { name: 'quick', durationMs: 100, outcome: 'timeout' },
      { name: 'slower', durationMs: 150, outcome: 'timeout' },
    ]);
    // A timeout is the source's own: the shared signal is left to the others.
    expect(slow.seen[0]!.signal.aborted).toBe(false);
  });

  it('ends everything still running at the deadline (`deadline`) and aborts it', async () => {
    const done = source('done', 500, { afterMs: 20, result: ok('D', 20) });
    const hanging = source('hanging', 500, 'hang');
    const alsoHanging = source('also', 1000, 'hang');
    const state = tracked(gather([hanging, done, alsoHanging], { deadlineAtMs: performance.now() + 300 }));
    // The own timeout is past the deadline: the deadline bounds the call.
    expect(hanging.seen[0]).toMatchObject({ timeoutMs: 500, deadlineAt: 300 });
    await vi.advanceTimersByTimeAsync(299);
    expect(state.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.value).toEqual({
      outcomes: [
        { status: 'unavailable', reason: 'deadline' },
        { status: 'ok', value: 'D' },
        { status: 'unavailable', reason: 'deadline' },
      ],
      calls: [
        { name: 'done', durationMs: 20, outcome: 'ok' },
        { name: 'hanging', durationMs: 300, outcome: 'deadline' },
        { name: 'also', durationMs: 300, outcome: 'deadline' },
      ],
    });
    expect(hanging.seen[0]!.signal.aborted).toBe(true);
  });

  it('tells every call when its signal aborts at the latest: the deadline, on the system clock alone', async () => {
    const deadlineAtMs = performance.now() + 300;
    const hanging = source('hanging', 500, 'hang');
    const short = source('short', 100, 'hang');
    void gather([hanging, short], { deadlineAtMs });
    // An attempt due at or after it needs no timer of its own (src/upstream/upstream-request.ts).
    expect(hanging.seen[0]!.signalAbortsAtMs).toBe(deadlineAtMs);
    expect(short.seen[0]!.signalAbortsAtMs).toBe(deadlineAtMs);
    await vi.advanceTimersByTimeAsync(299);
    expect(hanging.seen[0]!.signal.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(hanging.seen[0]!.signal.aborted).toBe(true);
    // A driven clock's deadline is not on the attempts' timers: every attempt keeps its own.
    const driven = source('driven', 500, 'hang');
    void gather([driven], { deadlineAtMs: 300, clock: new DrivenClock() });
    expect(driven.seen[0]!.signalAbortsAtMs).toBe(Number.POSITIVE_INFINITY);
  });

  it('counts the deadline from the time given, not from the call: a spent budget ends everything at once, sending nothing', async () => {
    const hanging = source('hanging', 100, 'hang');
    const state = tracked(gather([hanging], { deadlineAtMs: performance.now() - 50 }));
    await vi.advanceTimersByTimeAsync(0);
    expect(state.value?.outcomes).toEqual([{ status: 'unavailable', reason: 'deadline' }]);
    // Under overload a request can wait out its deadline before its handler: no vendor call is
    // sent only to be aborted.
    expect(hanging.seen).toEqual([]);
  });

  it('aborts the calls when the caller hangs up, and reports what their clients answer', async () => {
    const caller = new AbortController();
    const seen: Call[] = [];
    const abortable: InputSource = {
      name: 'abortable',
      timeoutMs: 1000,
      fetch(call) {
        seen.push(call);
        return new Promise((resolve) =>
          call.signal.addEventListener('abort', () =>
            resolve(failed(ErrorCode.DEADLINE_EXCEEDED, performance.now())),
          ),
        );
      },
    };
    const state = tracked(
      gather([abortable], { deadlineAtMs: performance.now() + 300, signal: caller.signal }),
    );
    await vi.advanceTimersByTimeAsync(40);
    caller.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(seen[0]!.signal.aborted).toBe(true);
    expect(state.value?.outcomes).toEqual([{ status: 'unavailable', reason: 'deadline' }]);
    expect(state.value?.calls).toEqual([{ name: 'abortable', durationMs: 40, outcome: 'deadline' }]);
  });

  it('sends nothing when the caller was already gone', async () => {
    const caller = new AbortController();
    caller.abort();
    const hanging = source('hanging', 100, 'hang');
    const state = tracked(
      gather([hanging], { deadlineAtMs: performance.now() + 300, signal: caller.signal }),
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(hanging.seen).toEqual([]);
    expect(state.value?.outcomes).toEqual([{ status: 'unavailable', reason: 'deadline' }]);
  });

  it('turns a client that rejects (or throws) into an RG_ERR_INTERNAL outcome, never a rejection', async () => {
    const rejecting = source('rejecting', 100, 'reject');
    const throwing: InputSource = {
      name: 'throwing',
      timeoutMs: 100,
      fetch() {
        throw new Error('a client bug');
      },
    };
    const state = tracked(gather([rejecting, throwing], { deadlineAtMs: performance.now() + 300 }));
    await vi.advanceTimersByTimeAsync(0);
    expect(state.value?.outcomes).toEqual([
      { status: 'unavailable', reason: 'RG_ERR_INTERNAL' },
      { status: 'unavailable', reason: 'RG_ERR_INTERNAL' },
    ]);
  });

  it('ignores a result that arrives after its timeout or the deadline', async () => {
    const late = source('late', 50, { afterMs: 80, result: ok('too late', 80) });
    const afterDeadline = source('after', 1000, { afterMs: 400, result: ok('too late', 400) });
    const state = tracked(gather([late, afterDeadline], { deadlineAtMs: performance.now() + 300 }));
    await vi.advanceTimersByTimeAsync(500);
    expect(state.value?.outcomes).toEqual([
      { status: 'unavailable', reason: 'timeout' },
      { status: 'unavailable', reason: 'deadline' },
    ]);
    expect(state.value?.calls.map((c) => c.name)).toEqual(['late', 'after']);
  });

  it('maps the clients’ timeout, deadline and open-circuit errors to their reasons', async () => {
    const sources = [
      source('t', 200, { afterMs: 5, result: failed(ErrorCode.UPSTREAM_TIMEOUT, 5) }),
      source('d', 200, { afterMs: 5, result: failed(ErrorCode.DEADLINE_EXCEEDED, 5) }),
      source('c', 200, { afterMs: 5, result: failed(ErrorCode.CIRCUIT_OPEN, 5) }),
    ];
    const state = tracked(gather(sources, { deadlineAtMs: performance.now() + 300 }));
    await vi.advanceTimersByTimeAsync(5);
    expect(state.value?.outcomes.map((o) => (o.status === 'ok' ? 'ok' : o.reason))).toEqual([
      'timeout',
      'deadline',
      'circuit_open',
    ]);
  });

  it('runs on one timer at a time: each own timeout in turn, then the deadline', async () => {
    const sources = [
      source('a', 100, 'hang'),
      source('b', 150, 'hang'),
      source('c', 100, 'hang'),
      source('d', 500, 'hang'),
    ];
    const state = tracked(gather(sources, { deadlineAtMs: performance.now() + 300 }));
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(50);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(149);
    expect(state.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.value?.calls).toEqual([
      { name: 'a', durationMs: 100, outcome: 'timeout' },
      { name: 'c', durationMs: 100, outcome: 'timeout' },
      { name: 'b', durationMs: 150, outcome: 'timeout' },
      { name: 'd', durationMs: 300, outcome: 'deadline' },
    ]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('leaves no timer behind once every source answered', async () => {
    const state = tracked(
      gather([source('a', 100, { afterMs: 5, result: ok('A', 5) })], {
        deadlineAtMs: performance.now() + 300,
      }),
    );
    await vi.advanceTimersByTimeAsync(5);
    expect(state.done).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("leaves no listener on the caller's signal once every source answered, or the deadline passed", async () => {
    const caller = new AbortController();
    const answered = tracked(
      gather([source('a', 100, { afterMs: 5, result: ok('A', 5) })], {
        deadlineAtMs: performance.now() + 300,
        signal: caller.signal,
      }),
    );
    const cut = tracked(
      gather([source('b', 400, 'hang')], { deadlineAtMs: performance.now() + 50, signal: caller.signal }),
    );
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(5);
    expect(answered.done).toBe(true);
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(50);
    expect(cut.value?.outcomes).toEqual([{ status: 'unavailable', reason: 'deadline' }]);
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
  });

  it('answers at once with nothing to gather', async () => {
    expect(await gather([], { deadlineAtMs: performance.now() + 300 })).toEqual({ outcomes: [], calls: [] });
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('gather on a driven clock', () => {
  it('ends at once every own timeout a late timer finds past, and the deadline on time', async () => {
    const clock = new DrivenClock();
    const sources = [source('a', 50, 'hang'), source('b', 80, 'hang'), source('c', 500, 'hang')];
    const state = tracked(gather(sources, { deadlineAtMs: 200, clock }));
    // A turn that blocks the loop past both own timeouts: the one timer fires late, once.
    clock.stall(120);
    await clock.advance(0);
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(79);
    expect(state.done).toBe(false);
    await clock.advance(1);
    expect(state.value?.calls).toEqual([
      { name: 'a', durationMs: 120, outcome: 'timeout' },
      { name: 'b', durationMs: 120, outcome: 'timeout' },
      { name: 'c', durationMs: 200, outcome: 'deadline' },
    ]);
  });
});
