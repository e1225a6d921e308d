import { describe, expect, it } from 'vitest';
import type { Observation } from './observation.ts';
import { ObservationStore } from './observation-store.ts';

const SERVICE = '7ef5fbc3-8a0d-4a44-8a5c-3b1f2a1e9c10';
const obs = (timeMs: number, extra: Partial<Observation> = {}): Omit<Observation, 'seq'> => ({
  serviceId: SERVICE,
  accountId: 'a',
  unitId: 'u',
  verificationStatus: 'verified',
  interactionId: 'login-1',
  platform: 'browser',
  timeMs,
  ...extra,
});

describe('ObservationStore', () => {
  it('keeps each account sorted by time, out-of-order arrivals after equal times', () => {
    const s = new ObservationStore();
    s.add(obs(30));
    s.add(obs(10));
    s.add(obs(20, { interactionId: 'first-at-20' }));
    s.add(obs(20, { interactionId: 'second-at-20' }));
    expect(s.account(SERVICE, 'a').map((o) => [o.timeMs, o.interactionId])).toEqual([
      [10, 'login-1'],
      [20, 'first-at-20'],
      [20, 'second-at-20'],
      [30, 'login-1'],
    ]);
  });

  it('selects an inclusive window of one account, interactionId by prefix or exactly', () => {
    const s = new ObservationStore();
    for (const t of [10, 20, 30, 40]) s.add(obs(t, { interactionId: `login-${t}` }));
    s.add(obs(25, { accountId: 'b' }));
    s.add(obs(25, { serviceId: 'other' }));
    expect(s.select(SERVICE, 'a', {}, 20, 30).map((o) => o.timeMs)).toEqual([20, 30]);
    expect(s.select(SERVICE, 'a', { interactionId: 'login-' }, 0, 100)).toHaveLength(4);
    expect(s.select(SERVICE, 'a', { interactionId: 'login-', interactionExact: true }, 0, 100)).toHaveLength(
      0,
    );
    expect(
      s.select(SERVICE, 'a', { interactionId: 'login-20', interactionExact: true }, 0, 100),
    ).toHaveLength(1);
    expect(s.select(SERVICE, 'a', { unitId: 'x' }, 0, 100)).toHaveLength(0);
    expect(s.select(SERVICE, 'a', { sdkVersionId: 'v1' }, 0, 100)).toHaveLength(0);
    expect(s.size()).toBe(6);
    s.clear();
    expect(s.select(SERVICE, 'a', {}, 0, 100)).toEqual([]);
  });
});
