import { describe, expect, it } from 'vitest';
import { backoffDelayMs, exponentialDelayMs, MAX_RETRY_AFTER_MS } from './backoff.ts';

describe('exponentialDelayMs', () => {
  it('starts at initialMs, doubles per failure and stops at maxMs', () => {
    const p = { initialMs: 50, maxMs: 2000 };
    expect([0, 1, 2, 3, 6, 7, 60].map((n) => exponentialDelayMs(p, n))).toEqual([
      50, 50, 100, 200, 1600, 2000, 2000,
    ]);
  });

  it('grows without bound when maxMs is Infinity', () => {
    expect(exponentialDelayMs({ initialMs: 10, maxMs: Infinity }, 11)).toBe(10 * 1024);
  });
});

describe('backoffDelayMs', () => {
  const at = (random: number) => ({ initialMs: 100, maxMs: 1000, random: () => random });

  it('jitters the exponential over its upper half', () => {
    expect(backoffDelayMs(at(0), 1)).toBe(50);
    expect(backoffDelayMs(at(0.5), 2)).toBe(150);
    expect(backoffDelayMs(at(0.999_999), 3)).toBeCloseTo(400, 3);
    expect(backoffDelayMs(at(0), 50)).toBe(500);
  });

  it('waits at least the Retry-After, capped at MAX_RETRY_AFTER_MS', () => {
    expect(backoffDelayMs(at(0), 1, 5000)).toBe(5000);
    expect(backoffDelayMs(at(0), 1, 10)).toBe(50);
    expect(backoffDelayMs(at(0), 1, 10 * MAX_RETRY_AFTER_MS)).toBe(MAX_RETRY_AFTER_MS);
  });

  it('stays within [exp/2, exp] with the default random source', () => {
    for (let i = 0; i < 200; i++) {
      const d = backoffDelayMs({ initialMs: 100, maxMs: 1000 }, 2);
      expect(d).toBeGreaterThanOrEqual(100);
      expect(d).toBeLessThanOrEqual(200);
    }
  });
});
