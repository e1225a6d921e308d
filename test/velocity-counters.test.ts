import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';
import { postgresAvailable, postgresForSuite } from './support/postgres-server.ts';
import { type RunningRedis, redisAvailable, startRedis } from './support/redis-server.ts';

/**
 * Velocity counters over real HTTP with the shipped policy: a credential-stuffing burst from one IP
 * address across 50 accounts turns the next login from it, which alone would be allowed, into a
 * challenge; the same login from elsewhere is not touched. On Redis, a hung store leaves the
 * counters unavailable within their own timeout and the decision is answered, never a 5xx; at 100
 * decisions a second with the server stopped (SIGSTOP) for 3 s, every answer comes without it.
 */

const STUFFER_IP = '203.0.113.7';

type Reports = Record<string, { status: string; result?: Record<string, number>; reason?: string }>;

function reasonIds(body: Record<string, unknown>): string[] {
  return (body.reasons as { id: string }[]).map((r) => r.id);
}

describe('velocity counters in memory (one riskgate)', () => {
  let h: Harness;
  let alice: string;
  beforeAll(async () => {
    // Patient timeouts: alice's allow must not turn into a degraded challenge on a busy machine
    // (the Redis tests below are of the counters' own timeout, and keep the shipped one).
    h = await startHarness({ policy: { yaml: patientShippedPolicy() }, deadlineMs: PATIENT_DEADLINE_MS });
    alice = (await lookUpUserIds(h.sandbox, ['alice'])).alice!;
  });
  afterAll(() => h?.stop());

  it('a stuffing burst from one IP across 50 accounts turns the next login from it into a challenge', async () => {
    const first = await h.decide({ ...demoRequest('alice', alice), ip: STUFFER_IP });
    expect(first.status).toBe(200);
    expect(first.body.verdict).toBe('allow');
    expect((first.body.signals as Reports).velocity).toEqual({
      status: 'ok',
      result: { accountsPerIp: 1, ipsPerAccount: 1 },
    });

    // 49 more accounts from the same address, as a stuffing list would try them.
    for (let i = 1; i < 50; i++) {
      const r = await h.decide({ accountId: `stuffed-${i}`, ip: STUFFER_IP });
      expect(r.status).toBe(200);
    }

    const after = await h.decide({ ...demoRequest('alice', alice), ip: STUFFER_IP });
    expect(after.status).toBe(200);
    // alice was already one of the 50: the count is 50, not 51.
    expect((after.body.signals as Reports).velocity?.result?.accountsPerIp).toBe(50);
    expect(reasonIds(after.body)).toContain('credential-stuffing');
    expect(after.body.verdict).toBe('challenge');

    // The same login from her usual network is what it was.
    const elsewhere = await h.decide({ ...demoRequest('alice', alice), ip: '192.0.2.10' });
    expect(elsewhere.body.verdict).toBe('allow');
    expect(reasonIds(elsewhere.body)).not.toContain('credential-stuffing');
  });

  it('counts each decision once, after it is decided, whatever the verdict', async () => {
    const ip = '203.0.113.99';
    const values: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await h.decide({ accountId: `once-${i}`, ip });
      values.push((r.body.signals as Reports).velocity!.result!.accountsPerIp!);
    }
    // The same account again: distinct accounts stay at 3.
    const again = await h.decide({ accountId: 'once-0', ip });
    values.push((again.body.signals as Reports).velocity!.result!.accountsPerIp!);
    expect(values).toEqual([1, 2, 3, 3]);
  });

  it('reads 0 for a counter whose key the request lacks, and records the values in the decision log', async () => {
    const r = await h.decide(demoRequest('alice', alice));
    expect((r.body.signals as Reports).velocity).toEqual({
      status: 'ok',
      result: { accountsPerIp: 0, ipsPerAccount: 0 },
    });
    await expect
      .poll(() => h.lines.find((l) => l.decisionId === r.body.decisionId))
      .toMatchObject({ inputs: { velocity: { accountsPerIp: 0, ipsPerAccount: 0 } } });
  });
});

describe.runIf(redisAvailable() && postgresAvailable())('velocity counters on a Redis that hangs', () => {
  let redis: RunningRedis;
  const pg = postgresForSuite();
  let h: Harness;
  let alice: string;
  beforeAll(async () => {
    redis = await startRedis();
    // Counters on a shared Redis want the shared database too (riskgate refuses half of each).
    h = await startHarness({ env: { RISKGATE_FEATURE_STORE: redis.url, RISKGATE_DATABASE: pg.url } });
    alice = (await lookUpUserIds(h.sandbox, ['alice'])).alice!;
  });
  afterAll(async () => {
    redis?.resume();
    await h?.stop();
    await redis?.stop();
  }, 60_000);

  it('marks the counters unavailable within their timeout and still answers, never a 5xx', async () => {
    // Counted while Redis answers (a busy machine may miss one call's timeout: asked again).
    let okVerdict: unknown;
    await eventually(
      async () => {
        const ok = await h.decide({ ...demoRequest('alice', alice), ip: '198.51.100.1' });
        okVerdict = ok.body.verdict;
        return (ok.body.signals as Reports).velocity?.status === 'ok';
      },
      { what: 'the counters read while Redis answers' },
    );

    redis.pause();
    try {
      const startedAt = performance.now();
      const r = await h.decide({ ...demoRequest('alice', alice), ip: '198.51.100.1' });
      const elapsedMs = performance.now() - startedAt;
      expect(r.status).toBe(200);
      expect((r.body.signals as Reports).velocity).toMatchObject({
        status: 'unavailable',
        reason: 'timeout',
      });
      expect(r.body.degraded).toBe(true);
      // The velocity rules raise risk and riskgate could not read their counters: a degraded
      // decision, held at the policy's degraded verdict (alice was allowed a moment ago).
      expect(okVerdict).toBe('allow');
      expect(r.body.verdict).toBe('challenge');
      expect(r.body.explanation).toMatchObject({
        decidedBy: 'degraded',
        degraded: { floor: true },
      });
      // History lives in the same store: it hangs too.
      expect((r.body.explanation as { degraded: { inputs: unknown[] } }).degraded.inputs).toEqual(
        expect.arrayContaining([{ input: 'velocity', reason: 'timeout' }]),
      );
      // Inside the decision's deadline (300 ms here) plus the request's own overhead.
      expect(elapsedMs).toBeLessThan(1500);
    } finally {
      redis.resume();
    }
    // The hung reads are in the metrics, beside the vendor's calls.
    const metrics = await (await h.ops('/metrics')).text();
    expect(metrics).toMatch(
      /^riskgate_upstream_errors_total\{upstream="features",operation="velocity",code="timeout"\} [1-9]/m,
    );
    // Back: counted again (the count lost while hung is a count, never a login).
    await expect
      .poll(async () => {
        const r = await h.decide({ ...demoRequest('alice', alice), ip: '198.51.100.1' });
        return (r.body.signals as Reports).velocity?.status;
      })
      .toBe('ok');
  });

  it('answers every decision at 100 a second while Redis is stopped for 3 s, none waiting for it', async () => {
    /**
     * Past the last send, how long the answers may take to come while the server is still stopped:
     * many deadlines (300 ms), far short of what waiting for the server costs (until SIGCONT). How
     * far within the deadline they came is measured, not asserted (issue 30's report: riskgate's
     * own time per decision, p50 60 ms, max 260-350 ms on a machine loaded 15 on 2 cores).
     */
    const HELD_MS = 2500;
    const answers: { status: number; velocity: Reports[string] | undefined; degraded: unknown }[] = [];
    const decide = async (i: number) => {
      const r = await h.decide({ accountId: `stall-${i}`, ip: `198.51.100.${(i % 200) + 20}` });
      const velocity = (r.body.signals as Reports | undefined)?.velocity;
      answers.push({ status: r.status, velocity, degraded: r.body.degraded });
    };
    redis.pause();
    try {
      // 100 a second, open loop (each fired on its tick whether or not the others have answered),
      // for 3 s: the counting after each answer piles up on the stopped server meanwhile.
      const sent: Promise<void>[] = [];
      await new Promise<void>((done) => {
        const ticker = setInterval(() => {
          sent.push(decide(sent.length));
          if (sent.length === 300) {
            clearInterval(ticker);
            done();
          }
        }, 10);
      });
      // Every answer while the server is still stopped: one it held would come only after SIGCONT.
      let timer: NodeJS.Timeout | undefined;
      const held = new Promise<'held'>((resolve) => {
        timer = setTimeout(() => resolve('held'), HELD_MS);
      });
      const outcome = await Promise.race([Promise.all(sent).then(() => 'answered' as const), held]);
      clearTimeout(timer);
      expect(outcome, `answers held by the stopped Redis: ${300 - answers.length}`).toBe('answered');
    } finally {
      redis.resume();
    }
    expect(answers).toHaveLength(300);
    // Answered (200, or 503 when admission control shed a stall of this machine), never a 5xx else.
    expect(answers.filter((a) => a.status !== 200 && a.status !== 503)).toEqual([]);
    const decided = answers.filter((a) => a.status === 200);
    expect(decided.length).toBeGreaterThan(0);
    // Each decision gave up on the counters at their own timeout (or the deadline) and was made
    // without them, degraded: none was made after them.
    for (const a of decided) {
      expect(a.velocity?.status).toBe('unavailable');
      expect(a.velocity?.reason).toMatch(/^(timeout|deadline)$/);
      expect(a.degraded).toBe(true);
    }
  });
});
