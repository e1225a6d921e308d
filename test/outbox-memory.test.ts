import { hostname } from 'node:os';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ActionOutcome } from '../src/actions/action-dispatcher.ts';
import { type ActionAdmin, type ActionJob, planActions } from '../src/actions/admin-actions.ts';
import { ErrorCode, UpstreamError } from '../src/errors/riskgate-error.ts';
import { MemoryOutboxStore } from '../src/outbox/memory-outbox-store.ts';
import { Outbox, type OutboxOptions } from '../src/outbox/outbox.ts';
import type { CallOptions, UpstreamResult } from '../src/upstream/upstream-result.ts';
import { webhookJobs } from '../src/webhooks/webhook-sink.ts';

/**
 * The outbox over the memory store (RISKGATE_OUTBOX=memory), on fake timers: the one action
 * engine's retries, dead letters and deduplication, and what it does because nothing outlives the
 * process: a shutdown makes the retries due within its grace period and reports the rest failed
 * (`shutdown`); a fatal error reports everything undelivered failed (`process_crash`).
 */

type Code = (typeof ErrorCode)[keyof typeof ErrorCode];
const ok: UpstreamResult<unknown> = { ok: true, value: {}, durationMs: 1 };
function fail(code: Code, retryAfterMs?: number): UpstreamResult<unknown> {
  const details = { upstream: 'admin' as const, ...(retryAfterMs !== undefined && { retryAfterMs }) };
  return { ok: false, error: new UpstreamError(code, code, details), durationMs: 1 };
}

/** An Admin API whose lock-out of each user answers from a script (its last answer repeats). */
function scriptedAdmin(scripts: Record<string, (UpstreamResult<unknown> | 'hang')[]>) {
  const calls: Record<string, number[]> = {};
  /** The signals of the calls that hang. */
  const signals: AbortSignal[] = [];
  const admin = {
    updateUser: (userId: string, _update: unknown, options: CallOptions) => {
      calls[userId] ??= [];
      const mine = calls[userId];
      mine.push(Date.now());
      const script = scripts[userId] ?? [ok];
      const answer = script[Math.min(mine.length - 1, script.length - 1)]!;
      if (answer !== 'hang') return Promise.resolve(answer);
      if (options.signal !== undefined) signals.push(options.signal);
      return new Promise(() => {});
    },
  } as unknown as ActionAdmin;
  return { admin, calls, signals };
}

let seq = 0;
/** The lock-out of `user` as a decision plans it. */
function lockOut(user: string): ActionJob {
  seq++;
  const [plan] = planActions([{ type: 'lock_out_user', source: 'test' }], {
    decisionId: `d${seq}`,
    userId: user,
    deviceId: undefined,
  });
  return plan!.jobs[0]!;
}

const T0 = 1_800_000_000_000;

describe('the outbox over the memory store', () => {
  let outcomes: ActionOutcome[];
  let store: MemoryOutboxStore;
  let outbox: Outbox | undefined;

  function start(admin: ActionAdmin, options: Partial<OutboxOptions> = {}) {
    outbox = new Outbox({
      store,
      admin,
      onOutcome: (o) => outcomes.push(o),
      baseDelayMs: 100,
      maxDelayMs: 1000,
      pollMs: 50,
      // The timings below were written for a 10 ms claim delay.
      claimDelayMs: 10,
      random: () => 1, // the top of the jitter range: deterministic delays
      ...options,
    });
    outbox.start();
    return outbox;
  }

  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
    outcomes = [];
    store = new MemoryOutboxStore();
    outbox = undefined;
  });
  afterEach(async () => {
    await outbox?.abandon('test_over');
    vi.useRealTimers();
  });

  it('delivers a lock-out at once while a burst of webhooks hangs on a slow receiver', async () => {
    const { admin, calls } = scriptedAdmin({});
    let posted = 0;
    const webhooks = {
      timeoutMs: 30_000,
      post: () => {
        posted++;
        return new Promise<never>(() => {}); // the receiver never answers
      },
    };
    const o = start(admin, { concurrency: 4, webhooks });
    // Ten users' events (ten ordering keys), all due before the lock-out.
    const events = Array.from({ length: 10 }, (_, i) => ({
      id: `evt-${i}`,
      type: 'lockout.created' as const,
      at: new Date(T0).toISOString(),
      data: { userId: `w${i}` },
    }));
    await o.submit(events.flatMap((e) => webhookJobs(e, ['slow'])));
    await vi.advanceTimersByTimeAsync(100);
    await o.submit([lockOut('u1')]);
    await vi.advanceTimersByTimeAsync(100);
    expect(calls.u1).toHaveLength(1);
    // All slots but one went to the receiver.
    expect(posted).toBe(3);
  });

  it('ends at start the leases of an earlier life of its own pid (a container’s pid 1), not those of a live outbox', async () => {
    const pid = `${hostname()}:${process.pid}`;
    // A live outbox of this process holds u2's lock-out (its Admin call hangs).
    const other = lockOut('u2');
    // One slot, taken by the hanging call: it claims nothing more.
    const live = start(scriptedAdmin({ u2: ['hang'] }).admin, { owner: `${pid}:live`, concurrency: 1 });
    await live.submit([other]);
    await vi.advanceTimersByTimeAsync(100);
    expect((await store.get(other.key))?.owner).toBe(`${pid}:live`);
    // The earlier life (same host, same pid, another outbox) leased u1's and died.
    const job = lockOut('u1');
    await store.append([job.spec], Date.now());
    expect(await store.claim(`${pid}:earlier`, 1, Date.now(), 60_000)).toHaveLength(1);
    const { admin, calls } = scriptedAdmin({});
    const next = new Outbox({
      store,
      admin,
      onOutcome: (o) => outcomes.push(o),
      pollMs: 50,
      random: () => 1,
    });
    next.start();
    await vi.advanceTimersByTimeAsync(100);
    // Delivered now, not once the 60 s lease ran out; the live outbox's lease is left alone.
    expect(calls.u1).toHaveLength(1);
    expect(calls.u2).toBeUndefined();
    expect((await store.get(other.key))?.owner).toBe(`${pid}:live`);
    await next.abandon('test_over');
  });

  it('delivers a queued action after the submit answered, and reports it done', async () => {
    const { admin, calls } = scriptedAdmin({});
    const o = start(admin);
    const job = lockOut('u1');
    expect(await o.submit([job])).toEqual(['queued']);
    expect(calls.u1).toBeUndefined();
    await vi.advanceTimersByTimeAsync(100);
    expect(calls.u1).toHaveLength(1);
    expect(outcomes).toEqual([expect.objectContaining({ key: job.key, status: 'done', attempts: 1 })]);
    expect(await store.get(job.key)).toMatchObject({ status: 'delivered' });
  });

  it('retries a retryable failure with growing delays, never sooner than Retry-After, until it succeeds', async () => {
    const { admin, calls } = scriptedAdmin({
      u1: [fail(ErrorCode.UPSTREAM_SERVER_ERROR), fail(ErrorCode.UPSTREAM_RATE_LIMITED, 700), ok],
    });
    const o = start(admin);
    await o.submit([lockOut('u1')]);
    await vi.advanceTimersByTimeAsync(5000);
    const at = calls.u1!.map((t) => t - calls.u1![0]!);
    expect(at).toHaveLength(3);
    // 100 ms after the first failure, at least Retry-After (700 ms) after the second.
    expect(at[1]).toBeGreaterThanOrEqual(100);
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(700);
    expect(outcomes).toEqual([expect.objectContaining({ status: 'done', attempts: 3 })]);
  });

  it('does not retry a failure that will not change (404): dead-lettered with its code, for an operator', async () => {
    const { admin, calls } = scriptedAdmin({ u1: [fail(ErrorCode.UPSTREAM_NOT_FOUND)] });
    const o = start(admin);
    const job = lockOut('u1');
    await o.submit([job]);
    await vi.advanceTimersByTimeAsync(5000);
    expect(calls.u1).toHaveLength(1);
    expect(outcomes).toEqual([
      expect.objectContaining({ status: 'failed', attempts: 1, reason: 'RG_ERR_UPSTREAM_NOT_FOUND' }),
    ]);
    expect((await store.list({ status: 'dead' })).map((e) => e.spec.id)).toEqual([job.key]);
    // An operator puts it back, and it is delivered once the Admin API takes it.
    expect(await store.retry(job.key, Date.now())).toBe(true);
    o.nudge();
    await vi.advanceTimersByTimeAsync(100);
    expect(calls.u1).toHaveLength(2);
  });

  it('gives up once the next retry would fall past the horizon, with the last error', async () => {
    const { admin, calls } = scriptedAdmin({ u1: [fail(ErrorCode.UPSTREAM_SERVER_ERROR)] });
    const o = start(admin, { horizonMs: 3000 });
    await o.submit([lockOut('u1')]);
    await vi.advanceTimersByTimeAsync(10_000);
    // Every attempt within the 3 s horizon, a few of them (100, 200, 400, 800, 1000 ms apart).
    const at = calls.u1!;
    expect(at.length).toBeGreaterThanOrEqual(4);
    expect(at.at(-1)! - T0).toBeLessThanOrEqual(3000);
    expect(outcomes).toEqual([
      expect.objectContaining({
        status: 'failed',
        attempts: at.length,
        reason: 'horizon_exhausted:RG_ERR_UPSTREAM_SERVER_ERROR',
      }),
    ]);
  });

  it('never runs the same action twice, even after it finished', async () => {
    const { admin, calls } = scriptedAdmin({});
    const o = start(admin);
    const job = lockOut('u1');
    expect(await o.submit([job, job])).toEqual(['queued', 'duplicate']);
    await vi.advanceTimersByTimeAsync(100);
    expect(await o.submit([job])).toEqual(['duplicate']);
    await vi.advanceTimersByTimeAsync(100);
    expect(calls.u1).toHaveLength(1);
    expect(outcomes).toHaveLength(1);
  });

  it('refuses an action past its bound of undelivered ones', async () => {
    store = new MemoryOutboxStore({ maxPending: 1 });
    const o = start(scriptedAdmin({ u1: ['hang'] }).admin);
    expect(await o.submit([lockOut('u1')])).toEqual(['queued']);
    expect(await o.submit([lockOut('u2')])).toEqual(['refused']);
  });

  it('on shutdown makes the retries due within the grace period, then reports what is left failed (shutdown)', async () => {
    const { admin, calls } = scriptedAdmin({
      quick: [fail(ErrorCode.UPSTREAM_TIMEOUT), ok],
      slow: [fail(ErrorCode.UPSTREAM_SERVER_ERROR, 60_000)],
    });
    const o = start(admin);
    const quick = lockOut('quick');
    const slow = lockOut('slow');
    await o.submit([quick, slow]);
    await vi.advanceTimersByTimeAsync(20);
    expect(calls.quick).toHaveLength(1);
    const drained = o.drain(1000);
    await vi.advanceTimersByTimeAsync(1000);
    await drained;
    const byKey = Object.fromEntries(outcomes.map((x) => [x.key, x]));
    expect(byKey[quick.key]).toMatchObject({ status: 'done', attempts: 2 });
    expect(byKey[slow.key]).toMatchObject({ status: 'failed', reason: 'shutdown' });
    expect(outcomes).toHaveLength(2);
    expect(await o.submit([lockOut('late')])).toEqual(['refused']);
  });

  it("on shutdown sleeps until a user's first action is due, while the user's later one waits behind it", async () => {
    const { admin, calls } = scriptedAdmin({ u1: [fail(ErrorCode.UPSTREAM_SERVER_ERROR, 600), ok] });
    let claims = 0;
    const claim = store.claim.bind(store);
    store.claim = (...args) => {
      claims++;
      return claim(...args);
    };
    const o = start(admin);
    const first = lockOut('u1');
    const second = lockOut('u1');
    await o.submit([first, second]);
    await vi.advanceTimersByTimeAsync(20);
    expect(calls.u1).toHaveLength(1);
    claims = 0;
    const drained = o.drain(1000);
    await vi.advanceTimersByTimeAsync(1000);
    await drained;
    // Both delivered in order within the grace period, after a handful of looks at the store.
    expect(outcomes.map((x) => [x.key, x.status])).toEqual([
      [first.key, 'done'],
      [second.key, 'done'],
    ]);
    expect(claims).toBeLessThan(20);
  });

  it('on a fatal error reports every undelivered action failed at once, queued, between retries or in flight', async () => {
    const { admin, signals } = scriptedAdmin({
      flight: ['hang'],
      retrying: [fail(ErrorCode.UPSTREAM_SERVER_ERROR)],
    });
    const o = start(admin);
    const inFlight = lockOut('flight');
    const retrying = lockOut('retrying');
    await o.submit([inFlight, retrying]);
    await vi.advanceTimersByTimeAsync(20);
    const queued = lockOut('queued');
    await o.submit([queued]);
    await o.abandon('process_crash');
    expect(outcomes.map((x) => [x.key, x.status, x.reason]).sort()).toEqual(
      [
        [inFlight.key, 'failed', 'process_crash'],
        [queued.key, 'failed', 'process_crash'],
        [retrying.key, 'failed', 'process_crash'],
      ].sort(),
    );
    expect(signals).toHaveLength(1);
    expect(signals[0]!.aborted).toBe(true);
    expect(await o.submit([lockOut('late')])).toEqual(['refused']);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(outcomes).toHaveLength(3); // nothing reported twice, nothing retried
    outbox = undefined;
  });
});

describe('the memory store', () => {
  it('says it does not outlive the process, and warns the operator so at start', async () => {
    const store = new MemoryOutboxStore();
    expect(store.durable).toBe(false);
    expect((await store.warnings()).join(' ')).toMatch(/crash or restart loses/);
  });

  it('refuses a whole append past its bound, and keeps only the newest ended entries', async () => {
    const store = new MemoryOutboxStore({ maxPending: 2, maxFinal: 1 });
    const [a, b, c] = ['a', 'b', 'c'].map((u) => lockOut(u).spec!);
    await expect(store.append([a!, b!, c!], T0)).rejects.toThrow(/2 undelivered/);
    expect(await store.list({})).toEqual([]);
    expect(await store.append([a!, b!], T0)).toEqual([true, true]);
    await store.claim('w', 10, T0, 1000);
    await store.complete(a!.id, 'w', T0 + 1);
    await store.complete(b!.id, 'w', T0 + 2);
    expect(await store.get(a!.id)).toBeUndefined();
    expect(await store.get(b!.id)).toMatchObject({ status: 'delivered' });
    expect(await store.append([c!], T0 + 3)).toEqual([true]);
  });
});
