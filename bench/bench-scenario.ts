/**
 * The sandbox scenario the bench runs on: the default scenario plus, for each browser demo account,
 * copies of its seeded login under distinct interaction ids, so every /decide body can carry its own
 * interaction as a real login does. Without them the bodies would share six interactions, and
 * riskgate would answer the remote-access-tool lookups from its answer cache or merge identical
 * lookups in a batch: the batching figures would describe the bench, not production.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadScenario } from '../src/sandbox/scenario/load-scenario.ts';
import {
  freePort,
  type Generator,
  type Pinning,
  planPinning,
  type ServerProcess,
  startGenerator,
  startServer,
} from './bench-processes.ts';
import {
  buildDecideBodies,
  DEMO_ACCOUNTS,
  loginInteractionId,
  loginsPerAccount,
  seededInteractionId,
} from './decide-bodies.ts';
import { lookUpUserIds } from './demo-users.ts';
import { sandboxVendorEnv } from './sandbox-control.ts';

/**
 * Writes `<dir>/bench-scenario.json` (JSON is YAML, which `SANDBOX_SCENARIO` reads) and returns its
 * path. `logins` is the number of distinct logins per account the bodies use (`loginsPerAccount`).
 */
export async function writeBenchScenario(dir: string, logins: number): Promise<string> {
  const scenario = await loadScenario('default');
  const browserAccounts = new Set(DEMO_ACCOUNTS.filter((a) => a.platform === 'browser').map((a) => a.name));
  const copies = scenario.observations.flatMap((o) =>
    browserAccounts.has(o.accountId) && o.interactionId === seededInteractionId(o.accountId)
      ? Array.from({ length: logins }, (_, k) => ({
          ...o,
          interactionId: loginInteractionId(o.accountId, 'browser', k),
        }))
      : [],
  );
  scenario.observations.push(...copies);
  scenario.name = 'bench';
  scenario.description = `The default scenario plus ${logins} copies of each browser account's seeded login.`;
  const path = join(dir, 'bench-scenario.json');
  await writeFile(path, JSON.stringify(scenario));
  return path;
}

/**
 * The sandbox (`src/dev/sandbox-main.ts`, or `BENCH_SANDBOX_ENTRY`) on a free port, serving the bench
 * scenario written under `dir` for `bodyVariants` distinct /decide bodies, pinned to `cpu`.
 */
export async function startBenchSandbox(o: {
  dir: string;
  bodyVariants: number;
  cpu: string | undefined;
  name?: string;
  env?: Record<string, string>;
}): Promise<ServerProcess> {
  const port = await freePort();
  return startServer({
    name: o.name ?? 'sandbox',
    entry: process.env.BENCH_SANDBOX_ENTRY ?? 'src/dev/sandbox-main.ts',
    port,
    cpu: o.cpu,
    env: {
      SANDBOX_PORT: String(port),
      SANDBOX_SCENARIO: await writeBenchScenario(o.dir, loginsPerAccount(o.bodyVariants)),
      // The development keys and sandbox.env it writes go beside the scenario, not into `.riskgate/`.
      RISKGATE_STATE_DIR: o.dir,
      ...o.env,
    },
    readyPath: '/sandbox/stats',
  });
}

/** A fresh API key for one bench run's riskgates (`RISKGATE_API_KEYS`), as its `/decide` callers send it. */
export function benchApiKey(): string {
  return `bench-${randomBytes(16).toString('hex')}`;
}

/**
 * `count` /decide bodies of the demo accounts with their Admin user ids as the sandbox at
 * `sandboxUrl` holds them now (it gives them new ids at every reset: ask again after one).
 */
export async function demoDecideBodies(sandboxUrl: string, count: number): Promise<string[]> {
  const userIds = await lookUpUserIds(
    sandboxUrl,
    DEMO_ACCOUNTS.map((a) => a.name),
  );
  return buildDecideBodies(count, userIds);
}

/** How a bench script starts a riskgate (see {@link startBenchRiskgate}). */
export interface BenchRiskgateOptions {
  /** Default `riskgate`. */
  name?: string;
  /** Its entry: bench/riskgate-under-bench.ts of a build's tree. Default `BENCH_RISKGATE_ENTRY`, else this tree's. */
  entry?: string;
  /** The core it is pinned to (`Pinning.riskgate`); undefined: unpinned. */
  cpu: string | undefined;
  /** Its vendor: the sandbox at this URL. */
  sandboxUrl: string;
  /** The key its callers send (`benchApiKey`). */
  apiKey: string;
  nodeArgs?: string[];
  /** Its settings beyond the port, the vendor and the key. */
  env: Record<string, string>;
  /** Default startServer's. */
  readyTimeoutMs?: number;
}

/** riskgate on a free port against the bench's sandbox, ready once `/readyz` answers 200. */
export async function startBenchRiskgate(o: BenchRiskgateOptions): Promise<ServerProcess> {
  const port = await freePort();
  return startServer({
    name: o.name ?? 'riskgate',
    entry: o.entry ?? process.env.BENCH_RISKGATE_ENTRY ?? 'bench/riskgate-under-bench.ts',
    port,
    cpu: o.cpu,
    nodeArgs: o.nodeArgs ?? [],
    readyPath: '/readyz',
    ...(o.readyTimeoutMs !== undefined && { readyTimeoutMs: o.readyTimeoutMs }),
    env: {
      RISKGATE_PORT: String(port),
      ...sandboxVendorEnv(o.sandboxUrl),
      RISKGATE_API_KEYS: o.apiKey,
      ...o.env,
    },
  });
}

/**
 * What a bench script measures riskgate with: the sandbox and the load generator, each pinned to
 * its core (`planPinning`), a scratch directory, one API key, and the riskgates it starts.
 */
export interface BenchRig {
  dir: string;
  pinning: Pinning;
  sandbox: ServerProcess;
  generator: Generator;
  apiKey: string;
  /**
   * riskgate on its core against the sandbox, with the rig's key; stopped with the rig unless
   * stopped first.
   */
  startRiskgate(o: Omit<BenchRiskgateOptions, 'cpu' | 'sandboxUrl' | 'apiKey'>): Promise<ServerProcess>;
}

/**
 * Runs `run` on a rig (the sandbox serving the bench scenario for `bodyVariants` bodies), then,
 * however it ends, stops the generator and every server (the last started first) and removes the
 * scratch directory (`tmpdir()/<prefix>…`).
 */
export async function withBenchRig<T>(
  o: { prefix: string; bodyVariants: number },
  run: (rig: BenchRig) => Promise<T>,
): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), o.prefix));
  const servers: ServerProcess[] = [];
  let generator: Generator | undefined;
  try {
    const pinning = planPinning(true);
    const sandbox = await startBenchSandbox({ dir, bodyVariants: o.bodyVariants, cpu: pinning.sandbox });
    servers.push(sandbox);
    generator = await startGenerator(pinning.load);
    const apiKey = benchApiKey();
    const startRiskgate: BenchRig['startRiskgate'] = async (r) => {
      const server = await startBenchRiskgate({
        ...r,
        cpu: pinning.riskgate,
        sandboxUrl: sandbox.url,
        apiKey,
      });
      servers.push(server);
      return {
        ...server,
        stop: async () => {
          if (servers.includes(server)) servers.splice(servers.indexOf(server), 1);
          await server.stop();
        },
      };
    };
    return await run({ dir, pinning, sandbox, generator, apiKey, startRiskgate });
  } finally {
    await generator?.stop();
    for (const s of servers.reverse()) await s.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
