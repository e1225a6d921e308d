import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { patientPolicyEnv } from './support/patient-policy.ts';
import { postgresAvailable, postgresForSuite } from './support/postgres-server.ts';
import { type RunningRedis, redisAvailable, startRedis } from './support/redis-server.ts';
import {
  BUILD_HOOK_MS,
  buildDist,
  PROCESS_KEY,
  processEnv,
  type RiskgateProcess,
  startProcess,
} from './support/riskgate-process.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * Two riskgate processes on one Redis (RISKGATE_FEATURE_STORE): a stuffing burst whose attempts
 * land on either process is counted once, in one place, and both read the same counts, so the
 * rule fires on whichever process the next login reaches.
 */
/** Replicas share the database as they share the store: riskgate refuses half of each. */
const sharedStores = redisAvailable() && postgresAvailable();

describe.runIf(sharedStores)('velocity counters shared by two riskgate processes', () => {
  let build: ReturnType<typeof buildDist>;
  let sandbox: RunningSandbox;
  let redis: RunningRedis;
  const pg = postgresForSuite();
  let work: string;
  const started: RiskgateProcess[] = [];
  beforeAll(async () => {
    build = buildDist('velocity');
    [sandbox, redis] = await Promise.all([startTestSandbox(), startRedis()]);
    work = mkdtempSync(join(tmpdir(), 'riskgate-velocity-'));
  }, BUILD_HOOK_MS);
  afterAll(async () => {
    for (const p of started) {
      p.kill('SIGTERM');
      await p.exited;
    }
    await Promise.all([sandbox?.stop(), redis?.stop()]);
    build?.remove();
    if (work !== undefined) rmSync(work, { recursive: true, force: true });
  });

  async function decide(port: number, body: object): Promise<Record<string, unknown>> {
    const res = await fetch(`http://127.0.0.1:${port}/decide`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PROCESS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as Record<string, unknown>;
  }

  const accountsPerIp = (body: Record<string, unknown>) =>
    (body.signals as Record<string, { result?: Record<string, number> }>).velocity?.result?.accountsPerIp;

  it('agree on the counts, whichever process each attempt reached', async () => {
    for (let i = 0; i < 2; i++) {
      started.push(
        startProcess(
          build.main,
          processEnv(sandbox, {
            // The shipped policy with patient timeouts: a velocity read (50 ms as shipped) late on a
            // busy machine would leave a decision's counts absent.
            ...patientPolicyEnv(work),
            RISKGATE_STATE_DIR: mkdtempSync(join(work, 'state-')),
            RISKGATE_DECISION_LOG: 'off',
            RISKGATE_FEATURE_STORE: redis.url,
            RISKGATE_DATABASE: pg.url,
          }),
        ),
      );
    }
    const ports = await Promise.all(started.map((p) => p.port()));
    const ip = '203.0.113.77';
    // 24 accounts from one address, alternating between the two processes.
    for (let i = 0; i < 24; i++) await decide(ports[i % 2]!, { accountId: `sprayed-${i}`, ip });
    // Each decision is counted just after its answer: wait for the last count to land (a repeat of
    // an account already counted does not move a distinct count), then both read the same.
    await expect
      .poll(async () => accountsPerIp(await decide(ports[0]!, { accountId: 'sprayed-0', ip })))
      .toBe(24);
    expect(accountsPerIp(await decide(ports[1]!, { accountId: 'sprayed-1', ip }))).toBe(24);
    const a = await decide(ports[0]!, { accountId: 'sprayed-new-a', ip });
    expect(accountsPerIp(a)).toBe(25);
    await expect
      .poll(async () => accountsPerIp(await decide(ports[1]!, { accountId: 'sprayed-new-a', ip })))
      .toBe(25);
    const b = await decide(ports[1]!, { accountId: 'sprayed-new-b', ip });
    expect(accountsPerIp(b)).toBe(26);
    for (const body of [a, b]) {
      expect((body.reasons as { id: string }[]).map((r) => r.id)).toContain('credential-stuffing');
    }
  }, 60_000);
});
