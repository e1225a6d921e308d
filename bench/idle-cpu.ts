/**
 * Idle CPU (issue 32): `npx tsx bench/idle-cpu.ts [--seconds 30] [--workers N]`. Starts riskgate as
 * `npm start` does (the embedded sandbox, its demo logins, a fresh state dir, the decision log to a
 * file), waits until /readyz answers 200 and the start's work has settled (5 s), then reads the CPU
 * time of the whole process tree (every process below it, from /proc) over `--seconds` with no
 * request sent. Prints the share of one core it used: what an idle riskgate costs the host.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, processCpuUs, processTree, processTreeCpuUs, startServer } from './bench-processes.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '30' },
    settle: { type: 'string', default: '5' },
    workers: { type: 'string' },
  },
});
const seconds = Number(values.seconds);

const stateDir = mkdtempSync(join(tmpdir(), 'riskgate-idle-'));
const port = await freePort();
const server = await startServer({
  name: 'riskgate',
  entry: 'src/main.ts',
  port,
  cpu: undefined,
  readyPath: '/readyz',
  readyTimeoutMs: 60_000,
  env: {
    RISKGATE_PORT: String(port),
    SANDBOX_PORT: String(await freePort()),
    RISKGATE_STATE_DIR: stateDir,
    RISKGATE_DECISION_LOG: join(stateDir, 'decisions.jsonl'),
    ...(values.workers !== undefined && { RISKGATE_WORKERS: values.workers }),
  },
});
try {
  await new Promise((r) => setTimeout(r, Number(values.settle) * 1000));
  const tree = processTree(server.pid);
  const perBefore = tree.map((p) => processCpuUs(p) ?? 0);
  const before = processTreeCpuUs(server.pid) ?? 0;
  const startedAt = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const usedUs = (processTreeCpuUs(server.pid) ?? 0) - before;
  // Each process's share, named by its command line: the embedded sandbox is not riskgate's cost.
  for (const [i, p] of tree.entries()) {
    const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').join(' ').slice(0, 100);
    console.log(`  ${p}: ${(((processCpuUs(p) ?? 0) - perBefore[i]!) / 1000).toFixed(0)} ms CPU  ${cmd}`);
  }
  const wallUs = (performance.now() - startedAt) * 1000;
  console.log(
    `idle riskgate (${values.workers ?? 'default'} workers, ${processTree(server.pid).length} processes): ` +
      `${((usedUs / wallUs) * 100).toFixed(2)} % of a core over ${seconds} s (${(usedUs / 1000).toFixed(0)} ms CPU)`,
  );
} finally {
  await server.stop();
  rmSync(stateDir, { recursive: true, force: true });
}
