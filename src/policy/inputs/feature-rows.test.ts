import { describe, expect, it } from 'vitest';
import { DEFAULT_HISTORY_MAX_LAG_SECONDS } from '../../features/history-features.ts';
import { historyMaxLagMs } from './feature-rows.ts';
import type { InputPolicy } from './input-row.ts';

const reading = (maxLagMs: number): Pick<InputPolicy, 'featureSettings'> => ({
  featureSettings: { history: { timeoutMs: 50, maxLagMs } },
});

describe('the history row’s lag bound (the one readiness holds the process to)', () => {
  it('is the policy’s bound, else the shadow’s, else the default', () => {
    expect(historyMaxLagMs({})).toBe(DEFAULT_HISTORY_MAX_LAG_SECONDS * 1000);
    expect(historyMaxLagMs(reading(30_000))).toBe(30_000);
    expect(historyMaxLagMs(reading(30_000), reading(90_000))).toBe(30_000);
    expect(historyMaxLagMs({}, reading(90_000))).toBe(90_000);
  });
});
