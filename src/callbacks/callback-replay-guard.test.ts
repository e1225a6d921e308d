import { describe, expect, it } from 'vitest';
import { timersArmedBy } from '../../test/support/timers-armed.ts';
import { CallbackReplayGuard } from './callback-replay-guard.ts';

const sig = (text: string) => new TextEncoder().encode(text);

describe('CallbackReplayGuard', () => {
  it('takes a signature once and refuses it after', () => {
    const g = new CallbackReplayGuard();
    expect(g.firstSighting(sig('sig-a'))).toBe(true);
    expect(g.firstSighting(sig('sig-a'))).toBe(false);
    expect(g.firstSighting(sig('sig-b'))).toBe(true);
  });

  it('stays bounded: past maxEntries the oldest signature is forgotten', () => {
    const g = new CallbackReplayGuard({ maxEntries: 3 });
    for (const s of ['1', '2', '3', '4']) expect(g.firstSighting(sig(s))).toBe(true);
    expect(g.firstSighting(sig('4'))).toBe(false);
    expect(g.firstSighting(sig('1'))).toBe(true);
  });

  it('arms no timer to check or remember a signature (each would wake the event loop)', () => {
    const g = new CallbackReplayGuard();
    const timers = timersArmedBy(() => {
      for (let i = 0; i < 20; i++) {
        expect(g.firstSighting(sig(`sig-${i}`))).toBe(true);
        expect(g.seen(sig(`sig-${i}`))).toBe(true);
      }
    });
    expect(timers).toBe(0);
  });

  it('knows a signature by its bytes, wherever they sit in memory', () => {
    const g = new CallbackReplayGuard();
    const bytes = Buffer.from('a-signature-of-32-bytes-length!!');
    expect(g.seen(bytes)).toBe(false);
    expect(g.firstSighting(bytes)).toBe(true);
    // The same bytes at an offset in a larger buffer (as Buffer pools hand them out).
    const pooled = Buffer.concat([Buffer.from('xx'), bytes]).subarray(2);
    expect(g.seen(pooled)).toBe(true);
    expect(g.firstSighting(new Uint8Array(pooled))).toBe(false);
  });
});
