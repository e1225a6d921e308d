import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { eventually } from './support/eventually.ts';
import { processesOfRun, RUN_MARKER } from './support/process-tree.ts';
import { sharedDistDir } from './support/riskgate-process.ts';

/**
 * The test run leaves nothing behind. Setup names the run (`RUN_MARKER` in the environment, which
 * every process the run starts inherits: test/support/process-tree.ts adds it to the children
 * started with an environment of their own). Teardown, once every test file has finished, kills
 * any process of the run still alive and fails the run naming them, and fails it when the run
 * created anything under the working tree's `.riskgate/` (tests keep their state in temp dirs).
 */

const STATE_DIR = join(resolve(import.meta.dirname, '..'), '.riskgate');

let run: string;
let before: Set<string>;

function entries(): Set<string> {
  return new Set(existsSync(STATE_DIR) ? readdirSync(STATE_DIR) : []);
}

export function setup(): void {
  run = randomUUID();
  process.env[RUN_MARKER] = run;
  before = entries();
}

export async function teardown(): Promise<void> {
  // The run's compiled tree (test/support/riskgate-process.ts), copied by each file that runs dist/.
  rmSync(sharedDistDir(run), { recursive: true, force: true });
  const problems: string[] = [];
  // The pool's own workers (this process's children) may still be on their way out.
  const leftovers = () => processesOfRun(run).filter((p) => p.pid !== process.pid && p.ppid !== process.pid);
  await eventually(() => leftovers().length === 0, { timeoutMs: 2000, intervalMs: 100 }).catch(() => {});
  const alive = leftovers();
  for (const p of alive) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  if (alive.length > 0) {
    problems.push(
      `${alive.length} process(es) started by the test run were still alive (killed now):\n${alive
        .map((p) => `  pid ${p.pid}: ${p.command.slice(0, 200)}`)
        .join('\n')}`,
    );
  }
  const created = [...entries()].filter((e) => !before.has(e));
  if (created.length > 0) {
    problems.push(
      `the test run wrote into the working tree's .riskgate/ (use a temp dir): ${created.join(', ')}`,
    );
  }
  if (problems.length > 0) throw new Error(`the test run left things behind:\n${problems.join('\n')}`);
}
