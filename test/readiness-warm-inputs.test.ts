import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CpuLimit, canLimitCpu, limitCpu } from '../bench/bench-processes.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds, sandboxUpstream } from '../src/dev/embedded-sandbox.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { eventually } from './support/eventually.ts';
import {
  PROCESS_KEY,
  processEnv,
  type RiskgateProcess,
  ROOT,
  startProcess,
} from './support/riskgate-process.ts';
import { sandboxControl } from './support/sandbox-control.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * SLOW (one to two minutes): issue 31's "ready means right". riskgate runs as its own process
 * (`src/main.ts`, one process) under the stress test's CPU quota (a quarter of a core per 100 ms
 * CFS period, test/stress-verdicts.test.ts) from the moment it is spawned, against the sandbox,
 * with the shipped policy bounding the history's lag at 180 s (600 s would need a ten-minute Log
 * API outage; the follower polls every 30 s once caught up, so 180 s is its lag plus a margin).
 *
 * Each step asks `GET /readyz`, then decides a clean login (alice), and keeps both answers:
 * - after the start, no decision made while /readyz answered 200 read an input that readiness
 *   covers degraded: the history behind (RG_ERR_HISTORY_BEHIND) or no token (RG_ERR_TOKEN_UNAVAILABLE);
 * - during a Log API outage /readyz stays 200 and says the history is unavailable upstream (every
 *   replica reads that API: docs/operations.md, "Readiness");
 * - once the outage ends, the same holds as after the start for every decision made while /readyz
 *   answered 200 without naming the outage (until riskgate's next try it cannot know the API is back).
 *
 * Never a fixed wait: each phase polls with `eventually`. Needs a writable cgroup CPU controller
 * (root): in CI its absence fails the test, locally it skips with a message.
 */

const CAP_FRACTION = 0.25;
const CFS_PERIOD_US = 100_000;
/** Ready answers each phase wants before it ends. */
const READY_DECISIONS = 5;

interface Readyz {
  status: number;
  body: { ready?: boolean; inputs?: Record<string, { state: string; reason?: string }> };
}

interface Step {
  readyz: Readyz;
  verdict: string;
  /** Why a covered input was unavailable to the decision, if one was. */
  coveredUnavailable: string[];
}

type Reports = Record<string, { status: string; reason?: string }>;

let sandbox: RunningSandbox;
let riskgate: RiskgateProcess | undefined;
let cap: CpuLimit | undefined;
let url = '';
let alice = '';
let skipReason: string | undefined;
const dir = mkdtempSync(join(tmpdir(), 'riskgate-readiness-'));

/** The shipped policy with the history's lag bounded at 180 s. */
function policyFile(): string {
  const shipped = readFileSync(join(ROOT, 'policies/login.yaml'), 'utf8');
  const bounded = shipped.replace(/maxLagSeconds: 600\b/, 'maxLagSeconds: 180');
  if (bounded === shipped) throw new Error('policies/login.yaml no longer bounds the history at 600 s');
  const path = join(dir, 'login.yaml');
  writeFileSync(path, bounded);
  return path;
}

async function readyz(): Promise<Readyz> {
  try {
    const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(10_000) });
    return { status: res.status, body: (await res.json()) as Readyz['body'] };
  } catch {
    return { status: 0, body: {} };
  }
}

/** /readyz, then a clean login: both answers. */
async function step(): Promise<Step> {
  const ready = await readyz();
  const res = await fetch(`${url}/decide`, {
    method: 'POST',
    headers: { authorization: `Bearer ${PROCESS_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(demoRequest('alice', alice)),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await res.json()) as { verdict: string; signals: Reports };
  const coveredUnavailable = Object.entries(body.signals)
    .filter(([, r]) => r.status === 'unavailable')
    .filter(([, r]) =>
      ['RG_ERR_HISTORY_BEHIND', 'RG_ERR_TOKEN_UNAVAILABLE', 'RG_ERR_LISTS_UNAVAILABLE'].includes(
        String(r.reason),
      ),
    )
    .map(([name, r]) => `${name}: ${r.reason}`);
  return { readyz: ready, verdict: body.verdict, coveredUnavailable };
}

/** Steps until `enough` says so (checked after each), all of them kept. */
async function stepUntil(
  enough: (steps: Step[]) => boolean,
  what: string,
  timeoutMs: number,
): Promise<Step[]> {
  const steps: Step[] = [];
  await eventually(
    async () => {
      steps.push(await step());
      return enough(steps);
    },
    { timeoutMs, what, intervalMs: 50 },
  );
  return steps;
}

const readyAndWarm = (s: Step) =>
  s.readyz.status === 200 &&
  !Object.values(s.readyz.body.inputs ?? {}).some((i) => i.state === 'unavailable');

function summary(steps: Step[]): string {
  const counts = new Map<string, number>();
  for (const s of steps) {
    const history = s.readyz.body.inputs?.history?.state;
    const key = `readyz ${s.readyz.status}${history === undefined ? '' : ` (history ${history})`} → ${s.verdict}${s.coveredUnavailable.length > 0 ? ` (${s.coveredUnavailable.join(', ')})` : ''}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => `${n} × ${k}`).join('; ');
}

beforeAll(async () => {
  if (!canLimitCpu()) {
    const why = 'no writable cgroup CPU controller (v1 /sys/fs/cgroup/cpu or v2 cpu.max; needs root)';
    if (process.env.CI) throw new Error(`the readiness test must run in CI: ${why}`);
    skipReason = why;
    console.warn(`readiness-warm-inputs skipped: ${why}`);
    return;
  }
  sandbox = await startTestSandbox();
  alice = (await lookUpUserIds(sandbox, ['alice'])).alice!;
  const upstream = sandboxUpstream(sandbox);
  riskgate = startProcess(
    join(ROOT, 'src/main.ts'),
    processEnv(sandbox, {
      RISKGATE_POLICY_PATH: policyFile(),
      RISKGATE_LOGS_URL: upstream.logsUrl!,
      RISKGATE_LOG_API_KEY: upstream.logApiKey!,
      RISKGATE_DECISION_LOG: 'off',
      // Generous: a capped process is slow, and a signal timing out is not what this test is about.
      RISKGATE_DEADLINE_MS: '2000',
    }),
    ['--import', 'tsx'],
  );
  // Capped from its first instruction on: the start itself runs under the quota.
  cap = limitCpu(riskgate.child.pid!, CAP_FRACTION, CFS_PERIOD_US);
  if (!cap.capped) {
    if (process.env.CI) throw new Error(`the readiness test must run in CI: ${cap.note}`);
    skipReason = cap.note;
    return;
  }
  url = `http://127.0.0.1:${await riskgate.port()}`;
}, 120_000);

afterAll(async () => {
  riskgate?.kill();
  await riskgate?.exited;
  cap?.release();
  await sandbox?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('readiness means the inputs the policy reads are warm (slow; CPU-capped)', () => {
  it('after a start: no decision made while /readyz answers 200 reads the token or the history degraded', async (ctx) => {
    if (skipReason !== undefined) return ctx.skip();
    const steps = await stepUntil(
      (s) => s.filter((x) => x.readyz.status === 200).length >= READY_DECISIONS,
      'ready answers after the start',
      90_000,
    );
    console.info(`after the start (${cap!.note}): ${summary(steps)}`);
    expect(steps.filter((s) => s.readyz.status === 200 && s.coveredUnavailable.length > 0)).toEqual([]);
    expect(steps.at(-1)!.readyz.body.inputs).toEqual({
      token: { state: 'warm' },
      history: { state: 'warm' },
      // The shipped policy reads the runtime lists too.
      lists: { state: 'warm' },
    });
  }, 120_000);

  it('during a Log API outage stays ready and names the history unavailable upstream; after it, decisions are whole again while ready', async (ctx) => {
    if (skipReason !== undefined) return ctx.skip();
    await sandboxControl(sandbox.url, 'PUT', '/sandbox/faults', {
      rules: [{ route: 'GET /logs/v1/*', errorRate: 1, errorStatus: 503 }],
    });
    // Past the 180 s bound: 30 to 60 s after the last window read.
    const outage = await stepUntil(
      (s) => s.at(-1)!.readyz.body.inputs?.history?.state === 'unavailable',
      'the history behind its bound during the outage',
      150_000,
    );
    const during = outage.at(-1)!;
    expect(during.readyz.status).toBe(200);
    expect(during.readyz.body.inputs?.history?.reason).toMatch(/^the Log API is failing: /);
    expect(during.coveredUnavailable).toEqual(['history: RG_ERR_HISTORY_BEHIND']);

    await sandboxControl(sandbox.url, 'DELETE', '/sandbox/faults');
    const after = await stepUntil(
      (s) => s.filter(readyAndWarm).length >= READY_DECISIONS,
      'ready answers with every input warm after the outage',
      90_000,
    );
    console.info(`during the outage: ${summary(outage)}\nafter it: ${summary(after)}`);
    expect(after.filter((s) => readyAndWarm(s) && s.coveredUnavailable.length > 0)).toEqual([]);
  }, 300_000);
});
