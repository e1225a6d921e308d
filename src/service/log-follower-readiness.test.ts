import { describe, expect, it } from 'vitest';
import { historyWarmth } from './log-follower.ts';

/** The event history's warmth (`/readyz`): whose shortfall it is decides whether it holds readiness. */

const nowMs = 10_000_000;
const maxLagMs = 600_000;
const base = { maxLagMs, nowMs, failing: undefined, everWarm: false };

describe('the event history, read by this process', () => {
  it('is warm within the policy bound, and remembers it was', () => {
    expect(historyWarmth({ ...base, following: true, cursorMs: nowMs - 150_000 })).toEqual({
      state: 'warm',
      everWarm: true,
    });
  });

  it('is behind before the first window, and while it reads the last day back', () => {
    expect(historyWarmth({ ...base, following: true, cursorMs: undefined })).toMatchObject({
      state: 'behind',
      everWarm: false,
      reason: 'reading the Log API history: not read yet',
    });
    const reading = historyWarmth({ ...base, following: true, cursorMs: nowMs - 86_400_000 });
    expect(reading).toMatchObject({
      state: 'behind',
      behindSeconds: 86_400,
      sinceMs: nowMs - 86_400_000 + maxLagMs,
    });
    expect(reading.reason).toBe('reading the Log API history: 86400 s behind (at most 600 s)');
  });

  it('is unavailable, not behind, while the Log API fails: every replica reads the same API', () => {
    const w = historyWarmth({
      ...base,
      everWarm: true,
      following: true,
      failing: 'RG_ERR_UPSTREAM_SERVER_ERROR',
      cursorMs: nowMs - 700_000,
    });
    expect(w).toMatchObject({ state: 'unavailable', everWarm: true, sinceMs: nowMs - 100_000 });
    expect(w.reason).toMatch(/^the Log API is failing: RG_ERR_UPSTREAM_SERVER_ERROR; history 700 s behind/);
  });

  it('is behind again once the Log API answers and the follower reads back what it missed', () => {
    const w = historyWarmth({ ...base, everWarm: true, following: true, cursorMs: nowMs - 700_000 });
    expect(w).toMatchObject({ state: 'behind', everWarm: true, sinceMs: nowMs - 100_000 });
  });
});

describe('the event history, read by another process (a shared store)', () => {
  it('is behind until it was first warm: a start waits for the follower', () => {
    expect(historyWarmth({ ...base, following: false, cursorMs: undefined })).toMatchObject({
      state: 'behind',
      reason: 'waiting for the process that follows the Log API: history not read yet',
    });
  });

  it("is unavailable once it was warm: the follower's lag is every replica's, never this one's own", () => {
    expect(
      historyWarmth({ ...base, everWarm: true, following: false, cursorMs: nowMs - 700_000 }),
    ).toMatchObject({ state: 'unavailable', behindSeconds: 700 });
  });
});
