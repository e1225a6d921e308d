/**
 * The sandbox scenario the bench runs on: the default scenario plus, for each browser demo account,
 * copies of its seeded login under distinct interaction ids, so every /decide body can carry its own
 * interaction as a real login does. Without them the bodies would share six interactions, and
 * riskgate would answer the remote-access-tool lookups from its answer cache or merge identical
 * lookups in a batch: the batching figures would describe the bench, not production.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadScenario } from '../src/sandbox/scenario/load-scenario.ts';
import { freePort, type ServerProcess, startServer } from './bench-processes.ts';
import { DEMO_ACCOUNTS, loginInteractionId, loginsPerAccount, seededInteractionId } from './decide-bodies.ts';

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
