import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Clock } from './clock.ts';
import { settlesWithin, withTimeout } from './with-timeout.ts';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

const never = new Promise<never>(() => {});
const late = () => new Error('late');

/** A promise and its resolve/reject, settled by the test. */
function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('withTimeout', () => {
  it('answers with the work when it settles first and leaves no timer behind', async () => {
    const work = deferred<string>();
    const raced = withTimeout(work.promise, { timeoutMs: 100, onTimeout: late });
    await vi.advanceTimersByTimeAsync(99);
    work.resolve('ok');
    await expect(raced).resolves.toBe('ok');
    expect(vi.getTimerCount()).toBe(0);
  });

  it("passes the work's own rejection through", async () => {
    const work = deferred<string>();
    const raced = withTimeout(work.promise, { timeoutMs: 100, onTimeout: late });
    work.reject(new Error('refused'));
    await expect(raced).rejects.toThrow('refused');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('rejects with the caller-made error once the time is up, not before', async () => {
    const raced = withTimeout(never, { timeoutMs: 100, onTimeout: late });
    const seen = vi.fn();
    raced.catch(seen);
    await vi.advanceTimersByTimeAsync(99);
    expect(seen).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toHaveBeenCalledWith(new Error('late'));
  });

  it('with tolerateLateTimer, a reply handled in the same poll phase as the late timer still wins', async () => {
    const work = deferred<string>();
    const raced = withTimeout(work.promise, { timeoutMs: 100, onTimeout: late, tolerateLateTimer: true });
    // The timer fires, and I/O already read (here: a resolve queued right behind it) lands before
    // the deadline calls the work late.
    setTimeout(() => work.resolve('just in time'), 100);
    await vi.advanceTimersByTimeAsync(100);
    await expect(raced).resolves.toBe('just in time');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('without tolerateLateTimer, the same late reply loses', async () => {
    const work = deferred<string>();
    const raced = withTimeout(work.promise, { timeoutMs: 100, onTimeout: late });
    raced.catch(() => {});
    setTimeout(() => work.resolve('just in time'), 100);
    await vi.advanceTimersByTimeAsync(100);
    await expect(raced).rejects.toThrow('late');
  });

  it('with tolerateLateTimer, still rejects when nothing arrives', async () => {
    const raced = withTimeout(never, { timeoutMs: 50, onTimeout: late, tolerateLateTimer: true });
    raced.catch(() => {});
    await vi.advanceTimersByTimeAsync(51);
    await expect(raced).rejects.toThrow('late');
  });

  it('unrefs its timer on request', async () => {
    const timers: NodeJS.Timeout[] = [];
    const clock: Clock = {
      nowMs: () => Date.now(),
      monotonicMs: () => performance.now(),
      setTimeout: (fn, ms) => {
        const t = setTimeout(fn, ms);
        timers.push(t);
        return t;
      },
      clearTimeout: (t) => clearTimeout(t as NodeJS.Timeout),
    };
    void withTimeout(never, { timeoutMs: 10, onTimeout: late, ref: false, clock }).catch(() => {});
    void withTimeout(never, { timeoutMs: 10, onTimeout: late, clock }).catch(() => {});
    expect(timers.map((t) => t.hasRef())).toEqual([false, true]);
    await vi.advanceTimersByTimeAsync(10);
  });
});

describe('settlesWithin', () => {
  it('is true as soon as the work fulfils', async () => {
    const work = deferred<void>();
    const within = settlesWithin(work.promise, 100);
    await vi.advanceTimersByTimeAsync(40);
    work.resolve();
    await expect(within).resolves.toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('is false once the time is up', async () => {
    const within = settlesWithin(never, 100);
    const seen = vi.fn();
    void within.then(seen);
    await vi.advanceTimersByTimeAsync(99);
    expect(seen).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toHaveBeenCalledWith(false);
  });

  it('rejects when the work rejects first', async () => {
    await expect(settlesWithin(Promise.reject(new Error('broken')), 100)).rejects.toThrow('broken');
    expect(vi.getTimerCount()).toBe(0);
  });
});
