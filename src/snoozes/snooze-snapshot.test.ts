import { describe, expect, it } from 'vitest';
import { SnoozeSnapshot } from './snooze-snapshot.ts';

const NOW = Date.UTC(2026, 10, 28, 12);
const req = (over: Partial<{ accountId: string; userId: string; unitId: string; ip: string }> = {}) => ({
  accountId: 'alice',
  context: {},
  ...over,
});

describe('the rule snoozes snapshot', () => {
  const snapshot = new SnoozeSnapshot([
    { id: 'a1', ruleId: 'r1', entity: 'accountId', value: 'alice', untilMs: NOW + 1000 },
    { id: 'a2', ruleId: 'r1', entity: 'accountId', value: 'alice', untilMs: NOW + 5000 },
    { id: 'u1', ruleId: 'r2', entity: 'userId', value: 'u-9', untilMs: NOW + 1000 },
    { id: 'n1', ruleId: 'r3', entity: 'ip', value: '198.51.100.0/24', untilMs: NOW + 1000 },
    { id: 'n2', ruleId: 'r3', entity: 'ip', value: '2001:db8::/32', untilMs: NOW + 1000 },
    { id: 'h1', ruleId: 'r3', entity: 'ip', value: '192.0.2.7/32', untilMs: NOW + 1000 },
  ]);

  it('answers the snooze that ends last of those covering the login', () => {
    expect(snapshot.match('r1', req(), NOW)?.snoozeId).toBe('a2');
    expect(snapshot.match('r1', req(), NOW + 2000)?.snoozeId).toBe('a2');
  });

  it('names a row whose ip value it cannot read, and leaves it out (the rule fires)', () => {
    const withBad = new SnoozeSnapshot([
      { id: 'ok', ruleId: 'r1', entity: 'accountId', value: 'alice', untilMs: NOW + 1000 },
      { id: 'bad', ruleId: 'r3', entity: 'ip', value: 'not-an-address', untilMs: NOW + 1000 },
    ]);
    expect(withBad.unreadable).toEqual(['bad']);
    expect(withBad.size).toBe(1);
    expect(snapshot.unreadable).toEqual([]);
  });

  it('stops at its until, checked at lookup', () => {
    expect(snapshot.match('r1', req(), NOW + 5000)).toBeUndefined();
    expect(snapshot.match('r2', req({ userId: 'u-9' }), NOW + 999)?.snoozeId).toBe('u1');
    expect(snapshot.match('r2', req({ userId: 'u-9' }), NOW + 1000)).toBeUndefined();
  });

  it('covers only its own rule and its own entity', () => {
    expect(snapshot.match('r1', req({ accountId: 'bob' }), NOW)).toBeUndefined();
    expect(snapshot.match('r2', req({ userId: 'u-8' }), NOW)).toBeUndefined();
    expect(snapshot.match('r4', req(), NOW)).toBeUndefined();
    // A user id equal to a snoozed account id is another entity.
    expect(snapshot.match('r1', req({ accountId: 'x', userId: 'alice' }), NOW)).toBeUndefined();
  });

  it('matches addresses inside a CIDR (IPv4, IPv4-mapped, IPv6) and a single address', () => {
    expect(snapshot.match('r3', req({ ip: '198.51.100.200' }), NOW)?.snoozeId).toBe('n1');
    expect(snapshot.match('r3', req({ ip: '::ffff:198.51.100.1' }), NOW)?.snoozeId).toBe('n1');
    expect(snapshot.match('r3', req({ ip: '2001:db8:1::5' }), NOW)?.snoozeId).toBe('n2');
    expect(snapshot.match('r3', req({ ip: '192.0.2.7' }), NOW)?.snoozeId).toBe('h1');
    expect(snapshot.match('r3', req({ ip: '192.0.2.8' }), NOW)).toBeUndefined();
    expect(snapshot.match('r3', req({ ip: '198.51.101.1' }), NOW)).toBeUndefined();
    expect(snapshot.match('r3', req({ ip: 'not an ip' }), NOW)).toBeUndefined();
  });

  it('counts what it holds', () => {
    expect(snapshot.size).toBe(6);
    expect(new SnoozeSnapshot([]).match('r1', req(), NOW)).toBeUndefined();
  });
});
