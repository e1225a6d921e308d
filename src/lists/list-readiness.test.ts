import { describe, expect, it } from 'vitest';
import { DrivenClock } from '../timing/driven-clock.ts';
import { listWarmth } from './list-component.ts';
import type { ListStore } from './list-store.ts';
import { ListSync } from './list-sync.ts';

/** The lists' warmth (`/readyz`): not loaded holds readiness; a database that fails does not. */

/** A store whose every read answers or fails as `state.failWith` says. */
function store(state: { failWith?: string }): ListStore {
  const answer = <T>(value: T) =>
    state.failWith === undefined
      ? Promise.resolve(value)
      : Promise.reject(
          Object.assign(new Error(`${state.failWith} at 10.0.0.5:5432`), { code: state.failWith }),
        );
  return {
    version: () => answer(1),
    loadActive: () => answer({ version: 1, entries: [] }),
  } as unknown as ListStore;
}

describe("the lists' warmth", () => {
  it('is behind before the first load, and warm once the snapshot is confirmed', async () => {
    const clock = new DrivenClock({ nowMs: 1_000_000 });
    const sync = new ListSync({ store: store({}), staleAfterMs: 10_000, clock });
    expect(listWarmth(sync, 10_000, clock.nowMs())).toEqual({
      state: 'behind',
      everWarm: false,
      sinceMs: undefined,
      reason: 'the lists are not loaded yet',
    });
    await sync.refresh(true);
    expect(listWarmth(sync, 10_000, clock.nowMs())).toEqual({ state: 'warm', everWarm: true });
    // A refresh that neither finished nor failed past the bound: behind since the bound ran out.
    clock.tick(12_000);
    expect(listWarmth(sync, 10_000, clock.nowMs())).toMatchObject({
      state: 'behind',
      everWarm: true,
      sinceMs: 1_010_000,
      reason: 'the list snapshot was last confirmed 12 s ago (bound 10 s)',
    });
  });

  it('is unavailable while the database fails (the degraded verdict covers it), warm again after', async () => {
    const clock = new DrivenClock({ nowMs: 1_000_000 });
    const state: { failWith?: string } = { failWith: 'SQLITE_BUSY' };
    const sync = new ListSync({ store: store(state), staleAfterMs: 10_000, clock });
    await expect(sync.refresh(true)).rejects.toThrow('SQLITE_BUSY');
    expect(listWarmth(sync, 10_000, clock.nowMs())).toEqual({
      state: 'unavailable',
      everWarm: false,
      sinceMs: undefined,
      // The code only: /readyz is open to anyone, and the message may name a host.
      reason: 'the list database fails: SQLITE_BUSY',
    });
    delete state.failWith;
    clock.tick(500);
    await sync.refresh(false);
    expect(listWarmth(sync, 10_000, clock.nowMs())).toEqual({ state: 'warm', everWarm: true });
  });
});
