/**
 * riskgate against its two references (issue 32), in interleaved rounds on the same core: the FLOOR
 * (bench/floor-server.ts: the same vendor calls and action writes, nothing else) and the peer
 * (bench/peer-server.ts: the shipped policy hand-written on node:http + undici, same calls, same
 * verdicts). Each round measures every server once in a closed loop (the ceiling) and once in an
 * open loop at a fixed rate (a normal day), the order rotating from round to round so no server
 * always runs first or last; the ratios are taken within a round (a pair measured minutes apart on
 * a shared machine says more about the machine), and the report gives the median of the rounds
 * with their spread (min-max). CPU is each server's whole process tree from /proc over the measured
 * run, divided by its 2xx answers (never the sheds, shown beside it).
 *
 * Verdicts: before the rounds riskgate and the peer are each asked every account's quiet-day
 * verdict (bench/verdict-check.ts); the peer's must equal riskgate's, and every 2xx answer of both
 * in every round is checked against riskgate's (the quiet verdict or the degraded one). The FLOOR
 * answers no verdict and is not checked.
 */

import { median } from './bench-median.ts';
import type { ClosedLoopResult, OpenLoopResult } from './open-loop-generator.ts';
import {
  addVerdicts,
  checkVerdicts,
  type Verdict,
  type VerdictCheck,
  type VerdictsByAccount,
} from './verdict-check.ts';

export const REFERENCE_SERVERS = ['riskgate', 'floor', 'peer'] as const;
export type ReferenceServer = (typeof REFERENCE_SERVERS)[number];

/** One server's measured run in one round. */
export interface ReferenceRun {
  /** 2xx answers over the measured run. */
  ok: number;
  /** 503 answers (sheds) over the measured run. */
  shed: number;
  /** Other non-2xx answers, timeouts and connection errors. */
  otherErrors: number;
  /** Server CPU (process tree, /proc) over the measured run ÷ 2xx answers, µs. */
  cpuUsPer2xx: number;
  /** 2xx answers per second. */
  answersPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Vendor API calls (sandbox counters) over the measured run ÷ 2xx answers. */
  upstreamCallsPer2xx: number;
  verdictsByAccount: VerdictsByAccount;
}

/** Median and spread of one figure over the rounds. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  values: number[];
}

export interface LoopComparison {
  loop: 'closed' | 'open';
  /** Closed: connections; open: the arrival rate, per second. */
  connections?: number;
  rate?: number;
  durationS: number;
  runs: Record<ReferenceServer, ReferenceRun[]>;
  cpuUsPer2xx: Record<ReferenceServer, Spread>;
  answersPerSecond: Record<ReferenceServer, Spread>;
  p99Ms: Record<ReferenceServer, Spread>;
  upstreamCallsPer2xx: Record<ReferenceServer, Spread>;
  shed: Record<ReferenceServer, Spread>;
  /** riskgate ÷ FLOOR and riskgate ÷ peer, round by round. */
  cpuRatio: { floor: Spread; peer: Spread };
  throughputRatio: { floor: Spread; peer: Spread };
}

export interface ComparisonFigures {
  rounds: number;
  /** Each account's quiet-day verdict as riskgate and as the peer answered it. */
  quietVerdicts: { riskgate: Record<string, Verdict>; peer: Record<string, Verdict> };
  /** Accounts whose quiet-day verdicts differ between riskgate and the peer (must be none). */
  peerDisagrees: string[];
  /** Every 2xx answer of every round against riskgate's quiet-day verdicts. */
  verdictCheck: { riskgate: VerdictCheck; peer: VerdictCheck };
  closed: LoopComparison;
  open: LoopComparison;
}

/** What the comparison needs from the harness. */
export interface ComparisonDeps {
  rounds: number;
  durationS: number;
  warmupS: number;
  rate: number;
  connections: number;
  timeoutMs: number;
  /** The /decide origin of each server. */
  origins: Record<ReferenceServer, string>;
  headers: Record<ReferenceServer, Record<string, string>>;
  /** Restores the sandbox (deny actions lock users out) and answers the bodies of its users. */
  freshSandbox: () => Promise<string[]>;
  /** Each server's process-tree CPU so far, µs. */
  cpuUs: (server: ReferenceServer) => number;
  /** Vendor API calls since the last call. */
  upstreamCalls: () => Promise<number>;
  closedLoop: (
    origin: string,
    headers: Record<string, string>,
    bodies: string[],
    durationS: number,
  ) => Promise<ClosedLoopResult>;
  openLoop: (
    origin: string,
    headers: Record<string, string>,
    bodies: string[],
    rate: number,
    durationS: number,
  ) => Promise<OpenLoopResult>;
  quietVerdicts: (
    origin: string,
    headers: Record<string, string>,
    bodies: string[],
  ) => Promise<Record<string, Verdict>>;
  progress: (message: string) => void;
}

const round1 = (v: number, digits = 1) => Math.round(v * 10 ** digits) / 10 ** digits;

/** Median and min-max of `values` (0s when empty). */
export function spreadOf(values: number[]): Spread {
  if (values.length === 0) return { median: 0, min: 0, max: 0, values };
  return { median: round1(median(values), 3), min: Math.min(...values), max: Math.max(...values), values };
}

/** The servers of round `i`, rotated so each takes each position in turn. */
export function roundOrder(i: number): ReferenceServer[] {
  return REFERENCE_SERVERS.map((_, k) => REFERENCE_SERVERS[(k + i) % REFERENCE_SERVERS.length]!);
}

export async function runReferenceComparison(d: ComparisonDeps): Promise<ComparisonFigures> {
  let bodies = await d.freshSandbox();
  d.progress('references: quiet-day verdicts of riskgate and the peer');
  const quietRiskgate = await d.quietVerdicts(d.origins.riskgate, d.headers.riskgate, bodies);
  bodies = await d.freshSandbox();
  const quietPeer = await d.quietVerdicts(d.origins.peer, d.headers.peer, bodies);
  const peerDisagrees = Object.keys(quietRiskgate).filter((a) => quietRiskgate[a] !== quietPeer[a]);

  const empty = () => ({ riskgate: [], floor: [], peer: [] }) as Record<ReferenceServer, ReferenceRun[]>;
  const closed = empty();
  const open = empty();
  for (let i = 0; i < d.rounds; i++) {
    for (const [loop, into] of [
      ['closed', closed],
      ['open', open],
    ] as const) {
      for (const server of roundOrder(i)) {
        bodies = await d.freshSandbox();
        const origin = d.origins[server];
        const headers = d.headers[server];
        const run = () =>
          loop === 'closed'
            ? d.closedLoop(origin, headers, bodies, d.durationS)
            : d.openLoop(origin, headers, bodies, d.rate, d.durationS);
        // Unmeasured first, so every server is measured warm.
        if (d.warmupS > 0) {
          await (loop === 'closed'
            ? d.closedLoop(origin, headers, bodies, d.warmupS)
            : d.openLoop(origin, headers, bodies, d.rate, d.warmupS));
        }
        d.progress(
          `references round ${i + 1}/${d.rounds}: ${loop} loop, ${server}, ${loop === 'closed' ? `${d.connections} connections` : `${d.rate}/s`}, ${d.durationS} s`,
        );
        await d.upstreamCalls();
        const before = d.cpuUs(server);
        const result = await run();
        const cpu = d.cpuUs(server) - before;
        const calls = await d.upstreamCalls();
        into[server].push(toRun(result, cpu, calls));
      }
    }
  }
  const check = (server: 'riskgate' | 'peer') =>
    checkVerdicts(
      quietRiskgate,
      [...closed[server], ...open[server]].reduce(
        (by, r) => addVerdicts(by, r.verdictsByAccount),
        {} as VerdictsByAccount,
      ),
    );
  return {
    rounds: d.rounds,
    quietVerdicts: { riskgate: quietRiskgate, peer: quietPeer },
    peerDisagrees,
    verdictCheck: { riskgate: check('riskgate'), peer: check('peer') },
    closed: summarise('closed', closed, d, { connections: d.connections }),
    open: summarise('open', open, d, { rate: d.rate }),
  };
}

function toRun(result: ClosedLoopResult | OpenLoopResult, cpuUs: number, calls: number): ReferenceRun {
  const shed = result.errors.status['503'] ?? 0;
  const otherStatus = Object.entries(result.errors.status)
    .filter(([s]) => s !== '503')
    .reduce((n, [, v]) => n + v, 0);
  const dropped = 'dropped' in result.errors ? result.errors.dropped : 0;
  const closedResult = 'requestsPerSecond' in result ? result : undefined;
  const openResult = 'achievedRate' in result ? result : undefined;
  return {
    ok: result.ok,
    shed,
    otherErrors: otherStatus + result.errors.timeouts + result.errors.connection + dropped,
    cpuUsPer2xx: result.ok > 0 ? round1(cpuUs / result.ok) : 0,
    answersPerSecond: closedResult?.requestsPerSecond ?? openResult?.achievedRate ?? 0,
    p50Ms: closedResult?.latencyMs.p50 ?? round1((openResult?.latencyUs.p50 ?? 0) / 1000, 2),
    p99Ms: closedResult?.latencyMs.p99 ?? round1((openResult?.latencyUs.p99 ?? 0) / 1000, 2),
    upstreamCallsPer2xx: result.ok > 0 ? round1(calls / result.ok, 2) : 0,
    verdictsByAccount: result.verdictsByAccount,
  };
}

function summarise(
  loop: 'closed' | 'open',
  runs: Record<ReferenceServer, ReferenceRun[]>,
  d: ComparisonDeps,
  extra: { connections?: number; rate?: number },
): LoopComparison {
  const per = (f: (r: ReferenceRun) => number) =>
    Object.fromEntries(REFERENCE_SERVERS.map((s) => [s, spreadOf(runs[s].map(f))])) as Record<
      ReferenceServer,
      Spread
    >;
  const ratio = (f: (r: ReferenceRun) => number, other: 'floor' | 'peer') =>
    spreadOf(
      runs.riskgate.map((r, i) => {
        const o = runs[other][i];
        return o && f(o) > 0 ? round1(f(r) / f(o), 3) : 0;
      }),
    );
  return {
    loop,
    ...extra,
    durationS: d.durationS,
    runs,
    cpuUsPer2xx: per((r) => r.cpuUsPer2xx),
    answersPerSecond: per((r) => r.answersPerSecond),
    p99Ms: per((r) => r.p99Ms),
    upstreamCallsPer2xx: per((r) => r.upstreamCallsPer2xx),
    shed: per((r) => r.shed),
    cpuRatio: { floor: ratio((r) => r.cpuUsPer2xx, 'floor'), peer: ratio((r) => r.cpuUsPer2xx, 'peer') },
    throughputRatio: {
      floor: ratio((r) => r.answersPerSecond, 'floor'),
      peer: ratio((r) => r.answersPerSecond, 'peer'),
    },
  };
}

/** Wrong answers anywhere in the comparison: a peer that disagrees, or a wrong allow or deny. */
export function comparisonWrong(c: ComparisonFigures): string[] {
  const wrong: string[] = [];
  if (c.peerDisagrees.length > 0) {
    wrong.push(
      `the peer's quiet-day verdicts differ from riskgate's for ${c.peerDisagrees.map((a) => `${a} (riskgate ${c.quietVerdicts.riskgate[a]}, peer ${c.quietVerdicts.peer[a]})`).join(', ')}`,
    );
  }
  for (const server of ['riskgate', 'peer'] as const) {
    const v = c.verdictCheck[server];
    if (v.wrongAllows + v.wrongDenies + v.otherWrong > 0) {
      wrong.push(
        `${server}: ${v.wrongAllows} wrong allows, ${v.wrongDenies} wrong denies, ${v.otherWrong} other wrong of ${v.checked} (${JSON.stringify(v.wrongByAccount)})`,
      );
    }
  }
  return wrong;
}
