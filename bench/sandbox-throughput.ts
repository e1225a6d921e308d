/**
 * Sandbox throughput: the sandbox must never be the bottleneck of a benchmark (target: 5,000 signal
 * requests/s on one core, no latency injected). Starts `src/dev/sandbox-main.ts` in a child process
 * pinned to core 1 (`taskset -c 1`, when available), pins this process (autocannon) to core 0, gets a
 * Retrieval token and runs autocannon against
 *   1. GET /api/v1/signals/new-browser for alice's current login (a paired signal), and
 *   2. POST /api/v1/signals/remote-access-tool with a batch of the four browser logins,
 * `--runs` times each; prints every run and the median req/s. Beside the wall-clock rate it prints
 * requests per CPU-second of the sandbox process (from /proc): on two noisy shared cores the
 * wall-clock figure swings with the neighbours' load, the CPU cost per request much less.
 *
 *   npx tsx bench/sandbox-throughput.ts [--duration 5] [--connections 32] [--runs 3] [--no-pin]
 */
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { DEFAULT_CREDENTIALS } from '../src/sandbox/sandbox-config.ts';
import { median } from './bench-median.ts';
import { freePort, planPinning, processCpuUs, startServer } from './bench-processes.ts';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '32' },
    runs: { type: 'string', default: '3' },
    'no-pin': { type: 'boolean', default: false },
  },
});
const durationS = Number(values.duration);
const connections = Number(values.connections);
const runs = Number(values.runs);
if (!(durationS > 0 && connections > 0 && Number.isInteger(runs) && runs > 0)) {
  throw new Error('--duration, --connections and --runs must be positive numbers');
}

const pinning = planPinning(!values['no-pin']);
if (pinning.available) {
  // autocannon on core 0, the sandbox alone on core 1.
  execFileSync('taskset', ['-a', '-p', '-c', '0', String(process.pid)], { stdio: 'ignore' });
}

const port = await freePort();
const sandbox = await startServer({
  name: 'sandbox',
  entry: 'src/dev/sandbox-main.ts',
  port,
  cpu: pinning.available ? '1' : undefined,
  env: { SANDBOX_PORT: String(port) },
  readyPath: '/sandbox/info',
});

try {
  const c = DEFAULT_CREDENTIALS;
  const tokenRes = await fetch(`${sandbox.url}/oauth/v2/token`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${c.retrievalClientId}:${c.retrievalClientSecret}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: `grant_type=client_credentials&scope=urn:${c.idp}:iam:org:project:id:${c.signalsAudience}:aud`,
  });
  const { access_token: token } = (await tokenRes.json()) as { access_token: string };
  const authorization = `Bearer ${token}`;

  const newBrowserQuery = new URLSearchParams({
    serviceId: c.serviceId,
    subjectAccountId: 'alice',
    subjectUnitId: 'alice-web',
    subjectVerificationStatus: 'unverified',
    subjectInteractionId: 'alice-login-1',
    baselineAccountId: 'alice',
  });
  const batch = JSON.stringify(
    ['alice', 'bob', 'mallory', 'dave'].map((name) => ({
      serviceId: c.serviceId,
      accountId: name,
      unitId: `${name}-web`,
      verificationStatus: 'unverified',
      interactionId: `${name}-login-1`,
    })),
  );
  const targets: { name: string; options: Parameters<typeof autocannon>[0] }[] = [
    {
      name: 'GET /api/v1/signals/new-browser',
      options: {
        url: `${sandbox.url}/api/v1/signals/new-browser?${newBrowserQuery}`,
        headers: { authorization },
      },
    },
    {
      name: 'POST /api/v1/signals/remote-access-tool (4 items)',
      options: {
        url: `${sandbox.url}/api/v1/signals/remote-access-tool`,
        method: 'POST',
        headers: { authorization, 'content-type': 'application/json' },
        body: batch,
      },
    },
  ];

  console.log(
    `sandbox ${sandbox.url}; ${pinning.available ? 'sandbox on core 1, autocannon on core 0' : pinning.note}`,
  );
  console.log(`autocannon: ${connections} connections, ${durationS} s per run, ${runs} runs\n`);
  const summary: string[] = [];
  for (const target of targets) {
    // A short unrecorded warm-up: JIT and the token cache.
    await autocannon({ ...target.options, connections, duration: 1 });
    const rates: number[] = [];
    const perCpuSecond: number[] = [];
    for (let i = 0; i < runs; i++) {
      const cpuBefore = processCpuUs(sandbox.pid);
      const r = await autocannon({ ...target.options, connections, duration: durationS });
      const cpuAfter = processCpuUs(sandbox.pid);
      const bad = r.non2xx + r.errors + r.timeouts;
      if (bad > 0) throw new Error(`${target.name}: ${bad} failed requests (non-2xx, errors or timeouts)`);
      rates.push(r.requests.average);
      let cpuNote = '';
      if (cpuBefore !== undefined && cpuAfter !== undefined && cpuAfter > cpuBefore) {
        const perCpu = r.requests.total / ((cpuAfter - cpuBefore) / 1e6);
        perCpuSecond.push(perCpu);
        cpuNote = `, ${Math.round(perCpu)} req per sandbox CPU-second`;
      }
      console.log(
        `${target.name}  run ${i + 1}: ${Math.round(r.requests.average)} req/s, p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms${cpuNote}`,
      );
    }
    const cpuSummary = perCpuSecond.length
      ? `, median ${Math.round(median(perCpuSecond))} req per sandbox CPU-second`
      : '';
    summary.push(`${target.name}: median ${Math.round(median(rates))} req/s over ${runs} runs${cpuSummary}`);
  }
  console.log(`\n${summary.join('\n')}`);
} finally {
  await sandbox.stop();
}
