import { describe, expect, it } from 'vitest';
import type { PolicyRequest } from '../policy/policy-types.ts';
import {
  compileCounter,
  counterValues,
  parseWindow,
  planCounters,
  readOps,
  recordOps,
} from './velocity-counters.ts';

const perIp = compileCounter('accountsPerIp', {
  key: ['ip'],
  count: 'distinct',
  of: 'accountId',
  windowMs: 600_000,
});
const attempts = compileCounter('attempts', { key: ['accountId'], count: 'decisions', windowMs: 600_000 });
const denies = compileCounter('denies', { key: ['ip'], count: 'denies', windowMs: 3_600_000 });
const byChannel = compileCounter('byChannel', {
  key: ['accountId', 'context.channel'],
  count: 'decisions',
  windowMs: 60_000,
});

const request = (over: Partial<PolicyRequest> = {}): PolicyRequest => ({
  accountId: 'alice',
  ip: '203.0.113.7',
  context: { channel: 'web' },
  ...over,
});

describe('velocity counters', () => {
  it('parses windows in seconds, minutes and hours, and nothing else', () => {
    expect([parseWindow('30s'), parseWindow('10m'), parseWindow('24h')]).toEqual([
      30_000, 600_000, 86_400_000,
    ]);
    expect([parseWindow('1d'), parseWindow('10'), parseWindow('m10')]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('gives an edited counter other store keys: it starts from zero', () => {
    const wider = compileCounter('accountsPerIp', {
      key: ['ip'],
      count: 'distinct',
      of: 'accountId',
      windowMs: 3_600_000,
    });
    expect(wider.storeId).not.toBe(perIp.storeId);
    expect(
      compileCounter('accountsPerIp', { key: ['ip'], count: 'distinct', of: 'accountId', windowMs: 600_000 })
        .storeId,
    ).toBe(perIp.storeId);
  });

  it('hashes keys and members: no identifier reaches the store in clear', () => {
    const ops = readOps(planCounters([perIp, byChannel], request()));
    const text = JSON.stringify(ops);
    for (const clear of ['alice', '203.0.113.7', 'web']) expect(text).not.toContain(clear);
    // The same request plans the same keys; another address, another key.
    expect(readOps(planCounters([perIp], request()))).toEqual(readOps(planCounters([perIp], request())));
    expect(readOps(planCounters([perIp], request({ ip: '203.0.113.8' })))[0]!.key).not.toBe(ops[0]!.key);
  });

  it('counts this decision in decisions and distinct values, not in denies', () => {
    const plan = planCounters([perIp, attempts, denies], request());
    const values = counterValues(plan, { counts: [4, 9, 2], seen: [false, false, false] });
    expect(values).toEqual({ accountsPerIp: 5, attempts: 10, denies: 2 });
    // An account the address already tried is not a new distinct value.
    expect(counterValues(plan, { counts: [4, 9, 2], seen: [true, false, false] }).accountsPerIp).toBe(4);
  });

  it('reads 0 and counts nothing for a counter whose key the request lacks', () => {
    const plan = planCounters([perIp, attempts, byChannel], request({ ip: undefined, context: {} }));
    expect(readOps(plan)).toHaveLength(1);
    expect(counterValues(plan, { counts: [3], seen: [false] })).toEqual({
      accountsPerIp: 0,
      attempts: 4,
      byChannel: 0,
    });
    expect(recordOps(plan, 'allow')).toHaveLength(1);
  });

  it('counts a decided request in every counter it applies to, and in denies only when denied', () => {
    const plan = planCounters([perIp, attempts, denies], request());
    expect(recordOps(plan, 'challenge')).toHaveLength(2);
    expect(recordOps(plan, 'deny')).toHaveLength(3);
  });

  it('keeps key fields apart: ("a:b", "c") and ("a", "b:c") are two keys', () => {
    const two = compileCounter('two', { key: ['accountId', 'ip'], count: 'decisions', windowMs: 60_000 });
    const a = readOps(planCounters([two], request({ accountId: 'a:b', ip: 'c' })))[0]!.key;
    const b = readOps(planCounters([two], request({ accountId: 'a', ip: 'b:c' })))[0]!.key;
    expect(a).not.toBe(b);
  });
});
