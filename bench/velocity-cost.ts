import { parseArgs } from 'node:util';
import { createClient } from 'redis';
import { createFeatureReader } from '../src/features/feature-reader.ts';
import type { FeatureStore } from '../src/features/feature-store.ts';
import { MemoryFeatureStore } from '../src/features/memory-feature-store.ts';
import { RedisFeatureStore } from '../src/features/redis-feature-store.ts';
import {
  type CompiledCounter,
  compileCounter,
  planCounters,
  recordOps,
} from '../src/features/velocity-counters.ts';
import type { PolicyRequest } from '../src/policy/policy-types.ts';
import { startRedis } from '../test/support/redis-server.ts';
import { median } from './bench-median.ts';
import { mulberry32 } from './seeded-random.ts';

/**
 * What five velocity counters cost a decision, on each store: the decision's part (hash the keys,
 * read every counter in one call, build the values, count after the answer) timed per decision,
 * riskgate's CPU per decision (process.cpuUsage over the run), and on Redis the server's CPU per
 * decision too (INFO cpu), since it is a cost the deployment pays. Traffic: 20,000 accounts from
 * 5,000 addresses, drawn at random, so most counter instances are warm but many are new.
 * Starts its own redis-server (Debian's `redis-server`) on a free port.
 *
 *   npx tsx bench/velocity-cost.ts [--decisions 20000] [--concurrency 1,32] [--runs 3] [--json]
 */

const COUNTERS: CompiledCounter[] = [
  compileCounter('accountsPerIp', { key: ['ip'], count: 'distinct', of: 'accountId', windowMs: 600_000 }),
  compileCounter('ipsPerAccount', { key: ['accountId'], count: 'distinct', of: 'ip', windowMs: 3_600_000 }),
  compileCounter('attemptsPerAccount', { key: ['accountId'], count: 'decisions', windowMs: 600_000 }),
  compileCounter('attemptsPerIp', { key: ['ip'], count: 'decisions', windowMs: 3_600_000 }),
  compileCounter('deniesPerIp', { key: ['ip'], count: 'denies', windowMs: 86_400_000 }),
];

interface Figures {
  store: string;
  concurrency: number;
  decisions: number;
  /** Per decision, microseconds: the read (plan, one round trip, values). */
  readP50Us: number;
  readP99Us: number;
  /** riskgate process CPU per decision (read and count), microseconds. */
  cpuUsPerDecision: number;
  /** Redis server CPU per decision, microseconds (0 for memory). */
  serverCpuUsPerDecision: number;
}

function request(i: number, rnd: () => number): PolicyRequest {
  const account = Math.floor(rnd() * 20_000);
  const ip = Math.floor(rnd() * 5_000);
  return {
    accountId: `account-${account}`,
    ip: `10.${(ip >> 8) & 255}.${ip & 255}.${i % 7}`,
    context: {},
  };
}

async function serverCpuSeconds(url: string | undefined): Promise<number> {
  if (url === undefined) return 0;
  const c = createClient({ url });
  await c.connect();
  const info = await c.info('cpu');
  await c.close();
  const get = (k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return get('used_cpu_sys') + get('used_cpu_user');
}

async function measure(
  store: FeatureStore,
  name: string,
  url: string | undefined,
  decisions: number,
  concurrency: number,
): Promise<Figures> {
  const reader = createFeatureReader({ store });
  const rnd = mulberry32(42);
  const samples = new Float64Array(decisions);
  let next = 0;
  const one = async () => {
    for (;;) {
      const i = next++;
      if (i >= decisions) return;
      const req = request(i, rnd);
      const t0 = performance.now();
      const plan = planCounters(COUNTERS, req);
      const r = await reader.readVelocity(plan, Date.now());
      samples[i] = (performance.now() - t0) * 1000;
      if (!r.ok) throw r.error;
      reader.record(plan, i % 10 === 0 ? 'deny' : 'allow', Date.now());
    }
  };
  // Warm-up: whole decisions (read and count) until the code is compiled, not counted.
  const warm = mulberry32(7);
  for (let i = 0; i < 5000; i++) {
    const plan = planCounters(COUNTERS, request(i, warm));
    await reader.readVelocity(plan, Date.now());
    await store.recordCounters(recordOps(plan, 'allow'), Date.now());
  }
  const serverBefore = await serverCpuSeconds(url);
  const cpuBefore = process.cpuUsage();
  await Promise.all(Array.from({ length: concurrency }, one));
  // Let the last counts land before reading the CPU.
  await store.readCounters([], Date.now()).catch(() => {});
  await new Promise((r) => setTimeout(r, 50));
  const cpu = process.cpuUsage(cpuBefore);
  const serverAfter = await serverCpuSeconds(url);
  samples.sort();
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
  return {
    store: name,
    concurrency,
    decisions,
    readP50Us: Math.round(at(0.5) * 10) / 10,
    readP99Us: Math.round(at(0.99) * 10) / 10,
    cpuUsPerDecision: Math.round(((cpu.user + cpu.system) / decisions) * 10) / 10,
    serverCpuUsPerDecision: Math.round(((serverAfter - serverBefore) * 1e6 * 10) / decisions) / 10,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      decisions: { type: 'string', default: '20000' },
      concurrency: { type: 'string', default: '1,32' },
      runs: { type: 'string', default: '3' },
      json: { type: 'boolean', default: false },
    },
  });
  const decisions = Number(values.decisions);
  const levels = values.concurrency.split(',').map(Number);
  const runs = Number(values.runs);
  const redis = await startRedis();
  const results: Figures[] = [];
  try {
    for (const concurrency of levels) {
      for (const kind of ['memory', 'redis'] as const) {
        const perRun: Figures[] = [];
        for (let r = 0; r < runs; r++) {
          const store =
            kind === 'memory'
              ? new MemoryFeatureStore()
              : await RedisFeatureStore.connect({ url: redis.url });
          perRun.push(
            await measure(store, kind, kind === 'redis' ? redis.url : undefined, decisions, concurrency),
          );
          await store.close();
        }
        const m: Figures = {
          store: kind,
          concurrency,
          decisions,
          readP50Us: median(perRun.map((f) => f.readP50Us)),
          readP99Us: median(perRun.map((f) => f.readP99Us)),
          cpuUsPerDecision: median(perRun.map((f) => f.cpuUsPerDecision)),
          serverCpuUsPerDecision: median(perRun.map((f) => f.serverCpuUsPerDecision)),
        };
        results.push(m);
        if (!values.json) {
          console.log(
            `${kind.padEnd(6)} concurrency ${String(concurrency).padStart(2)}: read p50 ${m.readP50Us} µs, p99 ${m.readP99Us} µs; ` +
              `riskgate CPU ${m.cpuUsPerDecision} µs/decision; Redis CPU ${m.serverCpuUsPerDecision} µs/decision ` +
              `(median of ${runs} runs of ${decisions})`,
          );
        }
      }
    }
  } finally {
    await redis.stop();
  }
  if (values.json) console.log(JSON.stringify({ counters: COUNTERS.length, results }, null, 2));
}

await main();
