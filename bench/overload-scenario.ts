/**
 * Scenario 6: overload. Measures riskgate's sustained closed-loop capacity under the lognormal
 * upstream profile (see `probeCapacity`), then drives it open-loop at 0.5x, 1x, 2x and 5x that
 * capacity, one step each, and back at 0.5x (or at the `multipliers` given: the stress test runs 2x
 * and 5x). Per step: the share of scheduled logins answered (2xx) within the deadline + 50 ms
 * (goodput), how many were shed (503), the latency of the answered ones, riskgate's CPU, and with
 * `quietVerdicts` every 2xx answer checked against them (bench/verdict-check.ts); after the
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

/** A probe loop counted with the work it queued (`probeCapacity`). */
export interface SustainedMeasure {
  /**
   * The loop's 2xx answers over the time riskgate's CPU took for them: the loop's CPU and, after
   * it, the CPU until its queued work (outbox, decision store) was done, at the probe's CPU rate
   * (the highest of its loops'); never more than the loop's own 2xx/s.
   */
  sustainedPerSecond: number;
  /** riskgate's CPU during the loop ÷ its wall time, % of a core. */
  loopCorePct: number;
  /** riskgate's CPU after the loop until its backlog was done, % of the loop's own CPU. */
  afterCpuPct: number;
  /** Seconds waited after the loop (at least two deadlines, at most `SETTLE_MAX_MS`). */
  settleS: number;
  /** Queued work left when the wait ended (0: all done); absent without `backlog`. */
  backlogLeft?: number;
}

/** One closed loop of the capacity probe. */
export interface CapacityLoop extends SustainedMeasure {
  connections: number;
  /** 2xx answers per second of the loop itself. */
  requestsPerSecond: number;
  non2xx: number;
}

/** The probe's open loop, at the best closed loop's sustained figure. */
export interface CapacityCheck extends SustainedMeasure {
  rate: number;
  /** 2xx answers per second of the loop itself. */
  achievedRate: number;
  shed: number;
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
  /** The best closed loop (by its sustained 2xx/s), every loop tried, the open loop (`probeCapacity`). */
  capacity: {
    connections: number;
    /** What the steps are multiples of: the lower of the best closed loop's and the open loop's sustained 2xx/s. */
    requestsPerSecond: number;
    /** The best closed loop's 2xx/s during the loop alone (before issue 32 session 11, the capacity). */
    loopRequestsPerSecond: number;
    p99Ms: number;
    non2xx: number;
    tried: CapacityLoop[];
    check: CapacityCheck;
    /** (max − min) ÷ max of the sustained 2xx/s of the loops that ran at the CPU's limit, %. */
    spreadPct: number;
    /** Seconds waited, before the first loop, for the work earlier scenarios left queued. */
    settleBeforeS: number;
    /** The probe's 2xx answers checked (with `quietVerdicts`): the open loop's, and the closed loops' when they count verdicts. */
    verdictCheck?: VerdictCheck;
    verdictsByAccount: VerdictsByAccount;
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
  /**
   * riskgate's queued background work (bench/riskgate-backlog.ts), undefined when unread. Without
   * it the probe waits two deadlines after each loop and counts the CPU of that wait only.
   */
  backlog?: () => Promise<number | undefined>;
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

/** The longest wait for riskgate's queued work after a probe loop, ms. */
const SETTLE_MAX_MS = 5000;
/** How often the wait reads the backlog, ms (each read is a `/metrics` on riskgate's quota). */
const SETTLE_POLL_MS = 200;

interface Settled {
  waitedS: number;
  /** Backlog at the end of the wait; undefined when not read. */
  left: number | undefined;
}

/**
 * Waits until the requests still in riskgate have ended (two deadlines: the generator stops
 * waiting at the end of a loop, the decisions run on to their deadline) and its queued work is done
 * (`backlog` 0), at most `SETTLE_MAX_MS`.
 */
async function settle(d: OverloadDeps): Promise<Settled> {
  const startedAt = performance.now();
  await sleep(2 * d.deadlineMs);
  let left = await d.backlog?.();
  while (left !== undefined && left > 0 && performance.now() - startedAt < SETTLE_MAX_MS) {
    await sleep(SETTLE_POLL_MS);
    left = await d.backlog?.();
  }
  return { waitedS: r1((performance.now() - startedAt) / 1000), left };
}

/** What a probe loop cost: its wall time, riskgate's CPU during it and after it, the wait after. */
interface Measured<T> {
  result: T;
  wallUs: number;
  loopCpuUs: number;
  afterCpuUs: number;
  settled: Settled;
}

async function measured<T>(d: OverloadDeps, run: () => Promise<T>): Promise<Measured<T>> {
  const cpu0 = await d.cpuUs();
  const startedAt = performance.now();
  const result = await run();
  const wallUs = (performance.now() - startedAt) * 1000;
  const cpu1 = await d.cpuUs();
  const settled = await settle(d);
  const cpu2 = await d.cpuUs();
  return { result, wallUs, loopCpuUs: cpu1 - cpu0, afterCpuUs: cpu2 - cpu1, settled };
}

/** A loop's 2xx/s counted over the time its CPU (the loop's and after) takes at `cpuRate` µs/µs. */
function sustainedOf(m: Measured<unknown>, perSecond: number, cpuRate: number): SustainedMeasure {
  const cpuTimeUs = (m.loopCpuUs + m.afterCpuUs) / cpuRate;
  return {
    sustainedPerSecond: r1(perSecond * Math.min(1, m.wallUs / cpuTimeUs)),
    loopCorePct: r1((m.loopCpuUs / m.wallUs) * 100),
    afterCpuPct: r1((m.afterCpuUs / Math.max(1, m.loopCpuUs)) * 100),
    settleS: m.settled.waitedS,
    ...(m.settled.left !== undefined && { backlogLeft: m.settled.left }),
  };
}

/**
 * riskgate's sustained capacity. First the most 2xx/s of three closed loops, each counted with the
 * work it queued. One loop alone is wrong either way: few connections are bound by the upstream
 * latency (8 in flight at ~50 ms is ~160/s whatever the CPU), many retry straight into the sheds
 * and measure the refusals' cost instead. A closed loop also answers at riskgate's burst rate: it
 * defers the outbox's deliveries (lock-outs) and the decision store's batches while the loop keeps
 * it busy, and runs them after (issue 32 session 10: three loops of 1.25 s read 274/s, 137/s and
 * 90.5/s in three runs of nearly one build, and the "1x" step shed hundreds). So each loop starts
 * with nothing queued and is followed by the wait for what it queued, and its 2xx count over the
 * time riskgate's CPU took for all of it (the loop's and the wait's, at the probe's CPU rate) is its
 * figure. Then an open loop at that figure, counted the same way: fewer in flight than in the
 * closed loops, a decision costs more (fewer per batch, per wake-up), and what riskgate sustains
 * there is what the steps meet. The capacity is the lower of the two.
 */
async function probeCapacity(d: OverloadDeps) {
  const connections = [d.cannonConnections, 2 * d.cannonConnections, 4 * d.cannonConnections];
  const loopS = Math.min(10, Math.max(1, d.stepS / 2));
  d.progress(
    `overload: capacity, closed loops of ${connections.join(', ')} connections and an open loop, ${loopS} s each, each followed by its queued work`,
  );
  const before = await settle(d);
  if (before.left !== undefined && before.left > 0)
    d.progress(`overload: ${before.left} queued items left after ${before.waitedS} s`);
  await d.cannon(d.cannonConnections, 1);
  await settle(d);
  const runs: (Measured<CapacityLoopResult> & { connections: number })[] = [];
  for (const c of connections)
    runs.push({ connections: c, ...(await measured(d, () => d.cannon(c, loopS))) });
  // The CPU riskgate gets: its rate in the busiest loop (the cap's quota when capped).
  let cpuRate = Math.max(...runs.map((r) => r.loopCpuUs / r.wallUs));
  const closedOf = () =>
    runs.map(
      (r): CapacityLoop => ({
        connections: r.connections,
        requestsPerSecond: r.result.requestsPerSecond,
        non2xx: r.result.non2xx,
        ...sustainedOf(r, r.result.requestsPerSecond, cpuRate),
      }),
    );
  const bestAt = (loops: CapacityLoop[]) =>
    loops.reduce((a, t, i) => (t.sustainedPerSecond > loops[a]!.sustainedPerSecond ? i : a), 0);
  const rate = Math.max(1, Math.round(closedOf()[bestAt(closedOf())]!.sustainedPerSecond));
  const open = await measured(d, () => d.openLoop(rate, loopS, {}));
  cpuRate = Math.max(cpuRate, open.loopCpuUs / open.wallUs);
  const tried = closedOf();
  const best = bestAt(tried);
  const check: CapacityCheck = {
    rate,
    achievedRate: open.result.achievedRate,
    shed: open.result.errors.status['503'] ?? 0,
    ...sustainedOf(open, open.result.achievedRate, cpuRate),
  };
  // How far the figures read at the CPU's limit agree.
  const saturated = [...tried, check]
    .filter((t) => t.loopCorePct / 100 >= 0.9 * cpuRate)
    .map((t) => t.sustainedPerSecond);
  return {
    capacity: Math.max(1, Math.min(tried[best]!.sustainedPerSecond, check.sustainedPerSecond)),
    best: runs[best]!,
    bestTried: tried[best]!,
    runs,
    tried,
    check,
    checkVerdicts: open.result.verdictsByAccount,
    spreadPct:
      saturated.length === 0
        ? 0
        : r1(((Math.max(...saturated) - Math.min(...saturated)) / Math.max(...saturated)) * 100),
    settleBeforeS: before.waitedS,
  };
}

export async function runOverloadScenario(d: OverloadDeps): Promise<OverloadFigures> {
  const probe = await probeCapacity(d);
  const capacity = probe.capacity;
  const boundMs = d.deadlineMs + 50;
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
  // The open loop's answers always, the closed loops' when they count verdicts.
  const loopVerdicts = [
    probe.checkVerdicts,
    ...probe.runs.map((r) => r.result.verdictsByAccount),
  ].reduce<VerdictsByAccount>((a, v) => (v === undefined ? a : addVerdicts(a, v)), {});
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
      connections: probe.best.connections,
      requestsPerSecond: r1(capacity),
      loopRequestsPerSecond: probe.bestTried.requestsPerSecond,
      p99Ms: probe.best.result.latencyMs.p99,
      non2xx: probe.best.result.non2xx,
      tried: probe.tried,
      check: probe.check,
      spreadPct: probe.spreadPct,
      settleBeforeS: probe.settleBeforeS,
      verdictsByAccount: loopVerdicts,
      ...(d.quietVerdicts !== undefined && { verdictCheck: checkVerdicts(d.quietVerdicts, loopVerdicts) }),
    },
    ...(d.quietVerdicts !== undefined && { quietVerdicts: d.quietVerdicts }),
    steps,
    recoveryS,
  };
}
