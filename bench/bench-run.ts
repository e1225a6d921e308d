import { mkdtempSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { median } from './bench-median.ts';
import type { BenchOptions } from './bench-options.ts';
import {
  freePort,
  type Generator,
  limitCpu,
  type Pinning,
  planPinning,
  processCpuUs,
  processTree,
  processTreeCpuUs,
  type ServerProcess,
  startGenerator,
  startServer,
} from './bench-processes.ts';
import { benchApiKey, demoDecideBodies, startBenchRiskgate, startBenchSandbox } from './bench-scenario.ts';
import type { CannonResult, ClosedLoopResult, OpenLoopResult } from './open-loop-generator.ts';
import { type OverloadFigures, runOverloadScenario } from './overload-scenario.ts';
import { type PolicyEvalFigures, runPolicyEval } from './policy-eval-scenario.ts';
import { computePolicyNeeds, type PolicyNeeds } from './policy-needs.ts';
import {
  type ComparisonFigures,
  type ReferenceServer,
  runReferenceComparison,
} from './reference-comparison.ts';
import { readBacklog } from './riskgate-backlog.ts';
import {
  applyLatencyProfile,
  getSandboxStats,
  type LatencyProfile,
  resetSandbox,
  resetSandboxStats,
  type SandboxStats,
  sandboxVendorEnv,
} from './sandbox-control.ts';
import { type UpstreamFigures, upstreamFigures } from './upstream-efficiency.ts';
import { askQuietVerdicts } from './verdict-check.ts';

/** The sandbox's token lifetime when the bench does not set one (docs/vendor-api.md#oauth-token). */
const SANDBOX_DEFAULT_TOKEN_LIFETIME_S = 43_200;

export interface MachineInfo {
  cores: number;
  cpuModel: string;
  node: string;
  platform: string;
  totalMemoryMb: number;
  /** 1-minute load average when the run started and ended: the noise from everything else. */
  loadAverage: { start: number; end: number };
  pinning: Pinning;
  /**
   * How riskgate ran: `shipped` (decision log to a file, the default process model, decision store
   * on) or `lean` (`--lean`: decision log off, one process), and how many processes it had.
   */
  riskgate?: { config: 'shipped' | 'lean'; processes: number; note: string };
}

/** CPU use during one open-model step (warm-up included): who was saturated. */
export interface StepCpu {
  /**
   * riskgate CPU (its whole process tree, `/proc`) per 2xx answer, µs. Issue 32: before, it was per
   * answer of any status, and the sheds made a shedding riskgate look cheap.
   */
  riskgateUsPerDecision: number;
  /** 503 answers (sheds), warm-up included, shown beside the CPU per 2xx answer. */
  shed: number;
  /** riskgate CPU time ÷ wall time, percent of one core. */
  riskgateCorePct: number;
  /** The sandbox's CPU per 2xx answer, µs (`/proc`; 0 where unavailable). */
  sandboxUsPerDecision: number;
  sandboxCorePct: number;
  /** The load generator's CPU ÷ wall time, percent of one core. */
  generatorCorePct: number;
}

export interface OpenLoopStep {
  profile: string;
  rate: number;
  load: OpenLoopResult;
  upstream: UpstreamFigures;
  cpu: StepCpu;
}

/** `process.cpuUsage` + `memoryUsage` of riskgate, as `/bench/process` answers. */
interface ProcessSample {
  uptimeS: number;
  cpuUsage: { user: number; system: number };
  memoryUsage: { rss: number; heapTotal: number; heapUsed: number; external: number; arrayBuffers: number };
  gcExposed: boolean;
}

export interface MemorySample {
  /** Seconds since the sustained run started. */
  tS: number;
  rssMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
}

export interface BenchResult {
  schemaVersion: 1;
  startedAt: string;
  finishedAt: string;
  /** How the run was started, to repeat it. */
  command: string;
  mode: BenchOptions['mode'];
  options: BenchOptions;
  machine: MachineInfo;
  scenarios: {
    latency: {
      profiles: {
        profile: string;
        description: string;
        rates: ({ rate: number; cpu: StepCpu } & Pick<
          OpenLoopResult,
          | 'scheduled'
          | 'ok'
          | 'achievedRate'
          | 'errors'
          | 'latencyUs'
          | 'serviceTimeUs'
          | 'sendLagUs'
          | 'verdicts'
        >)[];
      }[];
    };
    overhead: {
      /**
       * GET /bench/hello under the same open model (rate `rate`): loopback, HTTP and the generator,
       * with no decision. What end-to-end overhead cannot go below on this machine.
       */
      transportBaseline: Pick<OpenLoopResult, 'rate' | 'achievedRate' | 'serviceTimeUs' | 'latencyUs'>;
      profiles: {
        profile: string;
        rates: Pick<
          OpenLoopResult,
          'rate' | 'overheadEndToEndUs' | 'overheadServerUs' | 'slowestUpstreamUs' | 'missingServerTiming'
        >[];
      }[];
    };
    throughput: {
      hello: ThroughputRun;
      decide: ThroughputRun;
      /** decide requests/s ÷ hello requests/s, same run. */
      ratio: number;
    };
    /**
     * riskgate against the FLOOR and the peer in interleaved rounds (bench/reference-comparison.ts);
     * absent with `--compare-rounds 0`. (Before issue 32 one FLOOR run followed riskgate's here.)
     */
    references?: ComparisonFigures;
    upstream: {
      profiles: {
        profile: string;
        rates: (UpstreamFigures & { rate: number; metricsInServerTiming: number })[];
      }[];
      tokens: {
        issued: number;
        runSeconds: number;
        lifetimeSeconds: number;
        /** The most a client refreshing once per lifetime may ask for in this run. */
        allowed: number;
      };
      policyNeeds: PolicyNeeds;
    };
    memory: {
      rate: number;
      durationS: number;
      before: MemorySample;
      beforeAfterGc: MemorySample;
      peak: MemorySample;
      after: MemorySample;
      afterAfterGc: MemorySample;
      /** RSS at the end of the run vs. just after warm-up (the first 25 %), percent. */
      rssGrowthPct: number;
      /** Heap after a full GC, after the run vs. before it, percent. */
      heapAfterGcGrowthPct: number;
      samples: MemorySample[];
      load: Pick<OpenLoopResult, 'ok' | 'achievedRate' | 'errors' | 'latencyUs'>;
    };
    policyEval: PolicyEvalFigures;
    /** Absent when `--overload-step 0`. */
    overload?: OverloadFigures;
  };
}

/** One autocannon run of scenario 3 with the server's CPU and the upstream calls it made. */
export type ThroughputRun = CannonResult & {
  /**
   * Server CPU (process tree, `/proc`) over the measured run ÷ 2xx answers, µs: per decision
   * answered. (Before issue 22 it was ÷ every request, 503s included, which made a shedding riskgate
   * look cheaper than the FLOOR.)
   */
  cpuUsPerRequest: number;
  /** Vendor API calls (sandbox counters) over the measured run ÷ 2xx answers (/decide only). */
  upstreamCallsPerAnswer?: number;
};

const MB = 1024 * 1024;
const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

function cpuOf(sample: ProcessSample): number {
  return sample.cpuUsage.user + sample.cpuUsage.system;
}

function toMemorySample(sample: ProcessSample, tS: number): MemorySample {
  return {
    tS: round(tS),
    rssMb: round(sample.memoryUsage.rss / MB),
    heapUsedMb: round(sample.memoryUsage.heapUsed / MB),
    heapTotalMb: round(sample.memoryUsage.heapTotal / MB),
    externalMb: round(sample.memoryUsage.external / MB),
  };
}

function describeProfile(profile: LatencyProfile): string {
  return profile.name === 'zero'
    ? 'sandbox at zero added latency'
    : `upstream latency lognormal, p50 ${profile.p50Ms} ms, p99 ${profile.p99Ms} ms`;
}

/** Logs progress on stderr so stdout keeps only the report. */
function progress(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

/**
 * One full run: starts the sandbox, riskgate (bench/riskgate-under-bench.ts) and the load
 * generator, runs every scenario, stops everything, and returns the figures.
 */
export async function runBench(options: BenchOptions, command: string): Promise<BenchResult> {
  const result = await runServerScenarios(options, command);
  progress('policy evaluation');
  result.scenarios.policyEval = await runPolicyEval(options.mode);
  result.finishedAt = new Date().toISOString();
  return result;
}

async function runServerScenarios(options: BenchOptions, command: string): Promise<BenchResult> {
  const startedAt = new Date();
  const loadStart = loadavg()[0]!;
  const pinning = planPinning(options.pin);
  progress(`pinning: ${pinning.note}`);
  const apiKey = benchApiKey();
  // Opens riskgate's /metrics to the overload probe (its backlog: bench/riskgate-backlog.ts).
  const opsKey = benchApiKey();
  const tokenLifetimeS = options.tokenLifetimeS || SANDBOX_DEFAULT_TOKEN_LIFETIME_S;

  const servers: ServerProcess[] = [];
  const stateDirs: string[] = [];
  let generator: Generator | undefined;
  const scenarioDir = await mkdtemp(join(tmpdir(), 'riskgate-bench-'));
  try {
    progress('starting the sandbox');
    const sandbox = await startBenchSandbox({
      dir: scenarioDir,
      bodyVariants: options.bodyVariants,
      cpu: pinning.sandbox,
      ...(options.tokenLifetimeS > 0 && {
        env: { SANDBOX_TOKEN_LIFETIME_SECONDS: String(options.tokenLifetimeS) },
      }),
    });
    servers.push(sandbox);
    progress(`sandbox at ${sandbox.url} (pid ${sandbox.pid})`);

    // Removed at the end: the decision log of a run at 1000/s grows by megabytes a second.
    const stateDir = mkdtempSync(join(tmpdir(), 'riskgate-bench-state-'));
    stateDirs.push(stateDir);
    // The vendor as riskgate sees it; the FLOOR server (scenario 3) is given the same.
    const vendorEnv = sandboxVendorEnv(sandbox.url);
    progress('starting riskgate');
    const riskgate = await startBenchRiskgate({
      cpu: pinning.riskgate,
      sandboxUrl: sandbox.url,
      apiKey,
      // BENCH_RISKGATE_NODE_ARGS: e.g. `--cpu-prof --cpu-prof-dir=bench/results` to profile riskgate.
      nodeArgs: [
        '--expose-gc',
        ...(process.env.BENCH_RISKGATE_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? []),
      ],
      env: {
        RISKGATE_POLICY_PATH: options.policyPath,
        // A fresh outbox and decision store per run: actions left by an earlier run must not reach
        // this run's sandbox.
        RISKGATE_STATE_DIR: stateDir,
        RISKGATE_RAT_BATCH_WINDOW_MS: String(options.ratWindowMs),
        RISKGATE_RAT_CACHE_MS: String(options.ratCacheMs),
        // Issue 32: as shipped unless --lean. Shipped: the decision log on, to a file (stdout is its
        // default, a pipe the harness would have to drain); the process model and the decision store
        // left to their defaults. Lean: what the bench ran before (log off, one process).
        ...(options.lean
          ? { RISKGATE_DECISION_LOG: 'off', RISKGATE_WORKERS: '1' }
          : { RISKGATE_DECISION_LOG: join(stateDir, 'decisions.ndjson') }),
        RISKGATE_OPS_KEYS: opsKey,
        ...options.riskgateEnv,
      },
    });
    servers.push(riskgate);
    // A cluster primary forks its workers before it reports ready; count once they are up.
    const riskgateProcesses = processTree(riskgate.pid).length;
    const riskgateRun = {
      config: options.lean ? ('lean' as const) : ('shipped' as const),
      processes: riskgateProcesses,
      note: options.lean
        ? `lean (--lean): decision log off, one process${options.riskgateEnv.RISKGATE_DECISION_STORE === 'off' ? ', decision store off' : ''}`
        : `as shipped: decision log to a file, decision store ${options.riskgateEnv.RISKGATE_DECISION_STORE ?? 'on'}, default process model (${riskgateProcesses === 1 ? 'one process' : `${riskgateProcesses} processes: a primary and its workers`}${pinning.riskgate === undefined ? '' : `, on the one core it is pinned to`})`,
    };
    progress(`riskgate at ${riskgate.url} (pid ${riskgate.pid}): ${riskgateRun.note}`);
    /** riskgate's CPU so far, µs: every process of its tree from /proc, else its own `cpuUsage`. */
    const riskgateCpuUs = async (): Promise<number> =>
      processTreeCpuUs(riskgate.pid) ?? cpuOf(await sample());
    generator = await startGenerator(pinning.load);
    const runStartMs = Date.now();

    let tokensIssued = 0;
    /** Stats since the last reset; the token count is carried over because a reset zeroes it. */
    const takeStats = async (): Promise<SandboxStats> => {
      const stats = await getSandboxStats(sandbox.url);
      tokensIssued += stats.tokensIssued;
      await resetSandboxStats(sandbox.url);
      return stats;
    };
    /**
     * riskgate's CPU and memory. Generous timeout: an overloaded riskgate answers this behind its
     * backlog, and that must not fail the run.
     */
    const sample = async (gc = false, timeoutMs = 30_000): Promise<ProcessSample> => {
      const response = await fetch(`${riskgate.url}/bench/process${gc ? '?gc=1' : ''}`, {
        signal: AbortSignal.timeout(timeoutMs),
      });
      return (await response.json()) as ProcessSample;
    };
    const decideHeaders = { authorization: `Bearer ${apiKey}` };
    let bodies: string[] = [];
    const openLoop = (
      rate: number,
      durationS: number,
      warmupS: number,
      target: 'decide' | 'hello' = 'decide',
    ) =>
      generator!.run<OpenLoopResult>({
        type: 'open',
        origin: riskgate.url,
        path: target === 'decide' ? '/decide' : '/bench/hello',
        headers: target === 'decide' ? decideHeaders : {},
        bodies: target === 'decide' ? bodies : [],
        rate,
        durationS,
        warmupS,
        connections: options.connections,
        timeoutMs: options.timeoutMs,
        maxInFlight: options.maxInFlight,
      });
    /**
     * Restores the seeded users (deny actions lock them out) and the wanted latency profile. A reset
     * gives the users new ids, so the bodies are rebuilt with them (the same bodies otherwise).
     */
    const freshSandbox = async (profile: LatencyProfile) => {
      await takeStats();
      await resetSandbox(sandbox.url);
      bodies = await demoDecideBodies(sandbox.url, options.bodyVariants);
      await applyLatencyProfile(sandbox.url, profile);
      await takeStats();
    };

    // The transport baseline of scenario 2: hello-world at the target rate, same generator.
    const baselineRate = Math.min(1000, Math.max(...options.rates));
    progress(`transport baseline: GET /bench/hello, ${baselineRate}/s`);
    const baseline = await openLoop(
      baselineRate,
      Math.min(options.durationS, 5),
      Math.min(options.warmupS, 1),
      'hello',
    );

    // Scenarios 1, 2 and 4: one open-model step per profile and rate.
    const profiles: LatencyProfile[] = options.profiles.map((name) =>
      name === 'zero' ? { name } : { name, p50Ms: options.latencyP50Ms, p99Ms: options.latencyP99Ms },
    );
    const steps: OpenLoopStep[] = [];
    for (const profile of profiles) {
      for (const rate of options.rates) {
        await freshSandbox(profile);
        progress(`open model: ${describeProfile(profile)}, ${rate}/s for ${options.durationS} s`);
        const before = {
          at: performance.now(),
          riskgate: await riskgateCpuUs(),
          sandbox: processCpuUs(sandbox.pid),
        };
        const load = await openLoop(rate, options.durationS, options.warmupS);
        const after = {
          at: performance.now(),
          riskgate: await riskgateCpuUs(),
          sandbox: processCpuUs(sandbox.pid),
        };
        const stats = await takeStats();
        const wallUs = (after.at - before.at) * 1000;
        // Per 2xx answer (issue 32): a shed 503 is not a decision.
        const decisions = Math.max(1, load.okIncludingWarmup);
        const riskgateUs = after.riskgate - before.riskgate;
        const sandboxUs = (after.sandbox ?? 0) - (before.sandbox ?? 0);
        steps.push({
          profile: profile.name,
          rate,
          load,
          upstream: upstreamFigures(stats, load.answeredIncludingWarmup),
          cpu: {
            riskgateUsPerDecision: round(riskgateUs / decisions),
            shed: load.shedIncludingWarmup,
            riskgateCorePct: round((riskgateUs / wallUs) * 100),
            sandboxUsPerDecision: round(sandboxUs / decisions),
            sandboxCorePct: round((sandboxUs / wallUs) * 100),
            generatorCorePct: round((load.generatorCpuUs / wallUs) * 100),
          },
        });
      }
    }

    // Scenario 3: closed-model ceiling, hello-world and /decide in the same run.
    await freshSandbox({ name: 'zero' });
    const cannon = async (target: 'hello' | 'decide', base = riskgate.url): Promise<ThroughputRun> => {
      const job = {
        type: 'cannon' as const,
        url: target === 'hello' ? `${base}/bench/hello` : `${base}/decide`,
        method: target === 'hello' ? ('GET' as const) : ('POST' as const),
        headers: target === 'hello' ? {} : { ...decideHeaders, 'content-type': 'application/json' },
        bodies: target === 'hello' ? [] : bodies,
        connections: options.cannonConnections,
      };
      // A short unmeasured run first, so both targets are measured warm.
      await generator!.run<CannonResult>({ ...job, durationS: Math.min(1, options.cannonDurationS) });
      progress(
        `throughput: autocannon ${target}, ${options.cannonConnections} connections, ${options.cannonDurationS} s`,
      );
      await takeStats();
      const before = await riskgateCpuUs();
      const result = await generator!.run<CannonResult>({ ...job, durationS: options.cannonDurationS });
      const after = await riskgateCpuUs();
      const upstream = upstreamFigures(await takeStats(), result.ok);
      const cpuUs = after - before;
      return {
        ...result,
        // Per answer, not per request: a 503 costs a fraction of a decision (bench/shed-cost.ts).
        cpuUsPerRequest: result.ok > 0 ? round(cpuUs / result.ok) : 0,
        ...(target === 'decide' && { upstreamCallsPerAnswer: upstream.upstreamCallsPerDecision }),
      };
    };
    const hello = await cannon('hello');
    const decide = await cannon('decide');
    // Scenario 3b (issue 32): riskgate against the FLOOR and the peer, interleaved rounds on
    // riskgate's core (the others idle meanwhile), same bodies and connections.
    let references: ComparisonFigures | undefined;
    if (options.compareRounds > 0) {
      // The references fetch their own tokens; the token figure is riskgate's.
      const tokensBefore = tokensIssued;
      const referenceEnv = {
        ...vendorEnv,
        RISKGATE_RAT_BATCH_WINDOW_MS: String(options.ratWindowMs),
        REFERENCE_STATE_DIR: stateDir,
      };
      const reference = async (name: 'floor' | 'peer'): Promise<ServerProcess> => {
        progress(`starting the ${name === 'floor' ? 'FLOOR' : 'peer'} server`);
        const port = await freePort();
        const server = await startServer({
          name,
          entry: `bench/${name}-server.ts`,
          port,
          cpu: pinning.riskgate,
          nodeArgs: [],
          readyPath: '/bench/hello',
          env: {
            ...referenceEnv,
            ...(name === 'floor'
              ? { FLOOR_PORT: String(port) }
              : { PEER_PORT: String(port), PEER_API_KEY: apiKey }),
          },
        });
        servers.push(server);
        return server;
      };
      const floorServer = await reference('floor');
      const peerServer = await reference('peer');
      const pids: Record<ReferenceServer, number> = {
        riskgate: riskgate.pid,
        floor: floorServer.pid,
        peer: peerServer.pid,
      };
      const closedJob = (origin: string, headers: Record<string, string>, b: string[], durationS: number) =>
        generator!.run<ClosedLoopResult>({
          type: 'closed',
          origin,
          path: '/decide',
          headers,
          bodies: b,
          connections: options.cannonConnections,
          durationS,
          timeoutMs: options.timeoutMs,
        });
      references = await runReferenceComparison({
        rounds: options.compareRounds,
        durationS: options.compareDurationS,
        warmupS: options.compareWarmupS,
        rate: options.compareRate,
        connections: options.cannonConnections,
        timeoutMs: options.timeoutMs,
        origins: { riskgate: riskgate.url, floor: floorServer.url, peer: peerServer.url },
        // The peer checks the same API key riskgate does; the FLOOR checks nothing.
        headers: { riskgate: decideHeaders, floor: {}, peer: decideHeaders },
        freshSandbox: async () => {
          await freshSandbox({ name: 'zero' });
          return bodies;
        },
        cpuUs: (server) => processTreeCpuUs(pids[server]) ?? 0,
        upstreamCalls: async () => upstreamFigures(await takeStats(), 1).upstreamCalls,
        closedLoop: closedJob,
        openLoop: (origin, headers, b, rate, durationS) =>
          generator!.run<OpenLoopResult>({
            type: 'open',
            origin,
            path: '/decide',
            headers,
            bodies: b,
            rate,
            durationS,
            warmupS: 0,
            connections: options.connections,
            timeoutMs: options.timeoutMs,
            maxInFlight: options.maxInFlight,
          }),
        quietVerdicts: async (origin, headers, b) =>
          (await askQuietVerdicts({ decideUrl: `${origin}/decide`, headers, bodies: b, rounds: 3 })).verdicts,
        progress,
      });
      await takeStats();
      tokensIssued = tokensBefore;
      // Stopped now: idle, they would still share riskgate's core for the rest of the run.
      for (const server of [floorServer, peerServer]) {
        await server.stop().catch(() => {});
        servers.splice(servers.indexOf(server), 1);
      }
    }

    // Scenario 6: overload, multiples of the closed-loop capacity under the lognormal profile.
    let overload: OverloadFigures | undefined;
    if (options.overloadStepS > 0) {
      const profile: LatencyProfile = {
        name: 'lognormal',
        p50Ms: options.latencyP50Ms,
        p99Ms: options.latencyP99Ms,
      };
      // Each account's quiet-day verdict, uncapped, one at a time and with the vendor answering at
      // once, before the overload: what every step's answers are checked against
      // (bench/verdict-check.ts, as the stress test does). Asked under the steps' latency profile,
      // a slow vendor call is a degraded answer, not a quiet day (issue 32: trudy's geovelocity
      // timed out and her reference became the degraded challenge); the profile follows.
      await freshSandbox({ name: 'zero' });
      progress('overload: quiet-day verdicts of the demo accounts');
      const quiet = await askQuietVerdicts({
        decideUrl: `${riskgate.url}/decide`,
        headers: decideHeaders,
        bodies,
        rounds: 3,
      });
      progress(
        `overload: quiet-day verdicts ${JSON.stringify(quiet.verdicts)} (${quiet.setAside} degraded or refused answers set aside and asked again)`,
      );
      await applyLatencyProfile(sandbox.url, profile);
      const cap = options.overloadCpu > 0 ? limitCpu(riskgate.pid, options.overloadCpu) : undefined;
      if (cap !== undefined) progress(`overload: ${cap.note}`);
      try {
        overload = await runOverloadScenario({
          deadlineMs: Number(options.riskgateEnv.RISKGATE_DEADLINE_MS ?? 300),
          stepS: options.overloadStepS,
          cannonConnections: options.overloadConnections,
          profile: describeProfile(profile),
          cannon: (connections, durationS) =>
            generator!.run<CannonResult>({
              type: 'cannon',
              url: `${riskgate.url}/decide`,
              method: 'POST',
              headers: { ...decideHeaders, 'content-type': 'application/json' },
              bodies,
              connections,
              durationS,
            }),
          backlog: () => readBacklog(riskgate.url, opsKey),
          openLoop: (rate, durationS, extra) =>
            generator!.run<OpenLoopResult>({
              type: 'open',
              origin: riskgate.url,
              path: '/decide',
              headers: decideHeaders,
              bodies,
              rate,
              durationS,
              warmupS: 0,
              connections: Math.max(options.connections, 512),
              timeoutMs: options.timeoutMs,
              maxInFlight: options.maxInFlight,
              ...extra,
            }),
          cpuUs: riskgateCpuUs,
          progress,
          cpuNote: cap?.note ?? 'riskgate uncapped',
          quietVerdicts: quiet.verdicts,
        });
      } finally {
        cap?.release();
      }
      await takeStats();
    }

    // Scenario 5: memory before, during and after a sustained run.
    await freshSandbox({ name: 'zero' });
    const beforeSample = await sample();
    const beforeGc = await sample(true);
    const memorySamples: MemorySample[] = [];
    let memoryLoad: OpenLoopResult | undefined;
    if (options.memoryDurationS > 0) {
      progress(`memory: ${options.memoryRate}/s for ${options.memoryDurationS} s`);
      const t0 = Date.now();
      const loadDone = openLoop(options.memoryRate, options.memoryDurationS, 0).then((r) => {
        memoryLoad = r;
      });
      let finished = false;
      void loadDone.finally(() => {
        finished = true;
      });
      while (!finished) {
        await Promise.race([loadDone, new Promise((r) => setTimeout(r, 1000))]);
        if (finished) continue;
        // A sample that does not come back within 2 s is skipped (riskgate is overloaded), not fatal.
        const taken = await sample(false, 2000).catch(() => undefined);
        if (taken) memorySamples.push(toMemorySample(taken, (Date.now() - t0) / 1000));
      }
      await loadDone;
    }
    await new Promise((r) => setTimeout(r, 1000));
    const afterSample = await sample();
    const afterGc = await sample(true);
    await takeStats();
    const runSeconds = (Date.now() - runStartMs) / 1000;

    const policyNeeds = await computePolicyNeeds(options.policyPath, bodies);

    const memory = memoryFigures(
      toMemorySample(beforeSample, 0),
      toMemorySample(beforeGc, 0),
      memorySamples,
      toMemorySample(afterSample, options.memoryDurationS + 1),
      toMemorySample(afterGc, options.memoryDurationS + 1),
    );
    const result: BenchResult = {
      schemaVersion: 1,
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      command,
      mode: options.mode,
      options,
      machine: {
        cores: availableParallelism(),
        cpuModel: cpus()[0]?.model ?? 'unknown',
        node: process.version,
        platform: `${process.platform}-${process.arch}`,
        totalMemoryMb: Math.round(totalmem() / MB),
        loadAverage: { start: round(loadStart, 2), end: round(loadavg()[0]!, 2) },
        pinning,
        riskgate: riskgateRun,
      },
      scenarios: {
        latency: {
          profiles: profiles.map((profile) => ({
            profile: profile.name,
            description: describeProfile(profile),
            rates: steps
              .filter((s) => s.profile === profile.name)
              .map(({ load, cpu }) => ({
                rate: load.rate,
                cpu,
                scheduled: load.scheduled,
                ok: load.ok,
                achievedRate: load.achievedRate,
                errors: load.errors,
                latencyUs: load.latencyUs,
                serviceTimeUs: load.serviceTimeUs,
                sendLagUs: load.sendLagUs,
                verdicts: load.verdicts,
              })),
          })),
        },
        overhead: {
          transportBaseline: {
            rate: baseline.rate,
            achievedRate: baseline.achievedRate,
            serviceTimeUs: baseline.serviceTimeUs,
            latencyUs: baseline.latencyUs,
          },
          profiles: profiles.map((profile) => ({
            profile: profile.name,
            rates: steps
              .filter((s) => s.profile === profile.name)
              .map(({ load }) => ({
                rate: load.rate,
                overheadEndToEndUs: load.overheadEndToEndUs,
                overheadServerUs: load.overheadServerUs,
                slowestUpstreamUs: load.slowestUpstreamUs,
                missingServerTiming: load.missingServerTiming,
              })),
          })),
        },
        throughput: {
          hello,
          decide,
          ratio:
            hello.requestsPerSecond > 0 ? round(decide.requestsPerSecond / hello.requestsPerSecond, 3) : 0,
        },
        ...(references !== undefined && { references }),
        upstream: {
          profiles: profiles.map((profile) => ({
            profile: profile.name,
            rates: steps
              .filter((s) => s.profile === profile.name)
              .map((s) => ({
                rate: s.rate,
                ...s.upstream,
                metricsInServerTiming: s.load.upstreamMetricsPerDecision,
              })),
          })),
          tokens: {
            issued: tokensIssued,
            runSeconds: round(runSeconds),
            lifetimeSeconds: tokenLifetimeS,
            allowed: Math.ceil(runSeconds / tokenLifetimeS),
          },
          policyNeeds,
        },
        memory: {
          rate: options.memoryRate,
          durationS: options.memoryDurationS,
          ...memory,
          load: {
            ok: memoryLoad?.ok ?? 0,
            achievedRate: memoryLoad?.achievedRate ?? 0,
            errors: memoryLoad?.errors ?? { timeouts: 0, connection: 0, dropped: 0, status: {} },
            latencyUs: memoryLoad?.latencyUs ?? {
              count: 0,
              p50: 0,
              p90: 0,
              p99: 0,
              p999: 0,
              max: 0,
              mean: 0,
            },
          },
        },
        // Filled in below, once the servers have stopped.
        policyEval: { available: false, reason: 'not run' },
        ...(overload !== undefined && { overload }),
      },
    };
    return result;
  } catch (error) {
    for (const server of servers) {
      process.stderr.write(`--- last output of ${server.name} ---\n${server.output()}\n`);
    }
    throw error;
  } finally {
    await generator?.stop().catch(() => {});
    for (const server of servers.reverse()) await server.stop().catch(() => {});
    await rm(scenarioDir, { recursive: true, force: true });
    for (const dir of stateDirs) rmSync(dir, { recursive: true, force: true });
  }
}

function memoryFigures(
  before: MemorySample,
  beforeAfterGc: MemorySample,
  samples: MemorySample[],
  after: MemorySample,
  afterAfterGc: MemorySample,
): Omit<BenchResult['scenarios']['memory'], 'rate' | 'durationS' | 'load'> {
  const all = samples.length > 0 ? samples : [after];
  const peak = all.reduce((a, b) => (b.rssMb > a.rssMb ? b : a));
  // Warm-up is the first quarter; compare the samples just after it with the last tenth of the run.
  const n = all.length;
  const warm = all.slice(Math.floor(n * 0.25), Math.max(Math.floor(n * 0.25) + 1, Math.ceil(n * 0.35)));
  const end = all.slice(Math.min(n - 1, Math.floor(n * 0.9)));
  const warmRss = median(warm.map((s) => s.rssMb));
  const endRss = median(end.map((s) => s.rssMb));
  return {
    before,
    beforeAfterGc,
    peak,
    after,
    afterAfterGc,
    rssGrowthPct: warmRss > 0 ? round(((endRss - warmRss) / warmRss) * 100) : 0,
    heapAfterGcGrowthPct:
      beforeAfterGc.heapUsedMb > 0
        ? round(((afterAfterGc.heapUsedMb - beforeAfterGc.heapUsedMb) / beforeAfterGc.heapUsedMb) * 100)
        : 0,
    samples,
  };
}
