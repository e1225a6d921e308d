import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import type { UpstreamResult } from '../upstream/upstream-result.ts';
import { type ActionJob, type ActionOutcome, ActionQueue } from './action-queue.ts';

const ok: UpstreamResult<unknown> = { ok: true, value: {}, durationMs: 1 };
function fail(
  code: (typeof ErrorCode)[keyof typeof ErrorCode],
  retryAfterMs?: number,
): UpstreamResult<unknown> {
  const details =
    retryAfterMs === undefined
      ? { upstream: 'admin' as const }
      : { upstream: 'admin' as const, retryAfterMs };
  return { ok: false, error: new UpstreamError(code, code, details), durationMs: 1 };
}

function job(results: UpstreamResult<unknown>[], extra: Partial<ActionJob> = {}) {
  const calls: number[] = [];
  const j: ActionJob = {
    key: 'd1:lock_out_user:u1',
    decisionId: 'd1',
    type: 'lock_out_user',
    target: 'u1',
    attempt: async () => {
      calls.push(Date.now());
      return results[Math.min(calls.length - 1, results.length - 1)]!;
    },
    ...extra,
  };
  return { job: j, calls };
}

describe('ActionQueue', () => {
  let outcomes: ActionOutcome[];
  let queue: ActionQueue;
  beforeEach(() => {
    vi.useFakeTimers({ now: 0 });
    outcomes = [];
    queue = new ActionQueue({
      onOutcome: (o) => outcomes.push(o),
      baseDelayMs: 100,
      maxDelayMs: 1000,
      maxAttempts: 4,
      random: () => 1, // the top of the jitter range: deterministic delays
    });
  });
  afterEach(() => vi.useRealTimers());

  it('runs a job on a later turn than enqueue and reports it done', async () => {
    const { job: j, calls } = job([ok]);
    expect(queue.enqueue(j)).toBe('queued');
    expect(calls).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(1);
    expect(outcomes).toEqual([expect.objectContaining({ status: 'done', attempts: 1, key: j.key })]);
    expect(queue.size).toBe(0);
  });

  it('retries a retryable failure with exponential backoff until it succeeds', async () => {
    const { job: j, calls } = job([
      fail(ErrorCode.UPSTREAM_SERVER_ERROR),
      fail(ErrorCode.UPSTREAM_TIMEOUT),
      ok,
    ]);
    queue.enqueue(j);
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toEqual([0]);
    await vi.advanceTimersByTimeAsync(99);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toEqual([0, 100]);
    await vi.advanceTimersByTimeAsync(200);
    expect(calls).toEqual([0, 100, 300]);
    expect(outcomes).toEqual([expect.objectContaining({ status: 'done', attempts: 3 })]);
  });

  it('waits at least the upstream Retry-After, capped by maxDelayMs', async () => {
    const { job: j, calls } = job([
      fail(ErrorCode.UPSTREAM_RATE_LIMITED, 700),
      fail(ErrorCode.UPSTREAM_RATE_LIMITED, 60_000),
      ok,
    ]);
    queue.enqueue(j);
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(5000);
    expect(calls).toEqual([0, 700, 1700]);
    expect(outcomes[0]?.status).toBe('done');
  });

  it('does not retry a failure that will not change (404) and reports its code', async () => {
    const { job: j, calls } = job([fail(ErrorCode.UPSTREAM_NOT_FOUND)]);
    queue.enqueue(j);
    await vi.advanceTimersByTimeAsync(5000);
    expect(calls).toHaveLength(1);
    expect(outcomes).toEqual([
      expect.objectContaining({ status: 'failed', attempts: 1, reason: 'RG_ERR_UPSTREAM_NOT_FOUND' }),
    ]);
  });

  it('gives up after maxAttempts with the last error', async () => {
    const { job: j, calls } = job([fail(ErrorCode.UPSTREAM_SERVER_ERROR)]);
    queue.enqueue(j);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(calls).toHaveLength(4);
    expect(outcomes).toEqual([
      expect.objectContaining({ status: 'failed', attempts: 4, reason: 'RG_ERR_UPSTREAM_SERVER_ERROR' }),
    ]);
  });

  it('never runs the same key twice, even after it finished', async () => {
    const { job: j, calls } = job([ok]);
    expect(queue.enqueue(j)).toBe('queued');
    expect(queue.enqueue(j)).toBe('duplicate');
    await vi.advanceTimersByTimeAsync(0);
    expect(queue.enqueue(j)).toBe('duplicate');
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(1);
    expect(outcomes).toHaveLength(1);
  });

  it('keeps at most `concurrency` attempts in flight', async () => {
    const q = new ActionQueue({ onOutcome: (o) => outcomes.push(o), concurrency: 2 });
    let inFlight = 0;
    let peak = 0;
    for (let i = 0; i < 5; i++) {
      q.enqueue({
        key: `k${i}`,
        decisionId: `d${i}`,
        type: 'lock_out_user',
        target: 'u',
        attempt: async () => {
          inFlight++;
          peak = Math.max(peak, inFlight);
          await new Promise((r) => setTimeout(r, 10));
          inFlight--;
          return ok;
        },
      });
    }
    await vi.advanceTimersByTimeAsync(100);
    expect(peak).toBe(2);
    expect(outcomes.filter((o) => o.status === 'done')).toHaveLength(5);
  });

  it('refuses beyond maxPending and reports the refused job failed', async () => {
    const q = new ActionQueue({ onOutcome: (o) => outcomes.push(o), maxPending: 1 });
    expect(q.enqueue(job([ok], { key: 'a' }).job)).toBe('queued');
    expect(q.enqueue(job([ok], { key: 'b' }).job)).toBe('refused');
    expect(outcomes).toEqual([expect.objectContaining({ key: 'b', status: 'failed', reason: 'queue_full' })]);
  });

  it('drain waits for pending retries, then reports what is left as failed with reason shutdown', async () => {
    const slow = job([fail(ErrorCode.UPSTREAM_SERVER_ERROR)], { key: 'slow' });
    const quick = job([fail(ErrorCode.UPSTREAM_TIMEOUT), ok], { key: 'quick' });
    queue.enqueue(slow.job);
    queue.enqueue(quick.job);
    await vi.advanceTimersByTimeAsync(0);
    const drained = queue.drain(250);
    expect(queue.enqueue(job([ok], { key: 'late' }).job)).toBe('refused');
    await vi.advanceTimersByTimeAsync(250);
    await drained;
    const byKey = Object.fromEntries(outcomes.map((o) => [o.key, o]));
    expect(byKey.quick).toMatchObject({ status: 'done', attempts: 2 });
    expect(byKey.late).toMatchObject({ status: 'failed', reason: 'shutdown' });
    expect(byKey.slow).toMatchObject({ status: 'failed', reason: 'shutdown' });
    expect(outcomes).toHaveLength(3);
    expect(queue.size).toBe(0);
  });

  it('drain resolves as soon as the queue is empty', async () => {
    queue.enqueue(job([ok]).job);
    const drained = queue.drain(60_000);
    await vi.advanceTimersByTimeAsync(0);
    await drained;
    expect(outcomes).toEqual([expect.objectContaining({ status: 'done' })]);
  });

  it('abandon ends every job at once, queued, between retries or in flight, each failed with the reason', async () => {
    let abortedSignal: AbortSignal | undefined;
    const inFlight = job([ok], {
      key: 'in-flight',
      attempt: (o) => {
        abortedSignal = o.signal;
        return new Promise(() => {});
      },
    });
    const retrying = job([fail(ErrorCode.UPSTREAM_SERVER_ERROR)], { key: 'retrying' });
    queue.enqueue(inFlight.job);
    queue.enqueue(retrying.job);
    await vi.advanceTimersByTimeAsync(0);
    queue.enqueue(job([ok], { key: 'queued' }).job);
    expect(queue.abandon('process_crash')).toBe(3);
    expect(outcomes.map((o) => [o.key, o.status, o.reason]).sort()).toEqual([
      ['in-flight', 'failed', 'process_crash'],
      ['queued', 'failed', 'process_crash'],
      ['retrying', 'failed', 'process_crash'],
    ]);
    expect(abortedSignal?.aborted).toBe(true);
    expect(queue.size).toBe(0);
    expect(queue.enqueue(job([ok], { key: 'late' }).job)).toBe('refused');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(outcomes).toHaveLength(4); // nothing reported twice, nothing retried
  });
});
