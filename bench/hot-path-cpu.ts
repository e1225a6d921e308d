/**
 * riskgate's CPU per answered decision, as shipped, for one or more builds measured in alternating
 * order (issue 32: the hot path's CPU, before and after). The sandbox runs once, pinned beside the
 * load generator; each run starts a fresh riskgate (`bench/riskgate-under-bench.ts` of the build's
 * tree) pinned to its own core with the shipped configuration (the decision log to a file in its
 * state directory, the decision store and the outbox at their defaults, the default process
 * model), resets the sandbox, warms up, then drives a closed loop on `POST /decide` and divides
 * riskgate's CPU (its process tree from /proc, over the measured run) by its 2xx answers; the
 * main thread's alone beside it (its event loop: the HTTP edge, the decision path, the answer).
 *
 *   npx tsx bench/hot-path-cpu.ts [--builds before=/tmp/before/bench/riskgate-under-bench.ts,after=bench/riskgate-under-bench.ts]
 *     [--rounds 3] [--duration 10] [--warmup 3] [--connections 16 | --rate 60 [--warmup-burst 5]] [--profile-dir DIR]
 *     [--keep-decision-logs DIR] [--keep-output DIR]
 *     [--thread decision-store]
 *
 * A build's entry may carry node options after it, each after a `~`
 * (`semi64=bench/riskgate-under-bench.ts~--max-semi-space-size=64`, `peer~--single-threaded-gc`):
 * one build under other V8 settings, or with `--perf-basic-prof` for `perf`, in the same run.
 *
 * A build `name=peer` runs the peer (bench/peer-server.ts) the same way instead, for a differential
 * profile at the same load (issue 32: where riskgate's CPU per 2xx goes beyond the peer's).
 *
 * `--thread NAME` (repeatable, comma-separated) adds a column per thread name: the CPU of riskgate's
 * threads of that name (`/proc/<pid>/task/<tid>/comm`) per 2xx, e.g. `decision-store`, the decision
 * store's writer (src/decision-store/store-thread.ts names it); and, with it, the records the store
 * wrote meanwhile (`/healthz` `decisionStore.written`: a shed decision is stored too) and each
 * thread's CPU per record stored. The count is read as the run ends, up to a batch (a second)
 * behind at both ends of the run alike.
 *
 * `--keep-decision-logs DIR` keeps each run's decision log as `DIR/<build>-<round>.ndjson` (its
 * `lock_out_user` outcome lines' `elapsedMs` are the lock-out delay: from the append, which is the
 * answer, to the completion committed).
 *
 * `--keep-output DIR` writes what each riskgate (or peer) prints from the end of its start-up on to
 * `DIR/<build>-<round>.log`: V8's traces go to stdout (`~--trace-gc-nvp`, `~--trace-opt~--trace-deopt`),
 * and the start-up's own lines (tsx compiling, first tier-ups) are left out.
 *
 * `--profile-dir` adds `--cpu-prof` to every riskgate started (one profile per run, named
 * `<build>-<round>.cpuprofile`); read them with `bench/cpu-profile-top.ts --last-ms <duration>`.
 */
import { createWriteStream, mkdirSync, mkdtempSync, readdirSync, renameSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from './bench-median.ts';
import {
  freePort,
  mainThreadCpuUs,
  processTree,
  processTreeCpuUs,
  type ServerProcess,
  startServer,
  threadCpuUs,
} from './bench-processes.ts';
import { demoDecideBodies, withBenchRig } from './bench-scenario.ts';
import type { ClosedLoopResult, OpenLoopResult } from './open-loop-generator.ts';
import { resetSandbox, sandboxVendorEnv } from './sandbox-control.ts';

const { values } = parseArgs({
  options: {
    builds: { type: 'string', default: 'this=bench/riskgate-under-bench.ts' },
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '3' },
    'warmup-burst': { type: 'string', default: '0' },
    connections: { type: 'string', default: '16' },
    rate: { type: 'string' },
    'profile-dir': { type: 'string' },
    'keep-decision-logs': { type: 'string' },
    'keep-output': { type: 'string' },
    thread: { type: 'string', multiple: true, default: [] },
  },
});
const threadNames = values.thread.flatMap((t) => t.split(',')).filter((t) => t !== '');
/** A build's entry is a tree's bench/riskgate-under-bench.ts, or `peer` for bench/peer-server.ts. */
const builds = values.builds.split(',').map((b) => {
  const at = b.indexOf('=');
  const [entry = '', ...nodeArgs] = b.slice(at + 1).split('~');
  return { name: b.slice(0, at), entry: entry === 'peer' ? entry : resolve(entry), nodeArgs };
});
const rounds = Number(values.rounds);
const durationS = Number(values.duration);
const warmupS = Number(values.warmup);
/**
 * Seconds of closed loop (`--connections`) before the warm-up of an open-loop run: at 200/s a 3 s
 * warm-up is 600 decisions, and V8 was still compiling riskgate's code with TurboFan 30 s into a run
 * (issue 32, session 11), so the measured window carried the compiler. A burst reaches thousands of
 * decisions in seconds. 0: none.
 */
const warmupBurstS = Number(values['warmup-burst']);
const connections = Number(values.connections);
/** An open loop at this rate instead of the closed loop: background work is shared by as many answers in every run. */
const rate = values.rate === undefined ? undefined : Number(values.rate);
const profileDir = values['profile-dir'] === undefined ? undefined : resolve(values['profile-dir']);
if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true });

const load = () => loadavg()[0]!.toFixed(2);
/** Records the decision store has written so far (`/healthz`: open on every surface). */
async function storedRecords(origin: string): Promise<number> {
  const health = (await (await fetch(`${origin}/healthz`)).json()) as {
    decisionStore?: { written?: number };
  };
  return health.decisionStore?.written ?? Number.NaN;
}
type Measured = Pick<ClosedLoopResult, 'ok' | 'requestsPerSecond' | 'non2xx'> & {
  errors: { timeouts: number; connection: number; status: Record<string, number> };
  latencyMs: { p99: number };
};
const results = new Map<string, number[]>(builds.map((b) => [b.name, []]));
const mainResults = new Map<string, number[]>(builds.map((b) => [b.name, []]));
/** Per build, per `--thread` name: CPU µs per 2xx of each run. */
const threadResults = new Map(builds.map((b) => [b.name, threadNames.map(() => [] as number[])]));
await withBenchRig({ prefix: 'riskgate-hot-path-', bodyVariants: 256 }, async (rig) => {
  const { sandbox, generator, apiKey } = rig;
  console.log(
    `pinning: ${rig.pinning.note}; ${rate === undefined ? `closed loop ${connections} connections` : `open loop ${rate}/s`}, ${durationS} s after ${warmupS} s`,
  );
  console.log(
    `| round | build | load avg before → after | processes | 2xx/s | non-2xx | p99 ms | CPU µs per 2xx | main thread µs per 2xx |${threadNames.length === 0 ? '' : ` stored${threadNames.map((t) => ` | ${t} µs per 2xx (per stored)`).join('')} |`}`,
  );
  console.log(
    `|---|---|---|---:|---:|---:|---:|---:|---:|${threadNames.length === 0 ? '' : `---:|${threadNames.map(() => '---:|').join('')}`}---|`,
  );
  /** The peer (bench/peer-server.ts) on riskgate's core, as bench/syscalls-per-decision.ts starts it. */
  const startPeer = async (stateDir: string, nodeArgs: string[]): Promise<ServerProcess> => {
    const port = await freePort();
    return await startServer({
      name: 'peer',
      entry: 'bench/peer-server.ts',
      port,
      cpu: rig.pinning.riskgate,
      readyPath: '/bench/hello',
      nodeArgs,
      readyTimeoutMs: 120_000,
      env: {
        ...sandboxVendorEnv(sandbox.url),
        RISKGATE_RAT_BATCH_WINDOW_MS: '1',
        REFERENCE_STATE_DIR: stateDir,
        PEER_PORT: String(port),
        PEER_API_KEY: apiKey,
      },
    });
  };
  for (let round = 1; round <= rounds; round++) {
    // Alternating order: no build always runs first in a round.
    const order = round % 2 === 1 ? builds : [...builds].reverse();
    for (const build of order) {
      await resetSandbox(sandbox.url);
      const bodies = await demoDecideBodies(sandbox.url, 256);
      const stateDir = mkdtempSync(join(tmpdir(), 'riskgate-hot-path-state-'));
      const profiling = profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${stateDir}/prof`];
      const riskgate: ServerProcess =
        build.entry === 'peer'
          ? await startPeer(stateDir, [...build.nodeArgs, ...profiling])
          : await rig.startRiskgate({
              name: `riskgate ${build.name}`,
              entry: build.entry,
              nodeArgs: ['--expose-gc', ...build.nodeArgs, ...profiling],
              // Start-up on one shared core at load 10+ (tsx compiling, the profiler on) took over 30 s.
              readyTimeoutMs: 120_000,
              env: {
                RISKGATE_STATE_DIR: stateDir,
                RISKGATE_DECISION_LOG: join(stateDir, 'decisions.ndjson'),
                RISKGATE_RAT_BATCH_WINDOW_MS: '1',
                RISKGATE_RAT_CACHE_MS: '0',
              },
            });
      const keepOutput = values['keep-output'];
      if (keepOutput !== undefined) {
        mkdirSync(keepOutput, { recursive: true });
        const file = createWriteStream(join(keepOutput, `${build.name}-${round}.log`));
        riskgate.child.stdout?.pipe(file, { end: false });
        riskgate.child.stderr?.pipe(file, { end: false });
        riskgate.child.once('close', () => file.end());
      }
      try {
        const job = {
          type: 'closed' as const,
          origin: riskgate.url,
          path: '/decide',
          headers: { authorization: `Bearer ${apiKey}` },
          bodies,
          connections,
          timeoutMs: 5000,
        };
        const measure = async (seconds: number): Promise<Measured> => {
          if (rate === undefined) return generator.run<ClosedLoopResult>({ ...job, durationS: seconds });
          const o = await generator.run<OpenLoopResult>({
            ...job,
            type: 'open',
            rate,
            durationS: seconds,
            warmupS: 0,
            connections: 64,
            maxInFlight: 20_000,
          });
          const non2xx = Object.values(o.errors.status).reduce((a, b) => a + b, 0);
          return {
            ok: o.ok,
            requestsPerSecond: o.ok / seconds,
            non2xx,
            errors: o.errors,
            latencyMs: { p99: o.latencyUs.p99 / 1000 },
          };
        };
        if (rate !== undefined && warmupBurstS > 0)
          await generator.run<ClosedLoopResult>({ ...job, durationS: warmupBurstS });
        if (warmupS > 0) await measure(warmupS);
        const loadBefore = load();
        const cpuBefore = processTreeCpuUs(riskgate.pid) ?? 0;
        const mainBefore = mainThreadCpuUs(riskgate.pid) ?? 0;
        const threadsBefore = threadNames.map((t) => threadCpuUs(riskgate.pid, t) ?? 0);
        const storedBefore = threadNames.length === 0 ? 0 : await storedRecords(riskgate.url);
        const r = await measure(durationS);
        const threadsUs = threadNames.map((t, i) => (threadCpuUs(riskgate.pid, t) ?? 0) - threadsBefore[i]!);
        const stored = threadNames.length === 0 ? 0 : (await storedRecords(riskgate.url)) - storedBefore;
        const threadsPerOk = threadsUs.map((us) => us / r.ok);
        const cpuUs = (processTreeCpuUs(riskgate.pid) ?? 0) - cpuBefore;
        const mainUs = (mainThreadCpuUs(riskgate.pid) ?? 0) - mainBefore;
        const perOk = r.ok > 0 ? cpuUs / r.ok : Number.NaN;
        const mainPerOk = r.ok > 0 ? mainUs / r.ok : Number.NaN;
        results.get(build.name)!.push(perOk);
        mainResults.get(build.name)!.push(mainPerOk);
        for (const [i, x] of threadsPerOk.entries()) threadResults.get(build.name)![i]!.push(x);
        console.log(
          `| ${round} | ${build.name} | ${loadBefore} → ${load()} | ${processTree(riskgate.pid).length} | ` +
            `${r.requestsPerSecond.toFixed(0)} | ${r.non2xx + r.errors.timeouts + r.errors.connection} | ` +
            `${r.latencyMs.p99.toFixed(1)} | ${perOk.toFixed(0)} | ${mainPerOk.toFixed(0)} | ` +
            `${threadNames.length === 0 ? '' : `${stored} | ${threadsUs.map((us, i) => `${threadsPerOk[i]!.toFixed(0)} (${(us / stored).toFixed(0)}) | `).join('')}`}${JSON.stringify(r.errors.status)} t${r.errors.timeouts} c${r.errors.connection} |`,
        );
      } finally {
        await riskgate.stop();
      }
      if (profileDir !== undefined) {
        for (const file of readdirSync(join(stateDir, 'prof')))
          renameSync(join(stateDir, 'prof', file), join(profileDir, `${build.name}-${round}-${file}`));
      }
      if (values['keep-decision-logs'] !== undefined && build.entry !== 'peer') {
        mkdirSync(values['keep-decision-logs'], { recursive: true });
        renameSync(
          join(stateDir, 'decisions.ndjson'),
          join(values['keep-decision-logs'], `${build.name}-${round}.ndjson`),
        );
      }
      await rm(stateDir, { recursive: true, force: true });
    }
  }
  for (const [name, xs] of results) {
    const main = mainResults.get(name)!;
    console.log(
      `${name}: median ${median(xs).toFixed(0)} µs per 2xx (${xs.map((x) => x.toFixed(0)).join(', ')}); ` +
        `main thread ${median(main).toFixed(0)} (${main.map((x) => x.toFixed(0)).join(', ')})` +
        threadNames
          .map((t, i) => {
            const xs = threadResults.get(name)![i]!;
            return `; ${t} ${median(xs).toFixed(0)} (${xs.map((x) => x.toFixed(0)).join(', ')})`;
          })
          .join(''),
    );
  }
});
