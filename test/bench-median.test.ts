import { describe, expect, it } from 'vitest';
import { median, medianOf } from '../bench/bench-median.ts';

describe('medianOf', () => {
  it('takes the median of every number at the same path', () => {
    const runs = [
      { a: 1, nested: { p99: 30 }, rows: [{ rate: 250, v: 5 }] },
      { a: 9, nested: { p99: 10 }, rows: [{ rate: 250, v: 7 }] },
      { a: 4, nested: { p99: 20 }, rows: [{ rate: 250, v: 6 }] },
    ];
    expect(medianOf(runs)).toEqual({ a: 4, nested: { p99: 20 }, rows: [{ rate: 250, v: 6 }] });
  });

  it('averages the middle pair for an even count and keeps keys only some runs have', () => {
    expect(
      medianOf([
        { x: 1, status: { '503': 2 } },
        { x: 4, status: {} },
      ]),
    ).toEqual({ x: 2.5, status: { '503': 2 } });
  });

  it('keeps strings and time series from the first run', () => {
    const runs = [
      { mode: 'full', samples: [{ tS: 1, rssMb: 80 }] },
      { mode: 'full', samples: [{ tS: 1, rssMb: 90 }] },
      { mode: 'full', samples: [{ tS: 1, rssMb: 99 }] },
    ];
    expect(medianOf(runs)).toEqual({ mode: 'full', samples: [{ tS: 1, rssMb: 80 }] });
  });
});

describe('median', () => {
  it('is the middle value, or the mean of the middle pair, whatever the order given, and leaves its input as it was', () => {
    const odd = [9, 1, 4];
    expect(median(odd)).toBe(4);
    expect(odd).toEqual([9, 1, 4]);
    expect(median([10, 2, 8, 4])).toBe(6);
    expect(median([7])).toBe(7);
  });
});
