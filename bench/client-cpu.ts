/**
 * Client-side CPU cost of the upstream clients: microseconds of this process's CPU (user + system)
 * per Trust Signals call and per batched remote-access-tool item, against the sandbox at zero
 * latency running in a child process (so its CPU is not counted). Median of 3 runs.
 *
 *   npx tsx bench/client-cpu.ts [--calls 20000] [--items 20000] [--concurrency 32] [--runs 3]
 *
 * What the figure includes: parameter validation, query building, token lookup, undici dispatch
 * and parsing of the HTTP response, zod parsing and envelope checks, the result objects (and for
 * items: batching, the JSON body, position matching). It does not include the sandbox.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { createTokenManager } from '../src/auth/token-manager.ts';
import { DEFAULT_CREDENTIALS } from '../src/sandbox/sandbox-config.ts';
import { createSignalsClient, type SignalsClient } from '../src/signals/signals-client.ts';
import { spawnTree, stopTree } from '../test/support/process-tree.ts';
import { median } from './bench-median.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '20000' },
    items: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '32' },
    runs: { type: 'string', default: '3' },
  },
});
const CALLS = Number(values.calls);
const ITEMS = Number(values.items);
const CONCURRENCY = Number(values.concurrency);
const RUNS = Number(values.runs);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

async function startSandboxProcess(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawnTree(process.execPath, ['--import', 'tsx', 'src/dev/sandbox-main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      SANDBOX_PORT: String(port),
      SANDBOX_HOST: '127.0.0.1',
      // The development keys it writes go to a temp dir, not into the working tree's `.riskgate/`.
      RISKGATE_STATE_DIR: mkdtempSync(join(tmpdir(), 'riskgate-client-cpu-')),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`sandbox did not start: ${out}`)), 30_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      if (out.includes('listening on')) {
        clearTimeout(t);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`sandbox exited ${code}: ${out}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

function cpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

/** Runs `total` calls of `fn` with `concurrency` in flight; returns CPU µs per call. */
async function perCall(total: number, concurrency: number, fn: (i: number) => Promise<{ ok: boolean }>) {
  let next = 0;
  let failed = 0;
  const worker = async () => {
    while (next < total) {
      const i = next++;
      if (!(await fn(i)).ok) failed++;
    }
  };
  const c0 = cpuUs();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const cpu = cpuUs() - c0;
  const wall = performance.now() - t0;
  if (failed > 0) throw new Error(`${failed} calls failed`);
  return { usPerCall: cpu / total, callsPerSecond: (total / wall) * 1000 };
}

/** Lookups in waves of 1000 concurrent (10 full batches each); returns CPU µs per item. */
async function perItem(client: SignalsClient, total: number) {
  const accounts = ['alice', 'bob', 'mallory', 'trudy', 'carol', 'dave'];
  const wave = 1000;
  let failed = 0;
  const before = client.stats();
  const c0 = cpuUs();
  const t0 = performance.now();
  for (let done = 0; done < total; done += wave) {
    const rs = await Promise.all(
      Array.from({ length: Math.min(wave, total - done) }, (_, k) => {
        const i = done + k;
        const a = accounts[i % accounts.length]!;
        return client.remoteAccessTool({
          accountId: a,
          unitId: `${a}-web`,
          verificationStatus: 'unverified',
          interactionId: `${a}-login-${i}`,
        });
      }),
    );
    for (const r of rs) if (!r.ok) failed++;
  }
  const cpu = cpuUs() - c0;
  const wall = performance.now() - t0;
  if (failed > 0) throw new Error(`${failed} lookups failed`);
  const after = client.stats();
  return {
    usPerItem: cpu / total,
    itemsPerSecond: (total / wall) * 1000,
    batches: after.batches - before.batches,
  };
}

async function main() {
  const { url, child } = await startSandboxProcess();
  const c = DEFAULT_CREDENTIALS;
  const tokens = createTokenManager({
    authUrl: url,
    clientId: c.retrievalClientId,
    clientSecret: c.retrievalClientSecret,
    audience: c.signalsAudience,
    idp: c.idp,
  });
  await tokens.start();
  const client = createSignalsClient({ baseUrl: `${url}/api/v1`, serviceId: c.serviceId, tokens });
  const call = () => client.newBrowser({ subjectAccountId: 'alice', subjectUnitId: 'alice-web' });
  // Reference: the same request with bare undici (request() + text() + JSON.parse), no validation,
  // no zod, no timers. The ratio to it is what survives a noisy machine.
  const raw = new Pool(url, { connections: 32, pipelining: 1 });
  const rawPath = `/api/v1/signals/new-browser?serviceId=${c.serviceId}&subjectAccountId=alice&subjectUnitId=alice-web`;
  const rawCall = async () => {
    const res = await raw.request({
      method: 'GET',
      path: rawPath,
      headers: { authorization: `Bearer ${tokens.peekToken()}`, accept: 'application/json' },
    });
    const json = JSON.parse(await res.body.text()) as { success?: boolean };
    return { ok: res.statusCode === 200 && json.success !== undefined };
  };
  try {
    // Warm-up: JIT, connections, token.
    await perCall(3000, CONCURRENCY, call);
    await perCall(3000, CONCURRENCY, rawCall);
    await perItem(client, 3000);
    const runs: {
      usPerCall: number;
      callsPerSecond: number;
      usPerRawUndiciCall: number;
      usPerItem: number;
      itemsPerSecond: number;
      batches: number;
    }[] = [];
    for (let r = 0; r < RUNS; r++) {
      const a = await perCall(CALLS, CONCURRENCY, call);
      const z = await perCall(CALLS, CONCURRENCY, rawCall);
      const b = await perItem(client, ITEMS);
      runs.push({ ...a, usPerRawUndiciCall: z.usPerCall, ...b });
      console.error(
        `run ${r + 1}: ${a.usPerCall.toFixed(1)} µs CPU/call (${a.callsPerSecond.toFixed(0)}/s; bare undici ${z.usPerCall.toFixed(1)}), ` +
          `${b.usPerItem.toFixed(1)} µs CPU/batched item (${b.itemsPerSecond.toFixed(0)}/s, ${b.batches} batches)`,
      );
    }
    const result = {
      node: process.version,
      calls: CALLS,
      items: ITEMS,
      concurrency: CONCURRENCY,
      runs: RUNS,
      usCpuPerSignalsCall: Number(median(runs.map((x) => x.usPerCall)).toFixed(1)),
      usCpuPerBatchedItem: Number(median(runs.map((x) => x.usPerItem)).toFixed(1)),
      usCpuPerBareUndiciCall: Number(median(runs.map((x) => x.usPerRawUndiciCall)).toFixed(1)),
      clientOverBareUndici: Number(median(runs.map((x) => x.usPerCall / x.usPerRawUndiciCall)).toFixed(2)),
      signalsCallsPerSecond: Math.round(median(runs.map((x) => x.callsPerSecond))),
      batchedItemsPerSecond: Math.round(median(runs.map((x) => x.itemsPerSecond))),
      perRun: runs,
    };
    console.log(JSON.stringify(result, null, 2));
  } finally {
    await client.close();
    await raw.close();
    await tokens.stop();
    await stopTree(child);
  }
}

await main();
