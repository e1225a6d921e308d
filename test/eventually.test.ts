import { describe, expect, it, vi } from 'vitest';
import { eventually } from './support/eventually.ts';

describe('eventually (the one wait of the test suite)', () => {
  it('returns the first value that is neither undefined nor false, sync or async', async () => {
    let n = 0;
    expect(await eventually(() => ++n >= 3 && n)).toBe(3);
    let m = 0;
    expect(await eventually(async () => (++m >= 2 ? { m } : undefined))).toEqual({ m: 2 });
  });

  it('fails after its timeout naming what it waited for, with the last error as the cause', async () => {
    await expect(eventually(() => false, { timeoutMs: 50, what: 'the moon' })).rejects.toThrow(
      'the moon not met within 50 ms',
    );
    await expect(
      eventually(
        () => {
          throw new Error('not yet listening');
        },
        { timeoutMs: 50 },
      ),
    ).rejects.toMatchObject({ cause: { message: 'not yet listening' } });
  });

  it('keeps polling on real time while a test fakes timers and the clock', async () => {
    vi.useFakeTimers();
    try {
      let n = 0;
      expect(await eventually(() => ++n >= 3)).toBe(true);
      await expect(eventually(() => undefined, 50)).rejects.toThrow('not met within 50 ms');
    } finally {
      vi.useRealTimers();
    }
  });
});
