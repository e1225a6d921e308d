import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { sleep } from './sleep.ts';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('sleep', () => {
  it('resolves true once the time is up, not before', async () => {
    const seen = vi.fn();
    void sleep(100).then(seen);
    await vi.advanceTimersByTimeAsync(99);
    expect(seen).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toHaveBeenCalledWith(true);
  });

  it('resolves false as soon as its signal aborts and leaves no timer behind', async () => {
    const ac = new AbortController();
    const slept = sleep(10_000, ac.signal);
    await vi.advanceTimersByTimeAsync(10);
    ac.abort();
    await expect(slept).resolves.toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('resolves false at once for a signal already aborted', async () => {
    await expect(sleep(10_000, AbortSignal.abort())).resolves.toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('resolves without a timer for a wait of zero or less', async () => {
    await expect(sleep(0)).resolves.toBe(true);
    await expect(sleep(-5, new AbortController().signal)).resolves.toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('drops its abort listener once the time is up', async () => {
    const ac = new AbortController();
    const slept = sleep(5, ac.signal);
    await vi.advanceTimersByTimeAsync(5);
    await expect(slept).resolves.toBe(true);
    ac.abort(); // no effect, no error
  });
});
