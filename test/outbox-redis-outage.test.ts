import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { LOCK_EVERYONE_POLICY } from './support/lock-everyone-policy.ts';
import { type RunningRedis, redisAvailable, startRedis } from './support/redis-server.ts';

/**
 * The shared outbox's server goes away: a decision must still answer at once, saying its action
 * could not be queued (never promising what was not written), and never a 5xx.
 */
describe.runIf(redisAvailable())('a Redis outbox that goes away', () => {
  let redis: RunningRedis;
  let h: Harness;
  beforeAll(async () => {
    redis = await startRedis();
    // Every login denied and locked out: the shipped policy's lock-out hangs on a signal answering
    // within its timeout, which a loaded CI machine does not always give the first decision.
    h = await startHarness({
      // The outbox alone on Redis: counters on it would want the shared database too.
      env: { RISKGATE_OUTBOX: redis.url, RISKGATE_FEATURE_STORE: 'memory' },
      policy: { yaml: LOCK_EVERYONE_POLICY },
    });
  });
  afterAll(async () => {
    await h?.stop();
    await redis?.stop();
  });

  it('answers at once with the lock-out refused, not queued, and recovers nothing it did not promise', async () => {
    const { mallory } = await lookUpUserIds(h.sandbox, ['mallory']);
    const before = await h.decide(demoRequest('mallory', mallory));
    expect((before.body.actions as { type: string; status: string }[])[0]).toMatchObject({
      type: 'lock_out_user',
      status: 'queued',
    });
    await redis.stop();
    const startedAt = performance.now();
    const res = await h.decide(demoRequest('mallory', mallory));
    const elapsedMs = performance.now() - startedAt;
    expect(res.status).toBe(200);
    expect(res.body.verdict).toBe('deny');
    expect((res.body.actions as { type: string; status: string; reason?: string }[])[0]).toMatchObject({
      type: 'lock_out_user',
      status: 'failed',
      reason: 'queue_refused',
    });
    // Well inside the second a login can wait (the command timeout is 500 ms; a lost connection fails
    // at once): a generous bound that only a hang would cross.
    expect(elapsedMs).toBeLessThan(3000);
    expect(h.serviceLog).toContainEqual(
      expect.objectContaining({ level: 'error', msg: 'outbox store failed' }),
    );
  });

  it('answers GET /actions 503 RG_ERR_OUTBOX_UNAVAILABLE while the server is gone, never 500', async () => {
    await redis.stop();
    const res = await h.ops('/actions');
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(await res.json()).toMatchObject({ code: 'RG_ERR_OUTBOX_UNAVAILABLE' });
  });
});
