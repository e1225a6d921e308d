/**
 * Scenario 6: overload. Measures riskgate's closed-loop capacity under the lognormal upstream
 * profile (the best of three loops, see below), then drives it open-loop at 0.5x, 1x, 2x and 5x
 * that capacity, one step each, and back at 0.5x (or at the `multipliers` given: the stress test
 * runs 2x and 5x). Per step: the share of scheduled logins answered (2xx) within the deadline +
 * 50 ms (goodput), how many were shed (503), the latency of the answered ones, riskgate's CPU, and
 * with `quietVerdicts` every 2xx answer checked against them (bench/verdict-check.ts); after the
 * overload, how many seconds until the per-second p99 is back to normal.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { OpenLoopJob, OpenLoopResult } from './open-loop-generator.ts';
import {
  addVerdicts,
  checkVerdicts,
  type Verdict,
  type VerdictCheck,
  type VerdictsByAccount,
} from './verdict-check.ts';

export const OVERLOAD_MULTIPLIERS: readonly number[] = [0.5, 1, 2, 5, 0.5];

/** What the capacity measurement needs of a closed loop (autocannon's result, or the generator's `closed`). */
export interface CapacityLoopResult {
  requestsPerSecond: number;
  non2xx: number;
  latencyMs: { p99: number };
  /** The 2xx verdicts per account, when the loop counts them (checked like the steps'). */
  verdictsByAccount?: VerdictsByAccount;
}

export interface OverloadStep {
  multiplier: number;
  rate: number;
  scheduled: number;
  /** 2xx answers per second. */
  achievedRate: number;
  /** 2xx answers within deadline + 50 ms, as a share of the logins scheduled. */
  withinDeadlineShare: number;
  /** 2xx answers within deadline + 50 ms per second, as a share of the measured capacity. */
  goodputOfCapacity: number;
  shed: number;
  timeouts: number;
  otherErrors: number;
  /** Latency of the 2xx answers from their intended send, ms. */
  p50Ms: number;
  p99Ms: number;
  /** Latency of the shed (503) answers from their intended send, ms. */
  shedP50Ms: number;
  shedP99Ms: number;
  /** How late the generator itself sent, p99, ms: past a few ms the step measures the generator. */
  sendLagP99Ms: number;
  riskgateCorePct: number;
  /** Per-second p99 of the 2xx answers (the recovery step only). */
  perSecondP99Ms?: number[];
  /** The step's 2xx answers checked against the quiet-day verdicts (with `quietVerdicts`). */
  verdictCheck?: VerdictCheck;
  /** The step's 2xx verdicts per account. */
  verdictsByAccount?: VerdictsByAccount;
}

export interface OverloadFigures {
  profile: string;
  cpuNote: string;
  deadlineMs: number;
  stepS: number;
  /** The best closed loop, and every loop tried (2xx/s and refusals each). */
  capacity: {
    connections: number;
    requestsPerSecond: number;
    p99Ms: number;
    non2xx: number;
    tried: { connections: number; requestsPerSecond: number; non2xx: number }[];
    /** The loops' 2xx answers checked (when the loops count verdicts and `quietVerdicts` is given). */
    verdictCheck?: VerdictCheck;
    verdictsByAccount?: VerdictsByAccount;
  };
  /** Each demo account's quiet-day verdict the steps were checked against (bench/verdict-check.ts). */
  quietVerdicts?: Record<string, Verdict>;
  steps: OverloadStep[];
  /**
   * Seconds into the 0.5x step after the 5x one until the per-second p99 stays within 1.5x the
   * first 0.5x step's p99 (+5 ms); -1 if it never did.
   */
  recoveryS: number;
}

export interface OverloadDeps {
  deadlineMs: number;
  stepS: number;
  cannonConnections: number;
  profile: string;
  /** A closed-loop run on /decide. */
  cannon: (connections: number, durationS: number) => Promise<CapacityLoopResult>;
  /** An open-loop run on /decide. */
  openLoop: (rate: number, durationS: number, extra: Partial<OpenLoopJob>) => Promise<OpenLoopResult>;
  /** riskgate's CPU so far, microseconds. */
  cpuUs: () => Promise<number>;
  progress: (message: string) => void;
  /** How riskgate's CPU was limited for the scenario (`limitCpu`'s note). */
  cpuNote: string;
  /** Multiples of the capacity, one open-loop step each. Default `OVERLOAD_MULTIPLIERS`. */
  multipliers?: readonly number[];
  /** Each demo account's quiet-day verdict: every step's 2xx answers are checked against it. */
  quietVerdicts?: Record<string, Verdict>;
}

const r1 = (v: number) => Math.round(v * 10) / 10;

export async function runOverloadScenario(d: OverloadDeps): Promise<OverloadFigures> {
  // Capacity: the most 2xx/s of three closed loops. One loop alone is wrong either way: few
  // connections are bound by the upstream latency (8 in flight at ~50 ms is ~160/s whatever the
  // CPU), many retry straight into the sheds and measure the refusals' cost instead.
  const loops = [d.cannonConnections, 2 * d.cannonConnections, 4 * d.cannonConnections];
  d.progress(`overload: capacity, closed loops of ${loops.join(', ')} connections`);
  await d.cannon(d.cannonConnections, 1);
  const loopRuns: { connections: number; result: CapacityLoopResult }[] = [];
  for (const connections of loops)
    loopRuns.push({ connections, result: await d.cannon(connections, Math.max(1, d.stepS / 4)) });
  const best = loopRuns.reduce((a, b) => (b.result.requestsPerSecond > a.result.requestsPerSecond ? b : a));
  const capacity = Math.max(1, best.result.requestsPerSecond);
  const boundMs = d.deadlineMs + 50;
  // The probe's last loop ends with requests still in riskgate (the generator stops waiting, the
  // decisions run on to their deadline): without a pause the first step began behind them, its
  // admission limit at its floor, and its p99 read 330 ms where the same step at the end read
  // 111 (bench/RESULTS.md, issue 32 session 10). Two deadlines let every one of them end.
  await sleep(2 * d.deadlineMs);
  const steps: OverloadStep[] = [];
  const multipliers = d.multipliers ?? OVERLOAD_MULTIPLIERS;
  for (const [i, m] of multipliers.entries()) {
    const rate = Math.round(capacity * m);
    const last = i === multipliers.length - 1;
    d.progress(`overload: ${m}x capacity = ${rate}/s for ${d.stepS} s`);
    const cpuBefore = await d.cpuUs();
    const startedAt = performance.now();
    // No warm-up: the step starts straight after the previous one, as a real surge does.
    const load = await d.openLoop(rate, d.stepS, { goodputWithinMs: boundMs, perSecond: last });
    const wallUs = (performance.now() - startedAt) * 1000;
    const cpuUs = (await d.cpuUs()) - cpuBefore;
    steps.push({
      multiplier: m,
      rate,
      scheduled: load.scheduled,
      achievedRate: load.achievedRate,
      withinDeadlineShare:
        load.scheduled > 0 ? Math.round((load.withinBound / load.scheduled) * 1000) / 1000 : 0,
      goodputOfCapacity: Math.round((load.withinBound / d.stepS / capacity) * 1000) / 1000,
      shed: load.errors.status['503'] ?? 0,
      timeouts: load.errors.timeouts,
      otherErrors:
        load.errors.connection +
        load.errors.dropped +
        Object.entries(load.errors.status)
          .filter(([k]) => k !== '503')
          .reduce((a, [, n]) => a + n, 0),
      p50Ms: r1(load.latencyUs.p50 / 1000),
      p99Ms: r1(load.latencyUs.p99 / 1000),
      shedP50Ms: r1(load.shedLatencyUs.p50 / 1000),
      shedP99Ms: r1(load.shedLatencyUs.p99 / 1000),
      sendLagP99Ms: r1(load.sendLagUs.p99 / 1000),
      riskgateCorePct: r1((cpuUs / wallUs) * 100),
      ...(load.perSecondP99Ms !== undefined && { perSecondP99Ms: load.perSecondP99Ms }),
      verdictsByAccount: load.verdictsByAccount,
      ...(d.quietVerdicts !== undefined && {
        verdictCheck: checkVerdicts(d.quietVerdicts, load.verdictsByAccount),
      }),
    });
  }
  const loopVerdicts = loopRuns.some((r) => r.result.verdictsByAccount !== undefined)
    ? loopRuns.reduce<VerdictsByAccount>((a, r) => addVerdicts(a, r.result.verdictsByAccount ?? {}), {})
    : undefined;
  const normalMs = steps[0]!.p99Ms * 1.5 + 5;
  const series = steps.at(-1)!.perSecondP99Ms ?? [];
  let recoveryS = -1;
  for (let s = 0; s < series.length; s++) {
    if (series.slice(s).every((p) => p <= normalMs)) {
      recoveryS = s;
      break;
    }
  }
  return {
    profile: d.profile,
    cpuNote: d.cpuNote,
    deadlineMs: d.deadlineMs,
    stepS: d.stepS,
    capacity: {
      connections: best.connections,
      requestsPerSecond: r1(capacity),
      p99Ms: best.result.latencyMs.p99,
      non2xx: best.result.non2xx,
      tried: loopRuns.map(({ connections, result }) => ({
        connections,
        requestsPerSecond: result.requestsPerSecond,
        non2xx: result.non2xx,
      })),
      ...(loopVerdicts !== undefined && { verdictsByAccount: loopVerdicts }),
      ...(loopVerdicts !== undefined &&
        d.quietVerdicts !== undefined && { verdictCheck: checkVerdicts(d.quietVerdicts, loopVerdicts) }),
    },
    ...(d.quietVerdicts !== undefined && { quietVerdicts: d.quietVerdicts }),
    steps,
    recoveryS,
  };
}
