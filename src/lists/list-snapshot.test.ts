import { describe, expect, it } from 'vitest';
import { ListSnapshot, type SnapshotEntry } from './list-snapshot.ts';
import { normaliseListValue } from './list-values.ts';

const ip = (value: string, expiresMs: number | null = null): SnapshotEntry => ({
  list: 'blocked',
  value: normaliseListValue('ip', value).ok
    ? (normaliseListValue('ip', value) as { value: string }).value
    : value,
  kind: 'ip',
  expiresMs,
});

describe('the list snapshot', () => {
  it('matches an address inside a CIDR of an ip list, and not one outside', () => {
    const s = new ListSnapshot([ip('203.0.113.0/24'), ip('2001:db8::/32'), ip('198.51.100.7')]);
    expect(s.contains('blocked', '203.0.113.99', 0)).toBe(true);
    expect(s.contains('blocked', '::ffff:203.0.113.5', 0)).toBe(true);
    expect(s.contains('blocked', '203.0.114.1', 0)).toBe(false);
    expect(s.contains('blocked', '2001:db8:1::5', 0)).toBe(true);
    expect(s.contains('blocked', '2001:db9::5', 0)).toBe(false);
    expect(s.contains('blocked', '198.51.100.7', 0)).toBe(true);
    expect(s.contains('blocked', '198.51.100.8', 0)).toBe(false);
    expect(s.contains('blocked', 'not an ip', 0)).toBe(false);
    expect(s.contains('other', '203.0.113.99', 0)).toBe(false);
  });

  it('matches as inCidr does across families: ::/0 holds IPv4 too, 0.0.0.0/0 no IPv6', () => {
    const everything = new ListSnapshot([ip('::/0')]);
    expect(everything.contains('blocked', '203.0.113.1', 0)).toBe(true);
    expect(everything.contains('blocked', '2001:db8::1', 0)).toBe(true);
    const v4 = new ListSnapshot([ip('0.0.0.0/0')]);
    expect(v4.contains('blocked', '203.0.113.1', 0)).toBe(true);
    expect(v4.contains('blocked', '2001:db8::1', 0)).toBe(false);
    const mapped = new ListSnapshot([ip('::ffff:0:0/96'), ip('2001:db8::/32')]);
    expect(mapped.contains('blocked', '198.51.100.1', 0)).toBe(true);
    expect(mapped.contains('blocked', '2001:db9::1', 0)).toBe(false);
  });

  it('matches ids exactly', () => {
    const s = new ListSnapshot([{ list: 'vip', value: 'acct-1', kind: 'accountId', expiresMs: null }]);
    expect(s.contains('vip', 'acct-1', 0)).toBe(true);
    expect(s.contains('vip', 'acct-12', 0)).toBe(false);
    expect(s.contains('vip', 'ACCT-1', 0)).toBe(false);
  });

  it('stops matching an entry at its expiry, without a refresh', () => {
    const s = new ListSnapshot([
      ip('203.0.113.0/24', 1000),
      { list: 'vip', value: 'acct-1', kind: 'accountId', expiresMs: 1000 },
    ]);
    expect(s.contains('blocked', '203.0.113.1', 999)).toBe(true);
    expect(s.contains('blocked', '203.0.113.1', 1000)).toBe(false);
    expect(s.contains('vip', 'acct-1', 999)).toBe(true);
    expect(s.contains('vip', 'acct-1', 1000)).toBe(false);
  });

  it('keeps an unexpired wider network matching when a narrower one expired', () => {
    const s = new ListSnapshot([ip('10.1.2.0/24', 1000), ip('10.0.0.0/8', 5000)]);
    expect(s.contains('blocked', '10.1.2.3', 2000)).toBe(true);
    expect(s.contains('blocked', '10.1.2.3', 5000)).toBe(false);
  });
});

describe('a list value', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['203.0.113.7/24', '203.0.113.0/24'],
    [' 2001:DB8::0:1 ', '2001:db8::1'],
    ['2001:db8::1/32', '2001:db8::/32'],
    ['::ffff:192.0.2.1', '192.0.2.1'],
  ])('of an ip list, %s, is kept as %s', (given, kept) => {
    expect(normaliseListValue('ip', given)).toEqual({ ok: true, value: kept });
  });

  it.each(['10.0.0.0/33', '300.1.1.1', 'example.com', '', '1.2.3.4/x'])(
    'refuses %j for an ip list',
    (given) => {
      expect(normaliseListValue('ip', given).ok).toBe(false);
    },
  );

  it('takes any id of another kind but control characters', () => {
    expect(normaliseListValue('userId', 'u-1')).toEqual({ ok: true, value: 'u-1' });
    expect(normaliseListValue('userId', 'u\n1').ok).toBe(false);
  });
});
