import { mkdtempSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { medianOf } from './bench-median.ts';
import {
  type Generator,
  planPinning,
  processCpuUs,
  type ServerProcess,
  startGenerator,
} from './bench-processes.ts';
import { benchApiKey, demoDecideBodies, startBenchRiskgate, startBenchSandbox } from './bench-scenario.ts';
import type { CannonResult } from './open-loop-generator.ts';

/**
 * What a refusal costs against what a decision costs, in one riskgate build, on one pinned core,
 * closed loop (autocannon), so the figures are per request with the loop busy (no idle overhead):
 *
 * - **shed**: `POST /decide` refused by admission control (a riskgate with `RISKGATE_MAX_IN_FLIGHT=1`
 *   whose one admitted decision waits on a vendor that answers in 10 s, so every other request is
 *   shed: the real listener, admission check, 503 and metrics);
 * - **hello**: `GET /bench/hello` on the same server (node:http + hono, no decision): the transport;
 * - **decide**: `POST /decide` on a second riskgate with the defaults, the vendor answering at once.
 *
 * Under a burst of k times capacity, riskgate spends the CPU of (k − 1) refusals per admitted
 * decision, so the share of capacity it can still serve is at most (1 − k·x) / (1 − x) with
 * x = shed ÷ decide: the ceiling the overload scenario's goodput goal (≥ 90 % at 5x) runs into.
 *
 *   npx tsx bench/shed-cost.ts [--duration 5] [--connections 32] [--runs 3] [--json]
 */

interface RunFigures {
  shedUs: number;
  helloUs: number;
  decideUs: number;
  shedPerS: number;
  helloPerS: number;
  decidePerS: number;
  /** Share of the shed run's answers that were 503 (should be ~1). */
  shedShare: number;
}

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '32' },
    runs: { type: 'string', default: '3' },
    json: { type: 'boolean', default: false },
  },
});
const durationS = Number(values.duration);
const connections = Number(values.connections);
const runs = Number(values.runs);

const progress = (m: string) => process.stderr.write(`[shed-cost] ${m}\n`);

async function main(): Promise<void> {
  const pinning = planPinning(true);
  progress(`pinning: ${pinning.note}`);
  const scenarioDir = await mkdtemp(join(tmpdir(), 'riskgate-shed-cost-'));
  const servers: ServerProcess[] = [];
  let generator: Generator | undefined;
  try {
    const sandbox = await startBenchSandbox({ dir: scenarioDir, bodyVariants: 1, cpu: pinning.sandbox });
    servers.push(sandbox);
    const bodies = await demoDecideBodies(sandbox.url, 1);
    const apiKey = benchApiKey();
    /** This tree's riskgate against the sandbox at `vendorUrl`. */
    const start = async (name: string, vendorUrl: string, extra: Record<string, string>) => {
      const server = await startBenchRiskgate({
        name,
        entry: 'bench/riskgate-under-bench.ts',
        cpu: pinning.riskgate,
        sandboxUrl: vendorUrl,
        apiKey,
        env: {
          RISKGATE_DECISION_LOG: 'off',
          RISKGATE_STATE_DIR: mkdtempSync(join(tmpdir(), 'riskgate-shed-cost-state-')),
          RISKGATE_WORKERS: '1',
          ...extra,
        },
      });
      servers.push(server);
      return server;
    };
    // The shedding riskgate's vendor is a second sandbox whose signals take 10 s: its one admitted
    // decision holds the only slot until its deadline, again and again.
    const slow = await startBenchSandbox({
      name: 'slow-sandbox',
      dir: scenarioDir,
      bodyVariants: 1,
      cpu: pinning.sandbox,
    });
    servers.push(slow);
    await setLatency(slow.url, 10_000);
    const slowBodies = await demoDecideBodies(slow.url, 1);
    const shedServer = await start('riskgate-shedding', slow.url, { RISKGATE_MAX_IN_FLIGHT: '1' });
    const deciding = await start('riskgate', sandbox.url, {});
    generator = await startGenerator(pinning.load);
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
    const cannon = (server: ServerProcess, method: 'GET' | 'POST', path: string, b: string[], s: number) =>
      generator!.run<CannonResult>({
        type: 'cannon',
        url: `${server.url}${path}`,
        method,
        headers: method === 'POST' ? headers : {},
        bodies: b,
        connections,
        durationS: s,
      });
    const measure = async (
      server: ServerProcess,
      method: 'GET' | 'POST',
      path: string,
      b: string[],
    ): Promise<{ usPerRequest: number; perS: number; result: CannonResult }> => {
      const before = processCpuUs(server.pid)!;
      const result = await cannon(server, method, path, b, durationS);
      const cpuUs = processCpuUs(server.pid)! - before;
      return {
        usPerRequest: Math.round((cpuUs / Math.max(1, result.requests)) * 10) / 10,
        perS: Math.round(result.requests / result.durationS),
        result,
      };
    };
    // Warm-up: the JIT and the connections.
    progress('warming up');
    await cannon(shedServer, 'POST', '/decide', slowBodies, 2);
    await cannon(shedServer, 'GET', '/bench/hello', [], 2);
    await cannon(deciding, 'POST', '/decide', bodies, 2);

    const figures: RunFigures[] = [];
    for (let run = 1; run <= runs; run++) {
      progress(`run ${run}/${runs}`);
      const shed = await measure(shedServer, 'POST', '/decide', slowBodies);
      const hello = await measure(shedServer, 'GET', '/bench/hello', []);
      const decide = await measure(deciding, 'POST', '/decide', bodies);
      figures.push({
        shedUs: shed.usPerRequest,
        helloUs: hello.usPerRequest,
        decideUs: decide.usPerRequest,
        shedPerS: shed.perS,
        helloPerS: hello.perS,
        decidePerS: decide.perS,
        shedShare:
          Math.round(((shed.result.statusCodes['503'] ?? 0) / Math.max(1, shed.result.requests)) * 1000) /
          1000,
      });
    }
    const med = medianOf(figures);
    const x = med.shedUs / med.decideUs;
    const ceiling = (k: number) => Math.max(0, (1 - k * x) / (1 - x));
    const summary = {
      connections,
      durationS,
      runs: figures,
      median: med,
      shedOverDecide: Math.round(x * 1000) / 1000,
      goodputCeiling: { '2x': round3(ceiling(2)), '5x': round3(ceiling(5)) },
    };
    if (values.json) {
      process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
      return;
    }
    const lines = [
      `| run | shed µs CPU/request (/s, share 503) | hello µs (/s) | decide µs (/s) |`,
      `|---|---:|---:|---:|`,
      ...figures.map(
        (f, i) =>
          `| ${i + 1} | ${f.shedUs} (${f.shedPerS}, ${f.shedShare}) | ${f.helloUs} (${f.helloPerS}) | ${f.decideUs} (${f.decidePerS}) |`,
      ),
      '',
      `median: shed ${summary.median.shedUs} µs, hello ${summary.median.helloUs} µs, decide ${summary.median.decideUs} µs; shed/decide ${summary.shedOverDecide}; goodput ceiling at 2x ${(summary.goodputCeiling['2x'] * 100).toFixed(1)} %, at 5x ${(summary.goodputCeiling['5x'] * 100).toFixed(1)} % of capacity`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await generator?.stop();
    for (const s of servers.reverse()) await s.stop();
    await rm(scenarioDir, { recursive: true, force: true });
  }
}

function round3(v: number): number {
  return Math.round(v * 1000) / 1000;
}

async function setLatency(sandboxUrl: string, ms: number): Promise<void> {
  const rules = ['GET /api/v1/signals/*', 'POST /api/v1/signals/*', 'GET /srv/admin/v1/*'].map((route) => ({
    route,
    latency: { kind: 'fixed', ms },
  }));
  const response = await fetch(`${sandboxUrl}/sandbox/faults`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ rules }),
    signal: AbortSignal.timeout(5000),
  });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`sandbox faults: ${response.status}`);
}

await main();
