import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { DrivenClock } from '../timing/driven-clock.ts';
import type { UpstreamResult } from '../upstream/upstream-result.ts';
import { ReadCache } from './admin-read-cache.ts';

type R = UpstreamResult<{ v: number }>;
const ok = (v: number): R => ({ ok: true, value: { v }, durationMs: 0 });
const codeOf = (r: R) => (r.ok ? `ok:${r.value.v}` : r.error.code);

/** A load the test settles by hand. */
function deferred() {
  let resolve!: (r: R) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<R>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('Admin read cache', () => {
  it('a load that rejects answers every waiter with RG_ERR_INTERNAL, and the next read loads again', async () => {
    const cache = new ReadCache<{ v: number }>({}, new DrivenClock(), 'get-user');
    const d = deferred();
    const waiters = [cache.get('k', () => d.promise, undefined), cache.get('k', () => d.promise, undefined)];
    d.reject(new TypeError('bug'));
    const rs = await Promise.all(waiters);
    expect(rs.map(codeOf)).toEqual([ErrorCode.INTERNAL, ErrorCode.INTERNAL]);
    expect(rs[0]!.ok ? undefined : rs[0]!.error.cause).toBeInstanceOf(TypeError);
    expect(codeOf(await cache.get('k', async () => ok(2), undefined))).toBe('ok:2');
  });

  it('a load that throws synchronously is an RG_ERR_INTERNAL result, not a throw', async () => {
    const cache = new ReadCache<{ v: number }>({}, new DrivenClock(), 'get-user');
    const r = await cache.get(
      'k',
      () => {
        throw new Error('bug');
      },
      undefined,
    );
    expect(codeOf(r)).toBe(ErrorCode.INTERNAL);
    expect(codeOf(await cache.get('k', async () => ok(3), undefined))).toBe('ok:3');
  });

  it('invalidating by value makes the loads in flight stale: answered, never stored', async () => {
    const cache = new ReadCache<{ v: number }>({ ttlMs: 60_000 }, new DrivenClock(), 'get-user-devices');
    const d = deferred();
    const early = cache.get('k', () => d.promise, undefined);
    cache.invalidate(undefined, (x) => x.v === 1); // cannot see the in-flight value yet
    d.resolve(ok(1));
    expect(codeOf(await early)).toBe('ok:1');
    expect(codeOf(await cache.get('k', async () => ok(2), undefined))).toBe('ok:2');
  });

  it('a stale load that finishes after a newer one does not overwrite it', async () => {
    const cache = new ReadCache<{ v: number }>({ ttlMs: 60_000 }, new DrivenClock(), 'get-user');
    const old = deferred();
    const first = cache.get('u1\u0001', () => old.promise, undefined);
    cache.invalidate('u1\u0001');
    const fresh = deferred();
    const second = cache.get('u1\u0001', () => fresh.promise, undefined);
    fresh.resolve(ok(2));
    expect(codeOf(await second)).toBe('ok:2');
    old.resolve(ok(1));
    expect(codeOf(await first)).toBe('ok:1');
    expect(codeOf(await cache.get('u1\u0001', async () => ok(9), undefined))).toBe('ok:2');
  });

  it("a caller's signal releases only that caller; the shared load goes on for the others", async () => {
    const cache = new ReadCache<{ v: number }>({}, new DrivenClock(), 'get-user');
    const d = deferred();
    const ac = new AbortController();
    const bounded = cache.get('k', () => d.promise, { signal: ac.signal });
    const patient = cache.get('k', () => d.promise, undefined);
    ac.abort();
    const r = await bounded;
    expect(codeOf(r)).toBe(ErrorCode.DEADLINE_EXCEEDED);
    expect(r.ok ? '' : r.error.message).toBe('admin get-user: decision deadline passed');
    d.resolve(ok(4));
    expect(codeOf(await patient)).toBe('ok:4');
  });
});
