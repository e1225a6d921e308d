/**
 * Idle CPU (issue 32): `npx tsx bench/idle-cpu.ts [--seconds 30] [--settle 5] [--workers N]
 * [--separate-sandbox] [--cpu-prof DIR]`. Starts riskgate as `npm start` does (the embedded sandbox,
 * its demo logins, a fresh state dir, the decision log to a file), waits until /readyz answers 200
 * and the start's work has settled (`--settle` s), then reads the CPU time of the whole process
 * tree (every process below it, from /proc) over `--seconds` with no request sent. Prints the
 * share of one core it used: what an idle riskgate costs the host, with the load average beside.
 *
 * `--separate-sandbox`: the sandbox in a process of its own (as against the real vendor), so the
 * figure is riskgate's alone; the sandbox's own idle CPU is printed apart. `--cpu-prof DIR`:
 * riskgate runs under `node --cpu-prof` (the profile covers its whole life, start included: read
 * the idle part with bench/cpu-profile-top.ts `--from-s`).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, processCpuUs, processTree, processTreeCpuUs, startServer } from './bench-processes.ts';
import { startBenchSandbox } from './bench-scenario.ts';
import { sandboxVendorEnv } from './sandbox-control.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '30' },
    settle: { type: 'string', default: '5' },
    workers: { type: 'string' },
    'separate-sandbox': { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
  },
});
const seconds = Number(values.seconds);
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

const stateDir = mkdtempSync(join(tmpdir(), 'riskgate-idle-'));
const sandbox = values['separate-sandbox']
  ? await startBenchSandbox({ dir: mkdtempSync(join(stateDir, 'sandbox-')), bodyVariants: 1, cpu: undefined })
  : undefined;
const port = await freePort();
const server = await startServer({
  name: 'riskgate',
  entry: 'src/main.ts',
  port,
  cpu: undefined,
  readyPath: '/readyz',
  readyTimeoutMs: 60_000,
  ...(values['cpu-prof'] !== undefined && {
    nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${values['cpu-prof']}`],
  }),
  env: {
    RISKGATE_PORT: String(port),
    ...(sandbox === undefined
      ? { SANDBOX_PORT: String(await freePort()) }
      : { ...sandboxVendorEnv(sandbox.url), RISKGATE_API_KEYS: `idle-${process.pid}-bench-key-0123456789` }),
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
  const sandboxBefore = sandbox === undefined ? 0 : (processTreeCpuUs(sandbox.pid) ?? 0);
  const loadBefore = load();
  const startedAt = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const usedUs = (processTreeCpuUs(server.pid) ?? 0) - before;
  const sandboxUs = sandbox === undefined ? 0 : (processTreeCpuUs(sandbox.pid) ?? 0) - sandboxBefore;
  // Each process's share, named by its command line: the embedded sandbox is not riskgate's cost.
  for (const [i, p] of tree.entries()) {
    const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').join(' ').slice(0, 100);
    console.log(`  ${p}: ${(((processCpuUs(p) ?? 0) - perBefore[i]!) / 1000).toFixed(0)} ms CPU  ${cmd}`);
  }
  const wallUs = (performance.now() - startedAt) * 1000;
  if (sandbox !== undefined)
    console.log(
      `  separate sandbox: ${((sandboxUs / wallUs) * 100).toFixed(2)} % of a core (${(sandboxUs / 1000).toFixed(0)} ms CPU)`,
    );
  console.log(
    `idle riskgate (${values.workers ?? 'default'} workers, ${processTree(server.pid).length} processes, ` +
      `${sandbox === undefined ? 'embedded' : 'separate'} sandbox): ` +
      `${((usedUs / wallUs) * 100).toFixed(2)} % of a core over ${seconds} s (${(usedUs / 1000).toFixed(0)} ms CPU); ` +
      `load average ${loadBefore} -> ${load()}`,
  );
} finally {
  await server.stop();
  await sandbox?.stop();
  rmSync(stateDir, { recursive: true, force: true });
}
