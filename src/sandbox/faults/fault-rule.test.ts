import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../bench/seeded-random.ts';
import { faultRuleSchema, ruleMatches, sampleLatencyMs } from './fault-rule.ts';

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

describe('sampleLatencyMs', () => {
  it('draws a lognormal whose median and 99th percentile are the given ones', () => {
    const random = mulberry32(42);
    const xs = Array.from({ length: 40_000 }, () =>
      sampleLatencyMs({ kind: 'lognormal', p50Ms: 15, p99Ms: 60 }, random),
    ).sort((a, b) => a - b);
    expect(quantile(xs, 0.5)).toBeGreaterThan(14);
    expect(quantile(xs, 0.5)).toBeLessThan(16);
    expect(quantile(xs, 0.99)).toBeGreaterThan(54);
    expect(quantile(xs, 0.99)).toBeLessThan(66);
  });

  it('draws uniform latencies inside the bounds and fixed ones exactly', () => {
    const random = mulberry32(7);
    const xs = Array.from({ length: 1000 }, () =>
      sampleLatencyMs({ kind: 'uniform', minMs: 10, maxMs: 20 }, random),
    );
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(10);
    expect(Math.max(...xs)).toBeLessThan(20);
    expect(Math.max(...xs) - Math.min(...xs)).toBeGreaterThan(9);
    expect(sampleLatencyMs({ kind: 'fixed', ms: 25 })).toBe(25);
  });
});

describe('ruleMatches', () => {
  const key = 'GET /srv/admin/v1/users/:user_id';
  it.each([
    ['*', true],
    ['GET /srv/admin/v1/users/:user_id', true],
    ['GET /srv/admin/v1/users/u-1', true],
    ['GET /srv/admin/v1/*', true],
    ['* /srv/admin/*', true],
    ['POST /srv/admin/v1/*', false],
    ['GET /srv/admin/v1/users', false],
    ['GET /logs/v1/*', false],
  ])('%s → %s', (route, expected) => {
    expect(ruleMatches(route, 'GET', key, '/srv/admin/v1/users/u-1')).toBe(expected);
  });
});

describe('faultRuleSchema', () => {
  it('refuses unknown keys, bad routes and inverted latency bounds', () => {
    expect(faultRuleSchema.safeParse({ route: '*', errorRat: 1 }).success).toBe(false);
    expect(faultRuleSchema.safeParse({ route: 'GET api/v1' }).success).toBe(false);
    expect(
      faultRuleSchema.safeParse({ route: '*', latency: { kind: 'uniform', minMs: 20, maxMs: 10 } }).success,
    ).toBe(false);
    expect(
      faultRuleSchema.safeParse({ route: '*', latency: { kind: 'lognormal', p50Ms: 50, p99Ms: 10 } }).success,
    ).toBe(false);
    expect(faultRuleSchema.safeParse({ route: '*', errorRate: 1.5 }).success).toBe(false);
    expect(faultRuleSchema.safeParse({ route: '*', errorStatus: 502 }).success).toBe(false);
    expect(
      faultRuleSchema.safeParse({ route: 'GET /api/v1/signals/*', hang: 0.5, times: 3, malformedJson: true })
        .success,
    ).toBe(true);
  });
});
