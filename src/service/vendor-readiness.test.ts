import { describe, expect, it } from 'vitest';
import type { TokenManager, TokenManagerStats } from '../auth/token-manager.ts';
import { tokenWarmth } from './vendor-clients.ts';

/** The token's warmth (`/readyz`): the first request under way holds readiness; a failing endpoint does not. */

function tokens(valid: boolean, stats: Partial<TokenManagerStats>): TokenManager {
  return {
    isReady: () => valid,
    stats: () => ({ refreshes: 0, failures: 0, consecutiveFailures: 0, ...stats }),
  } as TokenManager;
}

describe("the token's warmth", () => {
  it('is behind while the first token is requested, warm once one is held', () => {
    expect(tokenWarmth(tokens(false, {}))).toEqual({
      state: 'behind',
      everWarm: false,
      reason: 'the first access token is being requested',
    });
    expect(tokenWarmth(tokens(true, { refreshes: 1 }))).toEqual({ state: 'warm', everWarm: true });
  });

  it('is unavailable while the token endpoint fails, from the start or later', () => {
    const failing = { failures: 3, consecutiveFailures: 3, lastErrorCode: 'RG_ERR_UPSTREAM_RATE_LIMITED' };
    expect(tokenWarmth(tokens(false, failing))).toEqual({
      state: 'unavailable',
      everWarm: false,
      reason: 'the token endpoint is failing (RG_ERR_UPSTREAM_RATE_LIMITED, 3 in a row)',
    });
    expect(tokenWarmth(tokens(false, { ...failing, refreshes: 2 }))).toMatchObject({
      state: 'unavailable',
      everWarm: true,
    });
  });
});
