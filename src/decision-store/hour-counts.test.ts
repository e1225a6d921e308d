import { describe, expect, it } from 'vitest';
import { HOUR_MS, splitByHours } from './hour-counts.ts';

const H = HOUR_MS;

describe('a time range split into whole hours and its ends', () => {
  it('reads the whole hours inside from the hour tables and the partial hours at its ends from the rows', () => {
    expect(splitByHours({ fromMs: 10 * H + 5, toMs: 13 * H + 7 })).toEqual({
      hours: { fromMs: 11 * H, toMs: 13 * H },
      edges: [
        { fromMs: 10 * H + 5, toMs: 11 * H },
        { fromMs: 13 * H, toMs: 13 * H + 7 },
      ],
    });
  });

  it('has no edge at an end on an hour, and an open end stays open', () => {
    expect(splitByHours({ fromMs: 10 * H, toMs: 12 * H })).toEqual({
      hours: { fromMs: 10 * H, toMs: 12 * H },
      edges: [],
    });
    expect(splitByHours({})).toEqual({ hours: { fromMs: undefined, toMs: undefined }, edges: [] });
    expect(splitByHours({ toMs: 5 * H + 1 })).toEqual({
      hours: { fromMs: undefined, toMs: 5 * H },
      edges: [{ fromMs: 5 * H, toMs: 5 * H + 1 }],
    });
  });

  it('counts a range inside one hour, or across one boundary with no whole hour, from the rows alone', () => {
    expect(splitByHours({ fromMs: 10 * H + 5, toMs: 10 * H + 9 })).toEqual({
      edges: [{ fromMs: 10 * H + 5, toMs: 10 * H + 9 }],
    });
    expect(splitByHours({ fromMs: 10 * H + 5, toMs: 11 * H + 9 })).toEqual({
      edges: [{ fromMs: 10 * H + 5, toMs: 11 * H + 9 }],
    });
  });
});
