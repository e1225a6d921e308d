import { describe, expect, it } from 'vitest';
import { parseServerTiming } from '../bench/server-timing.ts';

describe('parseServerTiming', () => {
  it('takes total apart from the slowest upstream call', () => {
    expect(parseServerTiming('total;dur=12.3, signals-newBrowser;dur=8.1, admin-user;dur=2.0')).toEqual({
      totalMs: 12.3,
      slowestUpstreamMs: 8.1,
      upstreamCalls: 2,
    });
  });

  it('does not count policy evaluation as an upstream call', () => {
    expect(parseServerTiming('total;dur=9, signals-geolocation;dur=7.5, policy;dur=0.2')).toEqual({
      totalMs: 9,
      slowestUpstreamMs: 7.5,
      upstreamCalls: 1,
    });
  });

  it('adds the one-time code call, made after evaluation, to the floor', () => {
    expect(
      parseServerTiming(
        'total;dur=30, signals-newBrowser;dur=12, admin-user;dur=9, admin-otc;dur=8, policy;dur=0.1',
      ),
    ).toEqual({ totalMs: 30, slowestUpstreamMs: 20, upstreamCalls: 3 });
  });

  it('reads headers split over several lines and quoted durations', () => {
    expect(parseServerTiming(['admin-user;dur="3.5";desc="user"', 'total;dur=4'])).toEqual({
      totalMs: 4,
      slowestUpstreamMs: 3.5,
      upstreamCalls: 1,
    });
  });

  it('reports a decision with no upstream call as a zero floor', () => {
    expect(parseServerTiming('total;dur=0.4')).toEqual({
      totalMs: 0.4,
      slowestUpstreamMs: 0,
      upstreamCalls: 0,
    });
  });

  it('ignores metrics without a duration and returns undefined for a missing header', () => {
    expect(parseServerTiming('cache;desc=hit, total;dur=1')?.upstreamCalls).toBe(0);
    expect(parseServerTiming(undefined)).toBeUndefined();
  });
});
