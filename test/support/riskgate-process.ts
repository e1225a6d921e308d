import { type ChildProcess, execFileSync } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { sandboxUpstream } from '../../src/dev/embedded-sandbox.ts';
import type { RunningSandbox } from '../../src/sandbox/server.ts';
import { eventually } from './eventually.ts';
import { RUN_MARKER, signalTree, spawnTree } from './process-tree.ts';

/**
 * riskgate as separate processes (`node dist/main.js`, compiled once per test run), for tests that
 * kill them: SIGKILL at chosen points, SIGTERM, two processes on one store.
 */

export const ROOT = resolve(import.meta.dirname, '../..');
export const PROCESS_KEY = 'process-test-caller-key-0123';
/** The operator key (RISKGATE_OPS_KEYS) of `processEnv`: /metrics and /actions take no caller key. */
export const PROCESS_OPS_KEY = 'process-test-ops-key-0123456';

/**
 * Compiles src/ into `dist/` of a fresh temp directory laid out as the image lays out /app
 * (package.json for `"type"` and the version, node_modules a link to the repository's), never into
 * the working tree; returns the entry point and a remover. The compile runs once per test run
 * (`sharedDist`): each caller gets its own copy, which it may change (a test removes the sandbox
 * from it as the image does), and a dozen files no longer each run `tsc` (minutes of CI's 2 cores).
 */
export function buildDist(tag: string): { dir: string; main: string; remove: () => void } {
  const app = mkdtempSync(join(tmpdir(), `riskgate-build-${tag}-`));
  copyFileSync(join(ROOT, 'package.json'), join(app, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(app, 'node_modules'));
  const dir = join(app, 'dist');
  cpSync(sharedDist(), dir, { recursive: true });
  return { dir, main: join(dir, 'main.js'), remove: () => rmSync(app, { recursive: true, force: true }) };
}

/** The compiled tree of this test run, shared by its files (test/global-setup.ts removes it). */
export function sharedDistDir(run: string): string {
  return join(tmpdir(), `riskgate-dist-${run}`);
}

/**
 * The timeout of a hook that compiles dist/ (`buildDist`) and starts what its processes need,
 * milliseconds. The compile (tsc over src/) and each start take time that grows with the machine's
 * load: at a load of 10 on two cores, the compile and a PostgreSQL and a Redis start together took
 * over 120 s. The bound catches a hook that hangs, not a slow one.
 */
export const BUILD_HOOK_MS = 300_000;

/** How long a file waits for another file's compile of the run, milliseconds. */
const SHARED_COMPILE_WAIT_MS = 600_000;

/**
 * The run's compiled tree: the first caller of the run (any worker process) compiles it, the others
 * wait for its marker. Outside a run (no RUN_MARKER) every call compiles its own.
 */
function sharedDist(): string {
  const run = process.env[RUN_MARKER];
  const root = run === undefined ? mkdtempSync(join(tmpdir(), 'riskgate-dist-')) : sharedDistDir(run);
  const dist = join(root, 'dist');
  const built = join(root, '.built');
  const failed = join(root, '.failed');
  try {
    mkdirSync(root);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    if (run === undefined) return compileInto(dist, built, failed);
    // Another file of the run compiles it: waited for synchronously, as the compile itself would be.
    const pause = new Int32Array(new SharedArrayBuffer(4));
    const until = performance.now() + SHARED_COMPILE_WAIT_MS;
    while (!existsSync(built)) {
      if (existsSync(failed)) throw new Error(`the run's compile failed: ${readFileSync(failed, 'utf8')}`);
      if (performance.now() > until)
        throw new Error(`the run's compile did not finish within ${SHARED_COMPILE_WAIT_MS} ms`);
      Atomics.wait(pause, 0, 0, 100);
    }
    return dist;
  }
  return compileInto(dist, built, failed);
}

function compileInto(dist: string, built: string, failed: string): string {
  try {
    execFileSync(
      process.execPath,
      [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', dist],
      { cwd: ROOT, stdio: 'pipe' },
    );
    // As the Dockerfile and `npm run build` do: the console's stylesheet and script beside its pages.
    cpSync(join(ROOT, 'src/console/assets'), join(dist, 'console/assets'), { recursive: true });
    writeFileSync(built, '');
    return dist;
  } catch (error) {
    const e = error as Error & { stdout?: Buffer };
    writeFileSync(failed, `${e.message}\n${e.stdout?.toString() ?? ''}`);
    throw error;
  }
}

/**
 * The environment of a riskgate on `sandbox` (one process, port 0), its state in a fresh temp dir
 * unless `extra` names one (never `.riskgate/` in the working tree).
 */
export function processEnv(sandbox: RunningSandbox, extra: Record<string, string>): Record<string, string> {
  const u = sandboxUpstream(sandbox);
  return {
    PATH: process.env.PATH ?? '',
    RISKGATE_STATE_DIR: mkdtempSync(join(tmpdir(), 'riskgate-process-state-')),
    RISKGATE_PORT: '0',
    RISKGATE_WORKERS: '1',
    RISKGATE_API_KEYS: PROCESS_KEY,
    RISKGATE_OPS_KEYS: PROCESS_OPS_KEY,
    RISKGATE_SERVICE_ID: u.serviceId,
    RISKGATE_SIGNALS_URL: u.signalsUrl,
    RISKGATE_AUTH_URL: u.authUrl,
    RISKGATE_CLIENT_ID: u.clientId,
    RISKGATE_CLIENT_SECRET: u.clientSecret,
    RISKGATE_SIGNALS_AUDIENCE: u.signalsAudience,
    RISKGATE_SIGNALS_IDP: u.signalsIdp!,
    RISKGATE_ADMIN_URL: u.adminUrl,
    RISKGATE_ADMIN_API_KEY: u.adminApiKey,
    RISKGATE_HOST: '127.0.0.1',
    ...extra,
  };
}

export interface RiskgateProcess {
  child: ChildProcess;
  stderr: () => string;
  exited: Promise<number | null>;
  /** Resolves with the port once the process says it listens (rejects if it exits first). */
  port: () => Promise<number>;
  /**
   * Signals the process; SIGKILL (the default, a crash or a cleanup) goes to its whole process
   * group, so no cluster worker outlives it.
   */
  kill: (signal?: NodeJS.Signals) => void;
}

export function startProcess(
  main: string,
  env: Record<string, string>,
  nodeArgs: string[] = [],
): RiskgateProcess {
  const child = spawnTree(process.execPath, [...nodeArgs, main], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    stderr: () => stderr,
    exited,
    kill: (signal = 'SIGKILL') => {
      if (signal === 'SIGKILL') signalTree(child, signal);
      else if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    port: async () => {
      // The port it logs once listening, or -1 once it exited (or after 45 s: a start on a starved
      // machine, two workers forked and each compiling its policy, can take tens of seconds) without.
      const port = await eventually(
        () => {
          const m = /"msg":"riskgate listening","host":"[^"]*","port":(\d+)/.exec(stderr);
          if (m) return Number(m[1]);
          return child.exitCode !== null || child.signalCode !== null ? -1 : undefined;
        },
        { timeoutMs: 45_000, what: 'riskgate listening' },
      ).catch(() => -1);
      if (port < 0) throw new Error(`riskgate did not start: ${stderr.slice(-2000)}`);
      return port;
    },
  };
}
