import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { RedisFeatureStore } from '../src/features/redis-feature-store.ts';
import { StoreTimeoutError } from '../src/store/store-deadline.ts';
import { type Harness, type HttpAnswer, startHarness } from './decide-harness.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';
import { LOCK_EVERYONE_POLICY } from './support/lock-everyone-policy.ts';
import { type RunningRedis, redisAvailable, startRedis } from './support/redis-server.ts';

/**
 * Issue 22, item 3: the Redis outbox's server stalls (SIGSTOP: the connection stays open, the
 * kernel takes the bytes, nothing answers). The client's own command timeout ends once a command is
 * written, so mallory's deny used to wait for the server for as long as it was stopped. Now the
 * answer comes within the deadline with the lock-out `deferred`, and the lock-out is delivered once
 * the server goes on (SIGCONT).
 */

/** Far past the deadline and the action write's budget, far short of a hang. */
const ANSWER_WITHIN_MS = 5000;

describe.runIf(redisAvailable())('a Redis outbox whose server stalls', () => {
  let redis: RunningRedis | undefined;
  let h: Harness | undefined;
  let paused = false;
  beforeAll(async () => {
    redis = await startRedis();
    h = await startHarness({
      env: { RISKGATE_OUTBOX: redis.url, RISKGATE_FEATURE_STORE: 'memory' },
      policy: { yaml: LOCK_EVERYONE_POLICY },
      deadlineMs: 500,
      riskgate: { outbox: { pollMs: 100 } },
    });
  });
  afterAll(async () => {
    // Always let the server go on first: a stopped server would hold the shutdown's last writes.
    if (paused) redis?.resume();
    await h?.stop();
    await redis?.stop();
  });

  /** /decide, or `undefined` if no answer came within `ms`. */
  async function decideWithin(body: unknown, ms: number): Promise<HttpAnswer | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    });
    try {
      return await Promise.race([h!.decide(body), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  it('answers mallory’s deny within the deadline with the lock-out deferred, and locks mallory out after SIGCONT', async () => {
    const harness = h!;
    const { mallory } = await lookUpUserIds(harness.sandbox, ['mallory']);
    expect(await adminUserStatus(harness.sandbox, mallory!)).toBe('enabled');

    redis!.pause();
    paused = true;
    const startedAt = performance.now();
    const res = await decideWithin(demoRequest('mallory', mallory), ANSWER_WITHIN_MS);
    const elapsedMs = performance.now() - startedAt;
    expect(res, `no answer within ${ANSWER_WITHIN_MS} ms while the outbox's Redis is stopped`).toBeDefined();
    expect(res!.status).toBe(200);
    expect(res!.body.verdict).toBe('deny');
    expect(res!.body.actions).toEqual([
      expect.objectContaining({ type: 'lock_out_user', status: 'deferred', reason: 'outbox_timeout' }),
    ]);
    expect(elapsedMs).toBeLessThan(ANSWER_WITHIN_MS);
    // Said in the decision log too, and counted.
    const line = await eventually(async () =>
      harness.lines.find((l) => l.kind === 'decision' && l.decisionId === res!.body.decisionId),
    );
    expect(line.actions).toEqual([expect.objectContaining({ status: 'deferred', reason: 'outbox_timeout' })]);
    // Nothing reached the Admin API while the outbox could not take the action.
    expect(await adminUserStatus(harness.sandbox, mallory!)).toBe('enabled');

    redis!.resume();
    paused = false;
    await eventually(
      async () => ((await adminUserStatus(harness.sandbox, mallory!)) === 'locked_out' ? true : undefined),
      15_000,
    );
    const metrics = await (await harness.ops('/metrics')).text();
    expect(metrics).toMatch(/riskgate_action_answers_total\{[^}]*status="deferred"[^}]*\} 1/);
    // Written once, whichever write landed first (the timed-out one or the retry), and delivered.
    await eventually(async () => {
      const outbox = (await (await harness.ops('/actions')).json()) as {
        actions: { decisionId: string; status: string }[];
      };
      const mine = outbox.actions.filter((a) => a.decisionId === res!.body.decisionId);
      return mine.length === 1 && mine[0]!.status === 'delivered' ? true : undefined;
    }, 10_000);
  });

  it('answers GET /actions 503 RG_ERR_OUTBOX_UNAVAILABLE, not 500, while the server is stopped, and 200 after', async () => {
    const harness = h!;
    redis!.pause();
    paused = true;
    const res = await harness.ops('/actions');
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    const body = (await res.json()) as { code: string; detail: string };
    expect(body.code).toBe('RG_ERR_OUTBOX_UNAVAILABLE');
    // The server's address is never in the answer (a Redis URL may carry a password).
    expect(body.detail).not.toContain('127.0.0.1');
    redis!.resume();
    paused = false;
    expect((await harness.ops('/actions')).status).toBe(200);
  });

  it('ends a feature store count on the stopped server at its deadline instead of keeping it in flight', async () => {
    const store = await RedisFeatureStore.connect({ url: redis!.url, commandTimeoutMs: 200 });
    try {
      const op = { key: 'stall:count', windowMs: 60_000 };
      await store.recordCounters([op], Date.now());
      redis!.pause();
      paused = true;
      const startedAt = performance.now();
      const outcome = await Promise.race([
        store.recordCounters([op], Date.now()).then(
          () => 'answered',
          (error: unknown) => error,
        ),
        new Promise((r) => setTimeout(() => r('still waiting'), ANSWER_WITHIN_MS)),
      ]);
      expect(outcome).toBeInstanceOf(StoreTimeoutError);
      expect(performance.now() - startedAt).toBeLessThan(ANSWER_WITHIN_MS);
    } finally {
      redis!.resume();
      paused = false;
      await store.close();
    }
  });
});
