import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RuleReport } from './rule-report.ts';
import { cachedRuleReport } from './rule-report-query.ts';

const report = (n: number) => ({ generatedAt: String(n) }) as unknown as RuleReport;

describe('the cached rule report', () => {
  afterEach(() => vi.useRealTimers());

  it('runs the queries once per period for every caller, again after it, never for an explicit now', async () => {
    vi.useFakeTimers();
    let calls = 0;
    const cached = cachedRuleReport({ report: async () => report(++calls) }, { maxAgeMs: 30_000 });
    const [a, b] = await Promise.all([cached.report(), cached.report()]);
    expect(a).toBe(b);
    expect(calls).toBe(1);
    vi.advanceTimersByTime(29_999);
    await cached.report();
    expect(calls).toBe(1);
    vi.advanceTimersByTime(1);
    expect((await cached.report()).generatedAt).toBe('2');
    await cached.report(123);
    expect(calls).toBe(3);
  });

  it('does not keep a failed report', async () => {
    let fail = true;
    const cached = cachedRuleReport({
      report: async () => {
        if (fail) throw new Error('database down');
        return report(1);
      },
    });
    await expect(cached.report()).rejects.toThrow('database down');
    fail = false;
    expect((await cached.report()).generatedAt).toBe('1');
  });

  it('recomputes on the next read after an invalidation (an operator’s own label)', async () => {
    let calls = 0;
    const cached = cachedRuleReport({ report: async () => report(++calls) }, { maxAgeMs: 30_000 });
    expect((await cached.report()).generatedAt).toBe('1');
    expect((await cached.report()).generatedAt).toBe('1');
    cached.invalidate();
    expect((await cached.report()).generatedAt).toBe('2');
  });
});

describe('the cached rule report across revisions', () => {
  it('keeps a report per active revision and per revision asked for', async () => {
    let calls = 0;
    let active = 'rev-1';
    const cached = cachedRuleReport(
      { report: async () => report(++calls) },
      { maxAgeMs: 30_000, revision: () => active },
    );
    expect((await cached.report()).generatedAt).toBe('1');
    expect((await cached.report(undefined, { revision: 'rev-0' })).generatedAt).toBe('2');
    expect((await cached.report()).generatedAt).toBe('1');
    // An activation: the previous revision's kept report is never served for the new one.
    active = 'rev-2';
    expect((await cached.report()).generatedAt).toBe('3');
  });
});
