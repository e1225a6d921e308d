import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually } from './eventually.ts';
import { freePort } from './free-port.ts';
import { signalTree, spawnTree, stopTree } from './process-tree.ts';

/**
 * A real Redis server for the shared-outbox tests: Debian's `redis-server`, started on a free
 * loopback port with an append-only file in a temp dir. `.ci/run` installs the package; without it
 * a local run skips those tests with a message naming it, and CI (CI=true) fails instead. The
 * server is tied to the test's process (test/support/process-tree.ts): a test file that dies or an
 * `afterAll` that times out never leaves it running.
 */

export const REDIS_PACKAGE = 'redis-server';

/** Whether `redis-server` can run here. Under CI it must: a missing server there is a failure. */
export function redisAvailable(): boolean {
  const found = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!found && process.env.CI) {
    throw new Error(
      `${REDIS_PACKAGE} is not installed, and CI never skips the shared-outbox tests (.ci/run installs it)`,
    );
  }
  if (!found) {
    console.warn(
      `skipping the shared-outbox tests: install Debian's ${REDIS_PACKAGE} (apt-get install -y ${REDIS_PACKAGE})`,
    );
  }
  return found;
}

export interface RunningRedis {
  url: string;
  /** Freezes the server (SIGSTOP): connections stay open and nothing answers, a hung server. */
  pause(): void;
  /** Lets a paused server go on (SIGCONT). */
  resume(): void;
  stop(): Promise<void>;
}

export async function startRedis(): Promise<RunningRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'riskgate-redis-'));
  const port = await freePort();
  const child: ChildProcess = spawnTree(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', ''],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout!.on('data', (c: Buffer) => {
    output += c.toString();
  });
  const ready = await eventually(
    () => output.includes('Ready to accept connections') || (child.exitCode !== null && 'exited'),
    { timeoutMs: 10_000, what: 'redis-server ready' },
  ).catch(() => 'timed out');
  if (ready !== true) {
    signalTree(child, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`redis-server did not start: ${output.slice(-500)}`);
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    // SIGTERM after SIGCONT (a paused server), SIGKILL past 5 s: a stop never hangs the hook.
    stop: async () => {
      signalTree(child, 'SIGCONT');
      await stopTree(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
