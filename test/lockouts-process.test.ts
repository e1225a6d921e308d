import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import type { LockoutView } from '../src/lockouts/lockout-record.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';
import {
  buildDist,
  PROCESS_KEY,
  PROCESS_OPS_KEY,
  processEnv,
  type RiskgateProcess,
  startProcess,
} from './support/riskgate-process.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * Issue 26, "Done when": a policy locks a user out for 30 s; riskgate is SIGKILLed during the
 * lock-out and started again on the same state (the outbox in the SQLite database); the sandbox's
 * Admin user is enabled again within 35 s of the lock. The unlock was scheduled durably in the
 * outbox with the lock-out itself: the new process, not the dead one's memory, carries it out.
 */

const POLICY = `apiVersion: riskgate/v1
kind: Policy
name: lock-briefly
description: every login is denied and its account locked out for 30 seconds
thresholds: { challenge: 40, deny: 80 }
defaults: { timeoutMs: 4000 }
rules:
  - { id: always, description: every login, when: 'true', verdict: deny }
actions:
  lockBriefly: { type: lock_out_user, duration: 30s }
verdictActions:
  deny: [lockBriefly]
`;

let sandbox: RunningSandbox;
let build: ReturnType<typeof buildDist>;
let work: string;

beforeAll(async () => {
  build = buildDist('lockouts');
  sandbox = await startTestSandbox();
  work = mkdtempSync(join(tmpdir(), 'riskgate-lockouts-'));
}, 120_000);

afterAll(async () => {
  await sandbox?.stop();
  build?.remove();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

async function stop(p: RiskgateProcess | undefined): Promise<void> {
  if (p === undefined) return;
  p.kill('SIGKILL');
  await p.exited;
}

async function lockouts(port: number, userId: string): Promise<LockoutView[]> {
  const res = await fetch(`http://127.0.0.1:${port}/lockouts?userId=${userId}`, {
    headers: { authorization: `Bearer ${PROCESS_OPS_KEY}` },
  });
  return ((await res.json()) as { lockouts: LockoutView[] }).lockouts;
}

describe('a temporary lock-out across a crash', () => {
  it('is ended on time by the next process: the Admin user is enabled within 35 s of the lock', async () => {
    const policyPath = join(work, 'lock-briefly.yaml');
    writeFileSync(policyPath, POLICY);
    const alice = (await lookUpUserIds(sandbox, ['alice'])).alice!;
    const env = processEnv(sandbox, {
      RISKGATE_STATE_DIR: mkdtempSync(join(work, 'state-')),
      RISKGATE_POLICY_PATH: policyPath,
      RISKGATE_DEADLINE_MS: '5000',
      RISKGATE_OUTBOX: 'sqlite',
      RISKGATE_DECISION_LOG: 'off',
    });
    let p1: RiskgateProcess | undefined;
    let p2: RiskgateProcess | undefined;
    try {
      p1 = startProcess(build.main, env);
      const port1 = await p1.port();
      const lockedAtMs = Date.now();
      const res = await fetch(`http://127.0.0.1:${port1}/decide`, {
        method: 'POST',
        headers: { authorization: `Bearer ${PROCESS_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(demoRequest('alice', alice)),
      });
      const body = (await res.json()) as { decisionId: string; actions: { type: string; status: string }[] };
      expect(body.actions).toEqual([expect.objectContaining({ type: 'lock_out_user', status: 'queued' })]);
      await eventually(async () => (await adminUserStatus(sandbox, alice)) === 'locked_out', {
        what: 'alice locked out',
      });
      const [record] = await eventually(async () => {
        const l = await lockouts(port1, alice);
        return l[0]?.status === 'locked' ? l : undefined;
      });
      expect(record).toMatchObject({ id: body.decisionId, rule: 'verdict:deny' });
      expect(Date.parse(record!.until!) - Date.parse(record!.createdAt)).toBe(30_000);

      await stop(p1);
      p2 = startProcess(build.main, env);
      const port2 = await p2.port();
      await eventually(async () => (await adminUserStatus(sandbox, alice)) === 'enabled', {
        timeoutMs: 45_000,
        what: 'alice enabled again',
      });
      expect(Date.now() - lockedAtMs).toBeLessThanOrEqual(35_000);
      // Not before its end either.
      expect(Date.now() - lockedAtMs).toBeGreaterThanOrEqual(30_000);
      const [ended] = await eventually(async () => {
        const l = await lockouts(port2, alice);
        return l[0]?.status === 'expired' ? l : undefined;
      });
      expect(ended).toMatchObject({ id: body.decisionId, endedBy: 'schedule' });
    } finally {
      await stop(p1);
      await stop(p2);
    }
  }, 90_000);
});
