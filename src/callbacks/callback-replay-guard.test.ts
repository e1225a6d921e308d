import { describe, expect, it } from 'vitest';
import { CallbackReplayGuard } from './callback-replay-guard.ts';

describe('CallbackReplayGuard', () => {
  it('takes a signature once and refuses it after', () => {
    const g = new CallbackReplayGuard();
    expect(g.firstSighting('sig-a')).toBe(true);
    expect(g.firstSighting('sig-a')).toBe(false);
    expect(g.firstSighting('sig-b')).toBe(true);
  });

  it('stays bounded: past maxEntries the oldest signature is forgotten', () => {
    const g = new CallbackReplayGuard({ maxEntries: 3 });
    for (const s of ['1', '2', '3', '4']) expect(g.firstSighting(s)).toBe(true);
    expect(g.firstSighting('4')).toBe(false);
    expect(g.firstSighting('1')).toBe(true);
  });
});
