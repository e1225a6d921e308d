/**
 * The sandbox scenario the bench runs on: the default scenario plus, for each browser demo account,
 * copies of its seeded login (`<name>-login-1`) under distinct interaction ids, so every /decide
 * body can carry its own interaction as a real login does. Without them the bodies would share six
 * interactions, and riskgate would answer the remote-access-tool lookups from its answer cache or
 * merge identical lookups in a batch: the batching figures would describe the bench, not production.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { DEMO_ACCOUNTS, loginInteractionId } from './decide-bodies.ts';

const DEFAULT_SCENARIO = new URL('../src/sandbox/scenario/default.yaml', import.meta.url);

interface ScenarioObservation {
  accountId: string;
  interactionId?: string;
  [field: string]: unknown;
}

/**
 * Writes `<dir>/bench-scenario.json` (JSON is YAML, which `SANDBOX_SCENARIO` reads) and returns its
 * path. `logins` is the number of distinct logins per account the bodies use
 * (`buildDecideBodies`' count ÷ accounts, rounded up).
 */
export async function writeBenchScenario(dir: string, logins: number): Promise<string> {
  const scenario = parse(await readFile(DEFAULT_SCENARIO, 'utf8'), { merge: true }) as {
    name: string;
    description?: string;
    observations: ScenarioObservation[];
  };
  const browserAccounts = new Set(DEMO_ACCOUNTS.filter((a) => a.platform === 'browser').map((a) => a.name));
  const copies: ScenarioObservation[] = [];
  for (const o of scenario.observations) {
    if (!browserAccounts.has(o.accountId) || o.interactionId !== `${o.accountId}-login-1`) continue;
    for (let k = 0; k < logins; k++)
      copies.push({ ...o, interactionId: loginInteractionId(o.accountId, 'browser', k) });
  }
  scenario.observations.push(...copies);
  scenario.name = 'bench';
  scenario.description = `The default scenario plus ${logins} copies of each browser account's seeded login.`;
  const path = join(dir, 'bench-scenario.json');
  await writeFile(path, JSON.stringify(scenario));
  return path;
}
