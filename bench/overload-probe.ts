/**
 * A quick look at one overload rate, without the whole bench: the sandbox (lognormal upstream, p50
 * 15 ms, p99 60 ms), riskgate pinned and capped at `--cpu` of a core (after an uncapped warm-up),
 * then open-loop steps at fixed rates. Per step: answers, sheds, client timeouts, latencies from the
 * intended send, riskgate's CPU, and the kernel's listen-queue overflows (SYNs dropped because
 * riskgate did not accept in time, from /proc/net/netstat).
 *
 *   npx tsx bench/overload-probe.ts [--steps 650:15,65:10] [--cpu 0.25] [--riskgate-env K=V,...]
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { limitCpu, processCpuUs } from './bench-processes.ts';
import { demoDecideBodies, withBenchRig } from './bench-scenario.ts';
import type { OpenLoopResult } from './open-loop-generator.ts';
import { applyLatencyProfile } from './sandbox-control.ts';

const { values } = parseArgs({
  options: {
    steps: { type: 'string', default: '650:15,65:10' },
    cpu: { type: 'string', default: '0.25' },
    'riskgate-env': { type: 'string', default: '' },
  },
});
const steps = values.steps.split(',').map((s) => s.split(':').map(Number) as [number, number]);
const cpu = Number(values.cpu);
const extraEnv = Object.fromEntries(
  values['riskgate-env']
    .split(',')
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
const DEADLINE_MS = 300;

/** SYNs dropped because a listen queue was full, since boot (all sockets of the machine). */
function listenOverflows(): number | undefined {
  try {
    const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
    const i = lines.findIndex((l) => l.startsWith('TcpExt:'));
    const names = lines[i]!.split(/\s+/);
    const counts = lines[i + 1]!.split(/\s+/);
    return Number(counts[names.indexOf('ListenOverflows')]);
  } catch {
    return undefined;
  }
}

const ms = (us: number) => (us / 1000).toFixed(0);
await withBenchRig({ prefix: 'riskgate-overload-probe-', bodyVariants: 256 }, async (rig) => {
  const { sandbox, generator, apiKey } = rig;
  const riskgate = await rig.startRiskgate({
    // BENCH_RISKGATE_NODE_ARGS: e.g. `--cpu-prof --cpu-prof-dir=bench/results` to profile riskgate.
    nodeArgs: process.env.BENCH_RISKGATE_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? [],
    env: {
      RISKGATE_DECISION_LOG: 'off',
      RISKGATE_STATE_DIR: mkdtempSync(join(tmpdir(), 'riskgate-overload-probe-state-')),
      RISKGATE_RAT_CACHE_MS: '0',
      RISKGATE_WORKERS: '1',
      ...extraEnv,
    },
  });
  const bodies = await demoDecideBodies(sandbox.url, 256);
  await applyLatencyProfile(sandbox.url, { name: 'lognormal', p50Ms: 15, p99Ms: 60 });
  const open = (rate: number, durationS: number) =>
    generator.run<OpenLoopResult>({
      type: 'open',
      origin: riskgate.url,
      path: '/decide',
      headers: { authorization: `Bearer ${apiKey}` },
      bodies,
      rate,
      durationS,
      warmupS: 0,
      connections: 512,
      timeoutMs: 2000,
      maxInFlight: 20_000,
      goodputWithinMs: DEADLINE_MS + 50,
    });
  process.stderr.write('[probe] warm-up, uncapped: 300/s for 8 s\n');
  await open(300, 8);
  const cap = cpu > 0 ? limitCpu(riskgate.pid, cpu) : undefined;
  process.stderr.write(`[probe] ${cap?.note ?? 'riskgate uncapped'}\n`);
  try {
    for (const [rate, durationS] of steps) {
      const cpuBefore = processCpuUs(riskgate.pid) ?? 0;
      const overflowsBefore = listenOverflows();
      const startedAt = performance.now();
      const r = await open(rate, durationS);
      const cpuPct =
        (((processCpuUs(riskgate.pid) ?? 0) - cpuBefore) / ((performance.now() - startedAt) * 1000)) * 100;
      const overflows = overflowsBefore === undefined ? '?' : (listenOverflows() ?? 0) - overflowsBefore;
      console.log(
        `${rate}/s for ${durationS} s: 2xx ${r.ok}, within ${DEADLINE_MS + 50} ms ${r.withinBound}, ` +
          `503 ${r.errors.status['503'] ?? 0}, timeouts ${r.errors.timeouts}, connection errors ${r.errors.connection}; ` +
          `2xx p50/p99 ${ms(r.latencyUs.p50)}/${ms(r.latencyUs.p99)} ms, 503 p50/p99 ${ms(r.shedLatencyUs.p50)}/${ms(r.shedLatencyUs.p99)} ms, ` +
          `generator lag p99 ${ms(r.sendLagUs.p99)} ms; riskgate CPU ${cpuPct.toFixed(1)} % of a core; listen overflows ${overflows}`,
      );
    }
  } finally {
    cap?.release();
  }
});
