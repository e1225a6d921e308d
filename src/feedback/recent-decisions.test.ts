import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { timersArmedBy } from '../../test/support/timers-armed.ts';
import { DrivenClock } from '../timing/driven-clock.ts';
import { compactId, RecentDecisions } from './recent-decisions.ts';

/** The key as riskgate always made it: the hex digits through Buffer (which stops at a bad pair). */
const viaBuffer = (id: string) => Buffer.from(id.replaceAll('-', ''), 'hex').toString('latin1');

describe('recent decisions', () => {
  it('keys a canonical id exactly as the Buffer reading does, in either letter case', () => {
    for (let i = 0; i < 2000; i++) {
      const id = randomUUID();
      expect(compactId(id)).toBe(viaBuffer(id));
      expect(compactId(id.toUpperCase())).toBe(viaBuffer(id));
    }
    expect(compactId('00000000-0000-0000-0000-000000000000')).toBe('\0'.repeat(16));
    expect(compactId('ffffffff-ffff-ffff-ffff-ffffffffffff')).toBe('\xff'.repeat(16));
  });

  it('keys an id of any other shape as the Buffer reading does', () => {
    const id = randomUUID();
    const odd = [
      '',
      'not-a-uuid',
      id.slice(0, 35),
      `${id}0`,
      id.replaceAll('-', ''),
      `${id.slice(0, 8)}_${id.slice(9)}`,
      `g${id.slice(1)}`,
      `${id.slice(0, 35)}z`,
      `${id.slice(0, 7)}-${id.slice(8, 36)}`,
    ];
    for (const o of odd) expect(compactId(o), o).toBe(viaBuffer(o));
  });

  it('finds a remembered decision by its id in either letter case, and only that one', () => {
    const recent = new RecentDecisions();
    const id = randomUUID();
    recent.remember(id, 'key-1');
    expect(recent.get(id)?.keyId).toBe('key-1');
    expect(recent.get(id.toUpperCase())?.keyId).toBe('key-1');
    expect(recent.get(randomUUID())).toBeUndefined();
  });

  it('forgets a decision once its retention has passed on the clock it is given', async () => {
    // Not at 0: lru-cache reads a start time of 0 as "no expiry" (performance.now() is never 0).
    const clock = new DrivenClock({ monotonicMs: 5000 });
    const recent = new RecentDecisions({ retentionMs: 1000, clock });
    const id = randomUUID();
    recent.remember(id, 'key-1');
    await clock.advance(999);
    expect(recent.get(id)?.keyId).toBe('key-1');
    await clock.advance(2);
    expect(recent.get(id)).toBeUndefined();
  });

  it('arms no timer to remember or find a decision (a timer would wake the event loop per decision)', () => {
    const recent = new RecentDecisions();
    const ids = Array.from({ length: 100 }, () => randomUUID());
    const timers = timersArmedBy(() => {
      for (const id of ids) {
        recent.remember(id, 'key-1');
        recent.get(id);
      }
    });
    expect(timers).toBe(0);
    expect(recent.get(ids[0]!)?.keyId).toBe('key-1');
  });
});
