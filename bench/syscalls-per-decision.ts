/**
 * System calls, thread wake-ups and upstream requests per answered decision (issue 32: riskgate
 * against the peer and the FLOOR at a low open-loop rate, where each decision takes its own turns of
 * the event loop and a turn's syscalls are dear on this VM). For each build, in alternating order:
 * a fresh server pinned to its core, a warm-up, then an open loop on `POST /decide` while
 * `perf trace -s -p <pid>` (kernel tracepoints, no ptrace: the server runs at its own speed)
 * counts every syscall by thread; CPU (of it kernel), context switches and page faults by thread
 * come from `/proc/<pid>/task/*`, upstream requests from the sandbox's counters. Everything is
 * divided by the 2xx answers of the measured window. Results: bench/RESULTS.md, "syscalls and
 * wake-ups per decision".
 *
 *   npx tsx bench/syscalls-per-decision.ts [--builds allmem=allmem,peer=peer,floor=floor]
 *     [--rate 200] [--duration 10] [--warmup 3] [--rounds 1] [--no-shed]
 *
 * A build is `name=kind[:entry]`: kind `shipped` (the hot-path bench's settings) or `allmem` (that
 * with the decision store and log off, the outbox and database in memory), entry a tree's
 * bench/riskgate-under-bench.ts (default this tree's); or kind `peer` / `floor` (bench/*-server.ts);
 * a trailing `@S` gives that build its own warm-up of S seconds (`allmem40=allmem@40`).
 * Needs `perf` with tracepoint access (root, or perf_event_paranoid ≤ -1).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, type ServerProcess, startServer } from './bench-processes.ts';
import { demoDecideBodies, withBenchRig } from './bench-scenario.ts';
import type { OpenLoopResult } from './open-loop-generator.ts';
import {
  getSandboxStats,
  isUpstreamRoute,
  resetSandbox,
  resetSandboxStats,
  sandboxVendorEnv,
} from './sandbox-control.ts';

const { values } = parseArgs({
  options: {
    builds: { type: 'string', default: 'allmem=allmem,peer=peer,floor=floor' },
    rounds: { type: 'string', default: '1' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '3' },
    rate: { type: 'string', default: '200' },
    /** A command run during each measured window beside perf trace, `{pid}` and `{build}` replaced; SIGINT at the end. */
    with: { type: 'string' },
    /** Extra node flags for riskgate builds, space-separated (`{build}` replaced), e.g. V8 logging. */
    'node-args': { type: 'string' },
    /**
     * riskgate sheds only what queued past its whole deadline (RISKGATE_MAX_EVENT_LOOP_DELAY_MS=0):
     * on a shared machine the event-loop delay sheds a share of requests that differs run to run,
     * and every figure here is per 2xx.
     */
    'no-shed': { type: 'boolean', default: false },
  },
});
type Kind = 'shipped' | 'allmem' | 'peer' | 'floor';
const builds = values.builds.split(',').map((b) => {
  const [name, specAndWarmup] = b.split('=') as [string, string];
  const [spec, warmup] = specAndWarmup.split('@') as [string, string | undefined];
  const colon = spec.indexOf(':');
  const kind = (colon < 0 ? spec : spec.slice(0, colon)) as Kind;
  const entry = resolve(colon < 0 ? 'bench/riskgate-under-bench.ts' : spec.slice(colon + 1));
  return { name, kind, entry, warmupS: warmup === undefined ? undefined : Number(warmup) };
});
const rounds = Number(values.rounds);
const durationS = Number(values.duration);
const warmupS = Number(values.warmup);
const rate = Number(values.rate);
const ALLMEM = {
  RISKGATE_DECISION_STORE: 'off',
  RISKGATE_DECISION_LOG: 'off',
  RISKGATE_OUTBOX: 'memory',
  RISKGATE_DATABASE: 'memory',
};

/** Syscall counts by thread name (threads of one name summed), from `perf trace -s`'s summary. */
type Counts = Map<string, Map<string, number>>;

function parsePerfSummary(text: string, names: Map<number, string>): Counts {
  const counts: Counts = new Map();
  let thread: Map<string, number> | undefined;
  for (const line of text.split('\n')) {
    const head = /^\s*(\S.*?) \((\d+)\), \d+ events/.exec(line);
    if (head) {
      const name = names.get(Number(head[2])) ?? head[1]!;
      thread = counts.get(name) ?? new Map();
      counts.set(name, thread);
      continue;
    }
    const row = /^\s+([a-z_0-9]+)\s+(\d+)\s+\d+\s+[\d.]+/.exec(line);
    if (row && thread) thread.set(row[1]!, (thread.get(row[1]!) ?? 0) + Number(row[2]));
  }
  return counts;
}

/** Thread id → name (`comm`); voluntary + involuntary context switches and CPU µs by name. */
function threads(pid: number): {
  names: Map<number, string>;
  switches: Map<string, number>;
  cpuUs: Map<string, number>;
  sysUs: Map<string, number>;
  faults: Map<string, number>;
} {
  const names = new Map<number, string>();
  const switches = new Map<string, number>();
  const cpuUs = new Map<string, number>();
  const sysUs = new Map<string, number>();
  const faults = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      const n = [...status.matchAll(/ctxt_switches:\s+(\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const us = (Number(fields[11]) + Number(fields[12])) * 10_000;
      names.set(Number(tid), name);
      switches.set(name, (switches.get(name) ?? 0) + n);
      cpuUs.set(name, (cpuUs.get(name) ?? 0) + us);
      sysUs.set(name, (sysUs.get(name) ?? 0) + Number(fields[12]) * 10_000);
      // minflt and majflt: a page fault is a trip into the kernel as dear as a syscall, or dearer.
      faults.set(name, (faults.get(name) ?? 0) + Number(fields[7]) + Number(fields[9]));
    } catch {
      // the thread ended
    }
  }
  return { names, switches, cpuUs, sysUs, faults };
}

async function perfTrace(pid: number): Promise<{ child: ChildProcess; done: Promise<string> }> {
  const child = spawn('perf', ['trace', '-s', '-p', String(pid)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString('utf8');
  });
  child.stderr.on('data', (c: Buffer) => {
    out += c.toString('utf8');
  });
  const done = new Promise<string>((res) => child.once('exit', () => res(out)));
  // perf attaches to the tracepoints before it reads; give it a moment (it prints nothing until the end).
  await new Promise((r) => setTimeout(r, 1000));
  return { child, done };
}

const load = () => loadavg()[0]!.toFixed(2);
const lines: string[] = [];
await withBenchRig({ prefix: 'riskgate-syscalls-', bodyVariants: 256 }, async (rig) => {
  const { sandbox, generator, apiKey } = rig;
  console.log(`pinning: ${rig.pinning.note}; open loop ${rate}/s, ${durationS} s after ${warmupS} s`);
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? builds : [...builds].reverse();
    for (const build of order) {
      await resetSandbox(sandbox.url);
      const bodies = await demoDecideBodies(sandbox.url, 256);
      const stateDir = mkdtempSync(join(tmpdir(), 'riskgate-syscalls-state-'));
      let server: ServerProcess;
      let headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
      if (build.kind === 'peer' || build.kind === 'floor') {
        const port = await freePort();
        server = await startServer({
          name: build.name,
          entry: `bench/${build.kind}-server.ts`,
          port,
          cpu: rig.pinning.riskgate,
          readyPath: '/bench/hello',
          env: {
            ...sandboxVendorEnv(sandbox.url),
            RISKGATE_RAT_BATCH_WINDOW_MS: '1',
            REFERENCE_STATE_DIR: stateDir,
            ...(build.kind === 'floor'
              ? { FLOOR_PORT: String(port) }
              : { PEER_PORT: String(port), PEER_API_KEY: apiKey }),
          },
        });
        if (build.kind === 'floor') headers = {};
      } else {
        server = await rig.startRiskgate({
          name: `riskgate ${build.name}`,
          entry: build.entry,
          readyTimeoutMs: 120_000,
          nodeArgs: (values['node-args'] ?? '')
            .replaceAll('{build}', build.name)
            .split(' ')
            .filter((a) => a !== ''),
          env: {
            RISKGATE_STATE_DIR: stateDir,
            RISKGATE_DECISION_LOG: join(stateDir, 'decisions.ndjson'),
            RISKGATE_RAT_BATCH_WINDOW_MS: '1',
            RISKGATE_RAT_CACHE_MS: '0',
            ...(build.kind === 'allmem' ? ALLMEM : {}),
            ...(values['no-shed'] && { RISKGATE_MAX_EVENT_LOOP_DELAY_MS: '0' }),
          },
        });
      }
      try {
        const job = (seconds: number) =>
          generator.run<OpenLoopResult>({
            type: 'open',
            origin: server.url,
            path: '/decide',
            headers,
            bodies,
            rate,
            durationS: seconds,
            warmupS: 0,
            connections: 64,
            maxInFlight: 20_000,
            timeoutMs: 5000,
          });
        const warm = build.warmupS ?? warmupS;
        if (warm > 0) await job(warm);
        await resetSandboxStats(sandbox.url);
        const loadBefore = load();
        const trace = await perfTrace(server.pid);
        const extra =
          values.with === undefined
            ? undefined
            : spawn(
                'sh',
                ['-c', values.with.replaceAll('{pid}', String(server.pid)).replaceAll('{build}', build.name)],
                {
                  stdio: 'inherit',
                  detached: true,
                },
              );
        const before = threads(server.pid);
        const r = await job(durationS);
        const after = threads(server.pid);
        trace.child.kill('SIGINT');
        if (extra?.pid !== undefined) {
          process.kill(-extra.pid, 'SIGINT');
          await new Promise((res) => extra.once('exit', res));
        }
        const counts = parsePerfSummary(await trace.done, after.names);
        const stats = await getSandboxStats(sandbox.url);
        const ok = r.ok;
        const per = (n: number) => (n / ok).toFixed(2);
        const answered = ok + Object.values(r.errors.status).reduce((a, b) => a + b, 0);
        let upstream = 0;
        const routes: string[] = [];
        for (const [route, byStatus] of Object.entries(stats.routes)) {
          if (!isUpstreamRoute(route)) continue;
          const n = Object.values(byStatus).reduce((a, b) => a + b, 0);
          upstream += n;
          routes.push(`${route} ${per(n)}`);
        }
        const shed = Object.values(r.errors.status).reduce((a, b) => a + b, 0);
        lines.push(
          `### ${build.name} (round ${round}): ${ok} 2xx, ${shed} non-2xx ${JSON.stringify(r.errors.status)}, t${r.errors.timeouts}, p99 ${(r.latencyUs.p99 / 1000).toFixed(1)} ms, load ${loadBefore} → ${load()}`,
        );
        lines.push(`upstream requests per 2xx ${per(upstream)} (${routes.sort().join('; ')})`);
        lines.push(
          '| thread | CPU µs per 2xx (of it kernel) | syscalls per 2xx | context switches per 2xx | page faults per 2xx | top syscalls per 2xx |',
        );
        lines.push('|---|---:|---:|---:|---:|---|');
        const delta = (m: 'switches' | 'cpuUs' | 'sysUs' | 'faults', name: string) =>
          (after[m].get(name) ?? 0) - (before[m].get(name) ?? 0);
        let all = 0;
        const allByName = new Map<string, number>();
        for (const [name, bySyscall] of [...counts].sort()) {
          const total = [...bySyscall.values()].reduce((a, b) => a + b, 0);
          all += total;
          for (const [s, n] of bySyscall) allByName.set(s, (allByName.get(s) ?? 0) + n);
          const sw = delta('switches', name);
          const top = [...bySyscall]
            .sort((a, b) => b[1] - a[1])
            .slice(0, 8)
            .map(([s, n]) => `${s} ${per(n)}`)
            .join(', ');
          lines.push(
            `| ${name} | ${per(delta('cpuUs', name)).replace(/\.\d+$/, '')} (${per(delta('sysUs', name)).replace(/\.\d+$/, '')}) | ${per(total)} | ${per(sw)} | ${per(delta('faults', name))} | ${top} |`,
          );
        }
        const switchesAll =
          [...after.switches.values()].reduce((a, b) => a + b, 0) -
          [...before.switches.values()].reduce((a, b) => a + b, 0);
        const cpuAll =
          [...after.cpuUs.values()].reduce((a, b) => a + b, 0) -
          [...before.cpuUs.values()].reduce((a, b) => a + b, 0);
        const faultsAll =
          [...after.faults.values()].reduce((a, b) => a + b, 0) -
          [...before.faults.values()].reduce((a, b) => a + b, 0);
        lines.push(
          `| all | ${per(cpuAll).replace(/\.\d+$/, '')} | ${per(all)} | ${per(switchesAll)} | ${per(faultsAll)} | per answer of any status: ${(all / answered).toFixed(2)} syscalls, ${(switchesAll / answered).toFixed(2)} switches |`,
        );
        lines.push(
          `all threads by syscall per 2xx: ${[...allByName]
            .sort((a, b) => b[1] - a[1])
            .map(([s, n]) => `${s} ${per(n)}`)
            .join(', ')}`,
        );
        lines.push('');
        console.log(lines.slice(-(counts.size + 7)).join('\n'));
      } finally {
        await server.stop();
      }
      await rm(stateDir, { recursive: true, force: true });
    }
  }
});
