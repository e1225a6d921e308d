import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { SteppedClock } from '../src/timing/driven-clock.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { postgresAvailable, postgresForSuite } from './support/postgres-server.ts';
import { type RunningRedis, redisAvailable, startRedis } from './support/redis-server.ts';

/**
 * Two riskgates on one Redis feature store and one vendor: one of them holds the lease and reads
 * the Log API, the other reads what it wrote. Failed authentications simulated in the sandbox
 * become history features on both, and both report the follower's lag (not a lag of their own).
 */

type Reports = Record<string, { status: string; result?: Record<string, number> }>;

/** riskgate's clock, stepped with the sandbox's. */
const clock = new SteppedClock();

/** Replicas share the database as they share the store: riskgate refuses half of each. */
const sharedStores = redisAvailable() && postgresAvailable();

describe.runIf(sharedStores)('one Log API follower for two riskgates on a shared store', () => {
  let redis: RunningRedis;
  const pg = postgresForSuite();
  let a: Harness;
  let b: Harness;
  beforeAll(async () => {
    redis = await startRedis();
    const env = { RISKGATE_FEATURE_STORE: redis.url, RISKGATE_DATABASE: pg.url };
    a = await startHarness({ env, riskgate: { clock, logs: { pollIntervalMs: 50 } } });
    b = await startHarness({
      env,
      sharedSandbox: a.sandbox,
      riskgate: { clock, logs: { pollIntervalMs: 50 } },
    });
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await redis?.stop();
  });

  it('follows once between them, and both read the history it feeds', async () => {
    // One holds the lease (a renewal lost to a loaded machine may hand it over: then the other does).
    await eventually(async () =>
      [a.riskgate.logs!.isFollowing(), b.riskgate.logs!.isFollowing()].filter(Boolean).length === 1
        ? true
        : undefined,
    );
    const { bob } = await lookUpUserIds(a.sandbox, ['bob']);
    for (let i = 0; i < 5; i++) {
      await a.control('POST', '/sandbox/authentications', {
        user_id: bob,
        result: 'failure',
        factor: 'passcode',
      });
    }
    await a.control('POST', '/sandbox/clock', { advanceSeconds: 130 });
    clock.step(130_000);
    for (const h of [a, b]) {
      const r = await eventually(async () => {
        const d = await h.decide(demoRequest('bob', bob));
        return (d.body.signals as Reports).history?.result?.failedAuthentications1h === 5 ? d : undefined;
      });
      expect((r.body.reasons as { id: string }[]).map((x) => x.id)).toContain('failures-before-login');
    }
    // Each reports the follower's lag, the Log API's two minutes, not the idle one's own cursor (the
    // other replica's copy of it is refreshed every poll interval).
    for (const h of [a, b]) {
      const lag = async () =>
        Number(
          /^riskgate_log_follower_lag_seconds (\d+(\.\d+)?)/m.exec(
            await (await h.ops('/metrics')).text(),
          )![1],
        );
      await eventually(async () => ((await lag()) < 200 ? true : undefined));
    }
  });
});
