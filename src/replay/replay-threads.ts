import { Worker } from 'node:worker_threads';
import type { ReplayPiecesReply, ReplayPiecesTask } from './replay-pieces.ts';
import type { ReplayStretchReply, ReplayStretchTask } from './replay-stretch.ts';

/**
 * Starts replay threads (replay-thread.ts), one per task, for `riskgate replay` (pieces of a log
 * file, replay-pieces.ts) and for a policy version's backtest (a stretch of the store each) alike.
 */

// Built to dist/ as .js beside this file; run from src/ (tsx, vitest) as .ts, by Node's own type stripping.
const THREAD_FILE = new URL(
  import.meta.url.endsWith('.ts') ? './replay-thread.ts' : './replay-thread.js',
  import.meta.url,
);

/** A loader argument of tsx's: its package (`tsx`, `tsx/esm`) or a file in it, by path or URL. */
const TSX = /(^|[\\/])tsx([\\/@]|$)/;
const LOADER_FLAGS: ReadonlySet<string> = new Set([
  '--import',
  '--require',
  '-r',
  '--loader',
  '--experimental-loader',
]);

/**
 * A thread's Node options: the caller's, less tsx's loader (`npx tsx` runs Node with `--require
 * .../tsx/dist/preflight.cjs --import .../tsx/dist/loader.mjs`, which a thread inherits). Every
 * module a thread loads is erasable TypeScript, which Node 24 strips itself (a thread started by
 * vitest already loads them so); through tsx each thread would compile them all again with esbuild,
 * 1-1.5 s of CPU a thread. Any other option (`--cpu-prof`, another `--import`) passes on; V8's
 * options (a heap limit) Node refuses in a thread's, and `startThread` drops.
 */
export function threadExecArgv(execArgv: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!;
    const eq = arg.indexOf('=');
    const flag = eq === -1 ? arg : arg.slice(0, eq);
    if (!LOADER_FLAGS.has(flag)) {
      kept.push(arg);
      continue;
    }
    const value = eq === -1 ? execArgv[i + 1] : arg.slice(eq + 1);
    if (value !== undefined && TSX.test(value)) {
      if (eq === -1) i++;
      continue;
    }
    kept.push(arg);
  }
  return kept;
}

/**
 * A thread started with `execArgv`, and the options it started with. Node refuses V8's options in a
 * thread's (`--max-old-space-size`, `--stack-size`: `ERR_WORKER_INVALID_EXEC_ARGV`, naming them in
 * its message), though they hold for every thread of the process already: the thread is started
 * again without those named, or without any option when they cannot be told apart.
 */
function startThread(workerData: unknown, execArgv: string[]): { worker: Worker; execArgv: string[] } {
  const refused = (e: unknown) => (e as NodeJS.ErrnoException).code === 'ERR_WORKER_INVALID_EXEC_ARGV';
  try {
    return { worker: new Worker(THREAD_FILE, { workerData, execArgv }), execArgv };
  } catch (e) {
    if (!refused(e)) throw e;
    const named = new Set((e as Error).message.replace(/^[^:]*: /, '').split(', '));
    const kept = execArgv.filter((arg) => !named.has(arg));
    try {
      return { worker: new Worker(THREAD_FILE, { workerData, execArgv: kept }), execArgv: kept };
    } catch (again) {
      if (!refused(again)) throw again;
      return { worker: new Worker(THREAD_FILE, { workerData, execArgv: [] }), execArgv: [] };
    }
  }
}

/** Thrown when `signal` stopped the threads: their stretches are not replayed. */
export class ReplayStopped extends Error {
  constructor() {
    super('the replay was stopped');
    this.name = 'ReplayStopped';
  }
}

/**
 * Each task on a thread of its own; every thread is waited for. An abort of `signal` terminates
 * them all at once and rejects with {@link ReplayStopped}.
 */
export function replayOnThreads(
  tasks: readonly ReplayStretchTask[],
  signal?: AbortSignal,
): Promise<ReplayStretchReply[]>;
export function replayOnThreads(
  tasks: readonly ReplayPiecesTask[],
  signal?: AbortSignal,
): Promise<ReplayPiecesReply[]>;
export async function replayOnThreads(
  tasks: readonly (ReplayStretchTask | ReplayPiecesTask)[],
  signal?: AbortSignal,
): Promise<(ReplayStretchReply | ReplayPiecesReply)[]> {
  signal?.throwIfAborted();
  const workers: Worker[] = [];
  let execArgv = threadExecArgv(process.execArgv);
  const stop = () => {
    for (const w of workers) void w.terminate();
  };
  signal?.addEventListener('abort', stop, { once: true });
  try {
    const replies = await Promise.all(
      tasks.map(
        (workerData) =>
          new Promise<ReplayStretchReply | ReplayPiecesReply>((resolve) => {
            // The options the first thread started with, for the others (this runs for each in turn).
            const started = startThread(workerData, execArgv);
            execArgv = started.execArgv;
            const w = started.worker;
            workers.push(w);
            w.once('message', (reply: ReplayStretchReply | ReplayPiecesReply) => resolve(reply));
            w.once('error', (e) => resolve({ ok: false, error: { message: e.message } }));
            w.once('exit', (code) =>
              resolve({ ok: false, error: { message: `the replay thread exited (code ${code})` } }),
            );
          }),
      ),
    );
    if (signal?.aborted) throw new ReplayStopped();
    return replies;
  } finally {
    signal?.removeEventListener('abort', stop);
  }
}
