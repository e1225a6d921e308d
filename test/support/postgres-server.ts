import { type ChildProcess, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'vitest';
import { eventually } from './eventually.ts';
import { freePort } from './free-port.ts';
import { signalTree, spawnTree, stopTree } from './process-tree.ts';
import { runningForBlock } from './running-for-block.ts';

/**
 * A real PostgreSQL server for the shared-store tests: Debian's `postgresql`, a fresh cluster made
 * by `initdb` in a temp dir and started on a free loopback port (trust auth, fsync off: a test
 * server). PostgreSQL refuses to run as root, so as root the cluster belongs to `nobody`. `.ci/run`
 * installs the package; without it a local run skips those tests with a message naming it, and CI
 * (CI=true) fails instead. The server is tied to the test's process (test/support/process-tree.ts).
 */

export const POSTGRES_PACKAGE = 'postgresql';

/** The directory of Debian's PostgreSQL binaries (the newest installed major), or undefined. */
function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root)
    .filter((d) => existsSync(join(root, d, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return majors[0] === undefined ? undefined : join(root, majors[0], 'bin');
}

/** Whether PostgreSQL can run here. Under CI it must: a missing server there is a failure. */
export function postgresAvailable(): boolean {
  const found = postgresBin() !== undefined;
  if (!found && process.env.CI) {
    throw new Error(
      `${POSTGRES_PACKAGE} is not installed, and CI never skips the shared-store tests (.ci/run installs it)`,
    );
  }
  if (!found) {
    console.warn(
      `skipping the PostgreSQL tests: install Debian's ${POSTGRES_PACKAGE} (apt-get install -y ${POSTGRES_PACKAGE})`,
    );
  }
  return found;
}

export interface RunningPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust auth: no password). */
  url: string;
  port: number;
  /** Freezes the server and all its backends (SIGSTOP): connections stay open and nothing answers. */
  pause(): void;
  /** Lets a paused server go on (SIGCONT). */
  resume(): void;
  stop(): Promise<void>;
  /** The URL of the database `name` on this server. */
  databaseUrl(name: string): string;
  /** Creates the empty database `name` (a fresh one for one test) and gives its URL. */
  createDatabase(name: string): Promise<string>;
}

const NOBODY = 65534;

/** The pids of `root` and every process descended from it (Linux /proc). */
function descendants(root: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parentOf.set(Number(entry), ppid);
    } catch {
      // Gone meanwhile.
    }
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) {
    for (const [pid, ppid] of parentOf) if (ppid === out[i]) out.push(pid);
  }
  return out;
}

/**
 * Signals the postmaster and every backend. Not the process group: each backend makes itself a
 * group leader (setsid in InitPostmasterChild), so a group signal would freeze the postmaster alone
 * and open connections would go on answering.
 */
function signalServer(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  if (process.platform !== 'linux') {
    signalTree(child, signal);
    return;
  }
  for (const pid of descendants(child.pid)) {
    try {
      process.kill(pid, signal);
    } catch {
      // Exited meanwhile.
    }
  }
}

export async function startPostgres(): Promise<RunningPostgres> {
  const bin = postgresBin();
  if (bin === undefined) throw new Error(`${POSTGRES_PACKAGE} is not installed`);
  const dir = mkdtempSync(join(tmpdir(), 'riskgate-pg-'));
  const data = join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  const user = asRoot ? { uid: NOBODY, gid: NOBODY } : {};
  if (asRoot) chownSync(dir, NOBODY, NOBODY);
  chmodSync(dir, 0o700);
  const init = spawnSync(
    join(bin, 'initdb'),
    ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'],
    { ...user, encoding: 'utf8', cwd: dir },
  );
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${(init.stderr || init.stdout || '').slice(-500)}`);
  }
  const port = await freePort();
  const child: ChildProcess = spawnTree(
    join(bin, 'postgres'),
    [
      '-D',
      data,
      '-p',
      String(port),
      '-k',
      dir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
      '-c',
      'max_connections=100',
    ],
    { ...user, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const collect = (c: Buffer) => {
    output += c.toString();
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const ready = await eventually(
    () =>
      output.includes('database system is ready to accept connections') ||
      (child.exitCode !== null && 'exited'),
    { timeoutMs: 20_000, what: 'postgres ready' },
  ).catch(() => 'timed out');
  if (ready !== true) {
    signalTree(child, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`postgres did not start: ${output.slice(-500)}`);
  }
  const databaseUrl = (name: string) => `postgres://postgres@127.0.0.1:${port}/${name}`;
  return {
    url: databaseUrl('postgres'),
    port,
    databaseUrl,
    createDatabase: async (name) => {
      const { default: pg } = await import('pg');
      const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
      await admin.connect();
      try {
        await admin.query(`create database ${name}`);
      } finally {
        await admin.end();
      }
      return databaseUrl(name);
    },
    pause: () => signalServer(child, 'SIGSTOP'),
    resume: () => signalServer(child, 'SIGCONT'),
    // SIGINT is PostgreSQL's fast shutdown; SIGKILL past 5 s: a stop never hangs the hook.
    stop: async () => {
      signalTree(child, 'SIGCONT');
      await stopTree(child, { signal: 'SIGINT' });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The PostgreSQL of the enclosing `describe` block ({@link runningForBlock}): started before its
 * first test (60 s allowed: a loaded machine's `initdb`) and stopped after its last. Inside a block
 * that {@link postgresAvailable} let run, as {@link describeOnPostgres} does.
 */
export function postgresForSuite(): RunningPostgres {
  return runningForBlock('the block’s PostgreSQL', startPostgres, 60_000);
}

/**
 * A `describe` block on a PostgreSQL of its own ({@link postgresForSuite}), skipped with the
 * message naming the package where it is not installed, and never skipped under CI
 * ({@link postgresAvailable}).
 */
export function describeOnPostgres(name: string, body: (pg: RunningPostgres) => void): void {
  describe.runIf(postgresAvailable())(name, () => body(postgresForSuite()));
}

/**
 * The environment of one riskgate on the PostgreSQL at `url`, its velocity counters in its own
 * memory: riskgate refuses a shared database with counters it keeps alone unless told so
 * (RISKGATE_FEATURE_STORE=memory), since replicas would each count their share of a burst.
 */
export function oneRiskgateOn(url: string): { RISKGATE_DATABASE: string; RISKGATE_FEATURE_STORE: 'memory' } {
  return { RISKGATE_DATABASE: url, RISKGATE_FEATURE_STORE: 'memory' };
}
