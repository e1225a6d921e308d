import { type ChildProcess, execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnTree, stopTree } from '../test/support/process-tree.ts';
import type { CannonJob, ClosedLoopJob, GeneratorReply, OpenLoopJob } from './open-loop-generator.ts';

/** A job as the harness hands it over; the generator wrapper numbers it. */
export type JobInput = Omit<OpenLoopJob, 'id'> | Omit<CannonJob, 'id'> | Omit<ClosedLoopJob, 'id'>;

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Which core each process runs on; `undefined` means unpinned. */
export interface Pinning {
  available: boolean;
  riskgate: string | undefined;
  sandbox: string | undefined;
  load: string | undefined;
  note: string;
}

/**
 * Cores for riskgate, the sandbox and the load generator. With three or more cores each gets its
 * own; with two, riskgate (what we measure) gets core 0 to itself and the generator shares core 1
 * with the sandbox; without taskset (or with `--no-pin`) nothing is pinned, and the note says so.
 */
export function planPinning(wanted: boolean): Pinning {
  const cores = availableParallelism();
  const none = (note: string): Pinning => ({
    available: false,
    riskgate: undefined,
    sandbox: undefined,
    load: undefined,
    note,
  });
  if (!wanted) return none('unpinned (--no-pin)');
  let hasTaskset = false;
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    hasTaskset = true;
  } catch {
    hasTaskset = false;
  }
  if (!hasTaskset) return none('unpinned: taskset not found');
  if (cores < 2) return none('unpinned: one core');
  if (cores === 2) {
    return {
      available: true,
      riskgate: '0',
      sandbox: '1',
      load: '1',
      note: 'riskgate on core 0; sandbox and load generator share core 1 (2 cores)',
    };
  }
  return {
    available: true,
    riskgate: '0',
    sandbox: '1',
    load: '2',
    note: 'riskgate on core 0, sandbox on core 1, load generator on core 2',
  };
}

/**
 * CPU time (user + system) a process has used so far, microseconds, from `/proc/<pid>/stat`
 * (10 ms resolution at the usual 100 ticks/s). Undefined where /proc does not exist.
 */
export function processCpuUs(pid: number, statPath = `/proc/${pid}/stat`): number | undefined {
  try {
    const stat = readFileSync(statPath, 'utf8');
    // Fields after the command name (which may contain spaces) start at state, field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * 10_000 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * CPU time (user + system) of a process's main thread so far, microseconds, from
 * `/proc/<pid>/task/<pid>/stat` (the same ticks as {@link processCpuUs}). Undefined where /proc
 * does not exist.
 */
export function mainThreadCpuUs(pid: number): number | undefined {
  return processCpuUs(pid, `/proc/${pid}/task/${pid}/stat`);
}

/**
 * CPU time (user + system) of a process's threads named `name` (`/proc/<pid>/task/<tid>/comm`: a
 * worker thread's `name`, e.g. the decision store's writer), summed, microseconds. Undefined where
 * /proc does not exist; 0 when no thread has the name (not started yet).
 */
export function threadCpuUs(pid: number, name: string): number | undefined {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  let total = 0;
  for (const tid of tids) {
    try {
      if (readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() !== name) continue;
    } catch {
      continue; // the thread ended
    }
    total += processCpuUs(pid, `/proc/${pid}/task/${tid}/stat`) ?? 0;
  }
  return total;
}

/**
 * CPU time (user + system) of a process and every live descendant (a cluster primary and its
 * workers; each process's threads are in its own figure) but tsx's esbuild service, microseconds,
 * from `/proc`. Undefined
 * where /proc does not exist. A descendant that exited in between drops out of the sum, so a step
 * measured across a worker's restart reads low: the bench restarts none.
 */
export function processTreeCpuUs(pid: number): number | undefined {
  const own = processCpuUs(pid);
  if (own === undefined) return undefined;
  let total = own;
  for (const child of childPids(pid)) if (!isEsbuild(child)) total += processTreeCpuUs(child) ?? 0;
  return total;
}

/** A process and its live descendants, parents first, but tsx's esbuild service (the harness's). */
export function processTree(pid: number): number[] {
  return [
    pid,
    ...childPids(pid)
      .filter((child) => !isEsbuild(child))
      .flatMap(processTree),
  ];
}

function isEsbuild(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'esbuild';
  } catch {
    return false;
  }
}

/** The pids of a process's children, from `/proc/<pid>/task/<tid>/children` of each of its threads. */
function childPids(pid: number): number[] {
  const pids: number[] = [];
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return pids;
  }
  for (const tid of tasks) {
    try {
      for (const word of readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ')) {
        if (word.trim() !== '') pids.push(Number(word));
      }
    } catch {
      // the thread ended
    }
  }
  return pids;
}

/** A free TCP port on loopback (bound then released; a race is possible but harmless here). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** A server process the harness started, with the tail of its output for error messages. */
export interface ServerProcess {
  name: string;
  child: ChildProcess;
  pid: number;
  url: string;
  /** Last lines of stdout/stderr. */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts `node --import tsx <entry>` (under `taskset -c <cpu>` when pinned) with `env`, and waits
 * until `readyPath` answers 200 (polling every 100 ms, up to `readyTimeoutMs`, default 30 000).
 * The process is tied to this one (test/support/process-tree.ts): it dies with the harness, even
 * when the harness is SIGKILLed.
 */
export async function startServer(options: {
  name: string;
  entry: string;
  port: number;
  cpu: string | undefined;
  env: Record<string, string>;
  readyPath: string;
  nodeArgs?: string[];
  readyTimeoutMs?: number;
}): Promise<ServerProcess> {
  const nodeArgs = [...(options.nodeArgs ?? []), '--import', 'tsx', options.entry];
  const [command, args] =
    options.cpu === undefined
      ? [process.execPath, nodeArgs]
      : ['taskset', ['-c', options.cpu, process.execPath, ...nodeArgs]];
  const child = spawnTree(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const keep = (chunk: Buffer): void => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line.trim() === '') continue;
      lines.push(line);
      if (lines.length > 40) lines.shift();
    }
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const url = `http://127.0.0.1:${options.port}`;
  let exited: number | null | undefined;
  child.once('exit', (code) => {
    exited = code;
  });
  const server: ServerProcess = {
    name: options.name,
    child,
    pid: child.pid ?? -1,
    url,
    output: () => lines.join('\n'),
    stop: () => stopTree(child),
  };
  const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
  while (Date.now() < deadline) {
    if (exited !== undefined) {
      throw new Error(`${options.name} exited with code ${exited} before it was ready:\n${server.output()}`);
    }
    try {
      const response = await fetch(`${url}${options.readyPath}`, { signal: AbortSignal.timeout(1000) });
      await response.arrayBuffer();
      if (response.ok) return server;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await server.stop();
  throw new Error(`${options.name} was not ready at ${url}${options.readyPath} in time:\n${server.output()}`);
}

/** The forked load generator: send it jobs, get results. */
export interface Generator {
  run<R>(job: JobInput): Promise<R>;
  stop(): Promise<void>;
}

/**
 * Starts bench/open-loop-generator.ts with an IPC channel, tied to this process like the servers,
 * and pins all its threads to `cpu` when given.
 */
export async function startGenerator(cpu: string | undefined): Promise<Generator> {
  const entry = fileURLToPath(new URL('./open-loop-generator.ts', import.meta.url));
  const child = spawnTree(process.execPath, ['--import', 'tsx', entry], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  let nextId = 1;
  const ready = new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) =>
      reject(new Error(`load generator exited with code ${code} before it was ready`)),
    );
    child.on('message', (message: GeneratorReply) => {
      if (message.type === 'ready') {
        resolve();
        return;
      }
      const waiter = pending.get(message.id);
      if (!waiter) return;
      pending.delete(message.id);
      if (message.type === 'result') waiter.resolve(message.result);
      else waiter.reject(new Error(`load generator: ${message.message}`));
    });
  });
  child.on('exit', (code) => {
    for (const waiter of pending.values())
      waiter.reject(new Error(`load generator exited with code ${code}`));
    pending.clear();
  });
  await ready;
  if (cpu !== undefined && child.pid !== undefined) {
    // -a: every thread, including the ones V8 and libuv already started.
    execFileSync('taskset', ['-a', '-p', '-c', cpu, String(child.pid)], { stdio: 'ignore' });
  }
  return {
    run<R>(job: JobInput): Promise<R> {
      const id = nextId++;
      return new Promise<R>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
        child.send({ ...job, id });
      });
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.send({ type: 'exit' });
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
      await stopTree(child);
    },
  };
}

/** A cgroup CPU quota on a process (`limitCpu`). */
export interface CpuLimit {
  /** False when no writable cgroup CPU controller exists: the process runs uncapped. */
  capped: boolean;
  /** The cgroup directory (when capped). */
  dir?: string;
  note: string;
  /** Moves the process back to the parent group (uncapped) and removes the group. */
  release(): void;
}

/**
 * Caps a process at `fraction` of one core with a cgroup CPU quota per `periodUs` (default 10 ms,
 * so the throttle is short: a small container's CPU limit, not a stall; Kubernetes' default period
 * is 100 ms, which the stress test uses). The overload scenario uses it to make riskgate, not the
 * load generator or the emulator sharing the other core, the bottleneck on a 2-core machine. Needs
 * a writable cgroup CPU controller (v1 `cpu`, or v2 `cpu.max`); without one the process runs
 * uncapped, `capped` is false and the note says so.
 */
export function limitCpu(pid: number, fraction: number, periodUs = 10_000): CpuLimit {
  // The whole tree: riskgate's default process model may be a cluster primary and its workers.
  const pids = processTree(pid);
  const quotaUs = Math.max(1000, Math.round(periodUs * fraction));
  const candidates = [
    {
      dir: `/sys/fs/cgroup/cpu/riskgate-bench-${pid}`,
      write: (dir: string) => {
        // The period first: a quota above the old period would be refused.
        writeFileSync(`${dir}/cpu.cfs_period_us`, String(periodUs));
        writeFileSync(`${dir}/cpu.cfs_quota_us`, String(quotaUs));
      },
    },
    {
      dir: `/sys/fs/cgroup/riskgate-bench-${pid}`,
      write: (dir: string) => writeFileSync(`${dir}/cpu.max`, `${quotaUs} ${periodUs}`),
    },
  ];
  for (const c of candidates) {
    try {
      mkdirSync(c.dir);
      c.write(c.dir);
      for (const p of pids) writeFileSync(`${c.dir}/cgroup.procs`, String(p));
      return {
        capped: true,
        dir: c.dir,
        note: `riskgate capped at ${fraction} of a core (cgroup quota ${quotaUs} µs per ${periodUs} µs)`,
        release: () => {
          // Back to the parent group (uncapped), then remove the empty group.
          for (const p of pids) {
            try {
              writeFileSync(`${dirname(c.dir)}/cgroup.procs`, String(p));
            } catch {
              // the process has exited
            }
          }
          try {
            rmdirSync(c.dir);
          } catch {
            // still busy; the kernel frees it with its last task
          }
        },
      };
    } catch {
      try {
        rmdirSync(c.dir);
      } catch {
        // not created
      }
    }
  }
  return { capped: false, note: 'riskgate not capped: no writable cgroup CPU controller', release: () => {} };
}

/**
 * Whether `limitCpu` can cap a process here: creates and removes an empty group under the cgroup
 * v1 `cpu` controller or v2 (with `cpu` among its controllers). Moves no process.
 */
export function canLimitCpu(): boolean {
  const dirs = [`/sys/fs/cgroup/cpu/riskgate-probe-${process.pid}`];
  try {
    if (readFileSync('/sys/fs/cgroup/cgroup.controllers', 'utf8').split(/\s+/).includes('cpu'))
      dirs.push(`/sys/fs/cgroup/riskgate-probe-${process.pid}`);
  } catch {
    // not cgroup v2
  }
  for (const dir of dirs) {
    try {
      mkdirSync(dir);
      rmdirSync(dir);
      return true;
    } catch {
      // not writable here
    }
  }
  return false;
}
