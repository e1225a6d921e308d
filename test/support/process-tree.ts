import { type ChildProcess, type SpawnOptions, spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * Long-lived children of the tests and of the bench (riskgate, the sandbox, the floor server,
 * redis-server) that never outlive what started them, on success, failure or timeout:
 * - each leads its own process group, so a cleanup signals the whole tree (a riskgate primary's
 *   cluster workers too) with `signalTree`;
 * - on Linux each is started through util-linux's `setpriv --pdeathsig SIGKILL` (it then execs the
 *   command, same pid), so the kernel kills it when its parent dies, even of SIGKILL, when no
 *   cleanup code runs (a cluster primary's workers follow it: node:cluster exits a worker whose
 *   primary is gone). Without setpriv (macOS) only the group cleanup and the sweep below apply;
 * - each carries the test run's marker (`RUN_MARKER`, set by test/global-setup.ts), by which the
 *   run's teardown finds, kills and reports any process of the run still alive.
 */

/** The environment variable naming the test run; inherited by every process the run starts. */
export const RUN_MARKER = 'RG_TEST_RUN';

let setprivPath: string | null | undefined;

/** `setpriv` when it can set a parent-death signal here (Linux, util-linux 2.33+), else null. */
function setpriv(): string | null {
  if (setprivPath === undefined) {
    const probe =
      process.platform === 'linux'
        ? spawnSync('setpriv', ['--pdeathsig', 'SIGKILL', 'true'], { stdio: 'ignore' })
        : undefined;
    setprivPath = probe?.status === 0 ? 'setpriv' : null;
  }
  return setprivPath;
}

/**
 * `spawn(command, args, options)` as a tree tied to this process: its own process group
 * (`detached`), killed by the kernel when this process dies (where setpriv exists), carrying the
 * run's marker. `options.env` defaults to this process's environment.
 */
export function spawnTree(
  command: string,
  args: readonly string[],
  options: SpawnOptions = {},
): ChildProcess {
  const marker = process.env[RUN_MARKER];
  // An environment given whole keeps the run's marker unless it names a marker of its own.
  const env = {
    ...(marker !== undefined && { [RUN_MARKER]: marker }),
    ...(options.env ?? process.env),
  };
  const tie = setpriv();
  const [file, argv] =
    tie === null ? [command, args] : [tie, ['--pdeathsig', 'SIGKILL', '--', command, ...args]];
  return spawn(file, argv, { ...options, env, detached: true });
}

/** Sends `signal` to every process of `child`'s group; a group already gone is no error. */
export function signalTree(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/**
 * A graceful stop of the tree: `signal` (default SIGTERM) to the group, SIGKILL to the group after
 * `graceMs` (default 5000) if the leader has not exited, and SIGKILL to whatever of the group is
 * left once it has (a worker that outlived its primary).
 */
export async function stopTree(
  child: ChildProcess,
  options: { signal?: NodeJS.Signals; graceMs?: number } = {},
): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    signalTree(child, options.signal ?? 'SIGTERM');
    const timer = setTimeout(() => signalTree(child, 'SIGKILL'), options.graceMs ?? 5000);
    await exited;
    clearTimeout(timer);
  }
  signalTree(child, 'SIGKILL');
}

/** A live process: its pid and command line. */
export interface LiveProcess {
  pid: number;
  ppid: number;
  command: string;
}

/**
 * The live processes whose environment holds `RUN_MARKER=<run>` (from /proc; Linux only, else
 * none). Zombies are left out: they are dead, waiting for their parent to read their status.
 */
export function processesOfRun(run: string): LiveProcess[] {
  const needle = `\0${RUN_MARKER}=${run}\0`;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return [];
  }
  const found: LiveProcess[] = [];
  for (const pid of pids) {
    try {
      if (!`\0${readFileSync(`/proc/${pid}/environ`, 'latin1')}`.includes(needle)) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue;
      const command = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim();
      found.push({ pid: Number(pid), ppid: Number(fields[1]), command });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}
