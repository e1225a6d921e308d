import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CpuLimit,
  canLimitCpu,
  freePort,
  type Generator,
  limitCpu,
  processCpuUs,
  type ServerProcess,
  startGenerator,
  startServer,
} from '../bench/bench-processes.ts';
import { startBenchSandbox } from '../bench/bench-scenario.ts';
import { buildDecideBodies, DEMO_ACCOUNTS } from '../bench/decide-bodies.ts';
import { lookUpUserIds } from '../bench/demo-users.ts';
import type { ClosedLoopResult, OpenLoopResult } from '../bench/open-loop-generator.ts';
import { type OverloadFigures, runOverloadScenario } from '../bench/overload-scenario.ts';
import { applyLatencyProfile, sandboxVendorEnv } from '../bench/sandbox-control.ts';
import {
  addVerdicts,
  askQuietVerdicts,
  checkVerdicts,
  countAnswers,
  formatVerdictsByAccount,
  type QuietAnswer,
  type Verdict,
  type VerdictCheck,
  type VerdictsByAccount,
} from '../bench/verdict-check.ts';
import { runCli } from '../src/cli/main.ts';
import { DEMO_ACCOUNTS as DEMO_EXPECTED } from '../src/dev/demo-requests.ts';

/**
 * SLOW (about 60 s on 2 busy cores, up to ~3 minutes allowed): issue 22's "Done when" stress test.
 * Verdicts stay right under stress: a flooded or CPU-starved riskgate may answer an account's
 * quiet-day verdict or the degraded one (challenge), never a more permissive one and never a deny
 * the evidence does not carry.
 *
 * The sandbox and riskgate run as real processes (the bench's helpers: bench/bench-processes.ts,
 * the bench scenario and bodies), riskgate with `RISKGATE_WORKERS=1` (one process, so one cgroup
 * holds it) and its decision log written to a file. Traffic: the six demo accounts, loopback only,
 * upstream latency lognormal (p50 15 ms, p99 60 ms) as a real vendor's.
 *
 * - quiet: each account asked three times, one at a time, uncapped: the first round is the cold
 *   start, the later rounds give its quiet-day verdict (bench/verdict-check.ts);
 * - A: riskgate capped at 0.25 core with Kubernetes' default 100 ms CFS period, 24 concurrent
 *   callers (closed loop) for 15 s;
 * - B: still capped, capacity measured as the bench's overload scenario does (closed loops of 8,
 *   16 and 32 callers, then an open loop at their figure), then 2x and 5x of it offered open loop
 *   (fixed rate) for 8 s each.
 *
 * Every 200 answer of every phase is checked; the counts are printed (per account × verdict ×
 * phase, sheds, timeouts). Then `riskgate replay` of the decision log with the same policy must
 * change no verdict. Latency is not asserted (bench/README.md); only that every request got an
 * answer within a generous 10 s. Needs a writable cgroup CPU controller (root): in CI
 * (`process.env.CI`) its absence fails the test, locally it skips with a message.
 */

const CAP_FRACTION = 0.25;
const CFS_PERIOD_US = 100_000;
const PHASE_A_CALLERS = 24;
const PHASE_A_S = 15;
const STEP_S = 8;
/** Per-request client timeout: generous, it only catches answers that never come. */
const CLIENT_TIMEOUT_MS = 10_000;
const BODIES = 256;

interface Phase {
  name: string;
  byAccount: VerdictsByAccount;
  check: VerdictCheck;
  shed: number;
  timeouts: number;
  connectionErrors: number;
  dropped: number;
  /** Answers other than 200 and 503, by status. */
  otherStatus: Record<string, number>;
}

const servers: ServerProcess[] = [];
let generator: Generator | undefined;
let cap: CpuLimit | undefined;
const dir = mkdtempSync(join(tmpdir(), 'riskgate-stress-'));
const decisionLog = join(dir, 'decisions.ndjson');
let skipReason: string | undefined;
let quiet: Record<string, Verdict> = {};
const phases: Phase[] = [];
let overload: OverloadFigures | undefined;
let startedAt = 0;

function phaseOf(
  name: string,
  byAccount: VerdictsByAccount,
  errors: { timeouts: number; connection: number; dropped?: number; status: Record<string, number> },
): Phase {
  const otherStatus = Object.fromEntries(Object.entries(errors.status).filter(([s]) => s !== '503'));
  return {
    name,
    byAccount,
    check: checkVerdicts(quiet, byAccount),
    shed: errors.status['503'] ?? 0,
    timeouts: errors.timeouts,
    connectionErrors: errors.connection,
    dropped: errors.dropped ?? 0,
    otherStatus,
  };
}

function quietPhase(name: string, answers: QuietAnswer[]): Phase {
  const status: Record<string, number> = {};
  for (const a of answers)
    if (a.status !== 200) status[String(a.status)] = (status[String(a.status)] ?? 0) + 1;
  return phaseOf(name, countAnswers(answers), { timeouts: 0, connection: 0, status });
}

/** What the decision log says about the wrong answers: account, verdict and the rules that decided. */
function wrongAnswersInLog(): string[] {
  if (!existsSync(decisionLog)) return ['(no decision log)'];
  const tally = new Map<string, number>();
  for (const text of readFileSync(decisionLog, 'utf8').split('\n')) {
    if (!text.startsWith('{')) continue;
    const line = JSON.parse(text) as {
      kind?: string;
      request?: { accountId?: string };
      outcome?: { verdict?: string; matchedRules?: { id: string }[] };
      degraded?: boolean;
    };
    const account = line.request?.accountId;
    const verdict = line.outcome?.verdict;
    if (line.kind !== 'decision' || account === undefined || verdict === undefined) continue;
    const expected = quiet[account];
    if (expected === undefined || verdict === expected || verdict === 'challenge') continue;
    const rules = (line.outcome?.matchedRules ?? []).map((r) => r.id).join('+') || 'score';
    const key = `${account} ${verdict} by ${rules}${line.degraded ? ' (degraded)' : ''}`;
    tally.set(key, (tally.get(key) ?? 0) + 1);
  }
  return [...tally.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${String(n).padStart(6)}  ${k}`);
}

function printCounts(): void {
  const lines = [
    '',
    `=== issue 22 stress test: verdict counts (${((performance.now() - startedAt) / 1000).toFixed(0)} s) ===`,
    `quiet-day verdicts: ${Object.entries(quiet)
      .map(([a, v]) => `${a} ${v}`)
      .join(', ')}; degraded verdict: challenge`,
    cap?.note ?? 'riskgate uncapped',
  ];
  if (overload !== undefined) {
    lines.push(
      `capacity ${overload.capacity.requestsPerSecond}/s (closed loops ${overload.capacity.tried
        .map((t) => `${t.connections}: ${t.requestsPerSecond}/s`)
        .join(', ')}); steps ${overload.steps.map((s) => `${s.multiplier}x = ${s.rate}/s`).join(', ')}`,
    );
  }
  for (const p of phases) {
    const c = p.check;
    lines.push(
      '',
      `--- ${p.name}: 200 answers checked ${c.checked} (as quiet ${c.asQuiet}, degraded ${c.degraded}), ` +
        `WRONG ALLOWS ${c.wrongAllows}, WRONG DENIES ${c.wrongDenies}, other wrong ${c.otherWrong}; ` +
        `shed 503 ${p.shed}; client timeouts ${p.timeouts}, connection errors ${p.connectionErrors}, dropped ${p.dropped}` +
        `${Object.keys(p.otherStatus).length > 0 ? `; other statuses ${JSON.stringify(p.otherStatus)}` : ''}`,
      ...formatVerdictsByAccount(p.byAccount, quiet).map((l) => `  ${l}`),
    );
  }
  const wrong = wrongAnswersInLog();
  if (wrong.length > 0)
    lines.push('', 'wrong answers in the decision log, by the rules that decided:', ...wrong.slice(0, 15));
  console.log(lines.join('\n'));
}

beforeAll(async () => {
  startedAt = performance.now();
  if (!canLimitCpu()) {
    const why = 'no writable cgroup CPU controller (v1 /sys/fs/cgroup/cpu or v2 cpu.max; needs root)';
    if (process.env.CI) throw new Error(`the stress test must run in CI: ${why}`);
    skipReason = why;
    console.warn(`stress-verdicts skipped: ${why}`);
    return;
  }
  const sandbox = await startBenchSandbox({ dir, bodyVariants: BODIES, cpu: undefined });
  servers.push(sandbox);
  const apiKey = `stress-${randomBytes(16).toString('hex')}`;
  const port = await freePort();
  const riskgate = await startServer({
    name: 'riskgate',
    entry: 'src/main.ts',
    port,
    cpu: undefined,
    readyPath: '/readyz',
    readyTimeoutMs: 60_000,
    env: {
      RISKGATE_PORT: String(port),
      RISKGATE_HOST: '127.0.0.1',
      ...sandboxVendorEnv(sandbox.url),
      RISKGATE_API_KEYS: apiKey,
      RISKGATE_DECISION_LOG: decisionLog,
      RISKGATE_STATE_DIR: mkdtempSync(join(dir, 'state-')),
      // As the bench: every remote-access-tool lookup is a real call (the bodies cycle quickly).
      RISKGATE_RAT_CACHE_MS: '0',
      // One process, so the cgroup holds all of riskgate.
      RISKGATE_WORKERS: '1',
    },
  });
  servers.push(riskgate);
  generator = await startGenerator(undefined);
  const bodies = buildDecideBodies(
    BODIES,
    await lookUpUserIds(
      sandbox.url,
      DEMO_ACCOUNTS.map((a) => a.name),
    ),
  );
  await applyLatencyProfile(sandbox.url, { name: 'lognormal', p50Ms: 15, p99Ms: 60 });
  const headers = { authorization: `Bearer ${apiKey}` };

  const asked = await askQuietVerdicts({ decideUrl: `${riskgate.url}/decide`, headers, bodies, rounds: 3 });
  quiet = asked.verdicts;
  phases.push(quietPhase('quiet start (uncapped, one at a time; round 1 is the cold start)', asked.answers));

  cap = limitCpu(riskgate.pid, CAP_FRACTION, CFS_PERIOD_US);
  if (!cap.capped) {
    if (process.env.CI) throw new Error(`the stress test must run in CI: ${cap.note}`);
    skipReason = cap.note;
    console.warn(`stress-verdicts skipped: ${cap.note}`);
    return;
  }
  const closed = (connections: number, durationS: number) =>
    generator!.run<ClosedLoopResult>({
      type: 'closed',
      origin: riskgate.url,
      path: '/decide',
      headers,
      bodies,
      connections,
      durationS,
      timeoutMs: CLIENT_TIMEOUT_MS,
    });

  const a = await closed(PHASE_A_CALLERS, PHASE_A_S);
  phases.push(
    phaseOf(
      `A: ${PHASE_A_CALLERS} callers, ${PHASE_A_S} s, ${CAP_FRACTION} core per ${CFS_PERIOD_US / 1000} ms period`,
      a.verdictsByAccount,
      a.errors,
    ),
  );

  const loops: ClosedLoopResult[] = [];
  const opens: OpenLoopResult[] = [];
  overload = await runOverloadScenario({
    deadlineMs: 300,
    stepS: STEP_S,
    cannonConnections: 8,
    profile: 'lognormal p50 15 ms, p99 60 ms',
    cpuNote: cap.note,
    multipliers: [2, 5],
    quietVerdicts: quiet,
    cannon: async (connections, durationS) => {
      const r = await closed(connections, durationS);
      loops.push(r);
      return r;
    },
    openLoop: async (rate, durationS, extra) => {
      const r = await generator!.run<OpenLoopResult>({
        type: 'open',
        origin: riskgate.url,
        path: '/decide',
        headers,
        bodies,
        rate,
        durationS,
        warmupS: 0,
        connections: 512,
        timeoutMs: CLIENT_TIMEOUT_MS,
        maxInFlight: 20_000,
        ...extra,
      });
      opens.push(r);
      return r;
    },
    cpuUs: async () => processCpuUs(riskgate.pid) ?? 0,
    progress: (m) => console.log(`[stress] ${m}`),
  });
  // The steps are the last open loops; the probe's own open loop comes before them.
  const stepOpens = opens.slice(opens.length - overload.steps.length);
  const probeLoops = [...loops, ...opens.slice(0, opens.length - overload.steps.length)];
  const loopErrors = { timeouts: 0, connection: 0, status: {} as Record<string, number> };
  const loopVerdicts: VerdictsByAccount = {};
  for (const l of probeLoops) {
    loopErrors.timeouts += l.errors.timeouts;
    loopErrors.connection += l.errors.connection;
    for (const [s, n] of Object.entries(l.errors.status))
      loopErrors.status[s] = (loopErrors.status[s] ?? 0) + n;
    addVerdicts(loopVerdicts, l.verdictsByAccount);
  }
  phases.push(
    phaseOf('B: capacity (closed loops incl. warm-up, and an open loop)', loopVerdicts, loopErrors),
  );
  for (const [i, step] of overload.steps.entries()) {
    phases.push(
      phaseOf(
        `B: ${step.multiplier}x = ${step.rate}/s open loop, ${STEP_S} s`,
        step.verdictsByAccount ?? {},
        stepOpens[i]!.errors,
      ),
    );
  }
  // Uncapped again and stopped (SIGTERM), so the decision log is complete before the replay.
  cap.release();
  await riskgate.stop();
}, 300_000);

afterAll(async () => {
  if (phases.length > 0) printCounts();
  await generator?.stop().catch(() => {});
  cap?.release();
  for (const s of servers.reverse()) await s.stop().catch(() => {});
  // After its process is gone the group is empty and goes.
  cap?.release();
  if (cap?.dir !== undefined && existsSync(cap.dir)) console.warn(`cgroup ${cap.dir} still exists`);
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

function total(phase: Phase, account: string, verdict: Verdict): number {
  return phase.byAccount[account]?.[verdict] ?? 0;
}

describe('verdicts under stress (issue 22; slow)', () => {
  it('derives quiet-day verdicts that agree with the demo accounts riskgate documents', (ctx) => {
    if (skipReason !== undefined) return ctx.skip();
    for (const { username, expected } of DEMO_EXPECTED) expect(quiet[username], username).toBe(expected);
    expect(Object.keys(quiet).sort()).toEqual(DEMO_ACCOUNTS.map((a) => a.name).sort());
    // The issue's clean users: allowed on a quiet day.
    expect(quiet.alice).toBe('allow');
    expect(quiet.dave).toBe('allow');
  });

  it('answers every 200 with the quiet-day verdict or the degraded one, in every phase', (ctx) => {
    if (skipReason !== undefined) return ctx.skip();
    expect(phases.map((p) => p.name)).toHaveLength(5);
    for (const p of phases) {
      // A phase that checked nothing would pass vacuously.
      expect(p.check.checked, p.name).toBeGreaterThan(0);
      expect(p.check.unchecked, p.name).toBe(0);
    }
    const wrong = phases.map((p) => ({
      phase: p.name,
      wrongAllows: p.check.wrongAllows,
      wrongDenies: p.check.wrongDenies,
      otherWrong: p.check.otherWrong,
      byAccount: p.check.wrongByAccount,
    }));
    expect(wrong).toEqual(
      phases.map((p) => ({ phase: p.name, wrongAllows: 0, wrongDenies: 0, otherWrong: 0, byAccount: {} })),
    );
  });

  it('never allows an account challenged or denied on a quiet day, never denies alice or dave', (ctx) => {
    if (skipReason !== undefined) return ctx.skip();
    const risky = Object.entries(quiet)
      .filter(([, v]) => v !== 'allow')
      .map(([a]) => a);
    expect(risky.length).toBeGreaterThan(0);
    const allows = Object.fromEntries(
      risky.map((a) => [a, phases.reduce((n, p) => n + total(p, a, 'allow'), 0)]),
    );
    expect(allows).toEqual(Object.fromEntries(risky.map((a) => [a, 0])));
    const denies = Object.fromEntries(
      ['alice', 'dave'].map((a) => [a, phases.reduce((n, p) => n + total(p, a, 'deny'), 0)]),
    );
    expect(denies).toEqual({ alice: 0, dave: 0 });
  });

  it('answers every request (200 or a shed 503) within a generous 10 s', (ctx) => {
    if (skipReason !== undefined) return ctx.skip();
    for (const p of phases) {
      expect(
        {
          timeouts: p.timeouts,
          connectionErrors: p.connectionErrors,
          dropped: p.dropped,
          other: p.otherStatus,
        },
        p.name,
      ).toEqual({ timeouts: 0, connectionErrors: 0, dropped: 0, other: {} });
    }
  });

  it('replays the decision log recorded under stress with the same policy changing 0 verdicts', async (ctx) => {
    if (skipReason !== undefined) return ctx.skip();
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(['replay', '--policy', 'policies/', '--json', decisionLog], {
      out: (l) => out.push(l),
      err: (l) => err.push(l),
    });
    const report = JSON.parse(out[0] ?? '{}') as {
      decisions: number;
      changed: number;
      bad: { count: number };
      matrix: Record<string, Record<string, number>>;
      changes: { decisionId: string; from: string; to: string; scoreFrom: number; scoreTo: number }[];
    };
    const answered = phases.reduce((n, p) => n + p.check.checked, 0);
    console.log(
      `[stress] replay: ${report.decisions} decisions in the log (${answered} 200 answers received), ` +
        `${report.changed} verdicts changed; matrix ${JSON.stringify(report.matrix)}` +
        `${report.changes.length > 0 ? `; first changes ${JSON.stringify(report.changes.slice(0, 5))}` : ''}`,
    );
    expect(err).toEqual([]);
    expect(report.bad.count).toBe(0);
    // Every answered decision was logged (a timed-out request's decision may be logged too).
    expect(report.decisions).toBeGreaterThanOrEqual(answered);
    expect(report.changed).toBe(0);
    expect(code).toBe(0);
  });
});
