import { Worker } from 'node:worker_threads';
import type { ReplayStretchReply, ReplayStretchTask } from './replay-stretch.ts';

/**
 * Starts replay threads (replay-thread.ts), one per stretch, for `riskgate replay` and for a policy
 * version's backtest alike.
 */

// Built to dist/ as .js beside this file; run from src/ (tsx, vitest) as .ts, by Node's own type stripping.
const THREAD_FILE = new URL(
  import.meta.url.endsWith('.ts') ? './replay-thread.ts' : './replay-thread.js',
  import.meta.url,
);

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
export async function replayOnThreads(
  tasks: readonly ReplayStretchTask[],
  signal?: AbortSignal,
): Promise<ReplayStretchReply[]> {
  signal?.throwIfAborted();
  const workers: Worker[] = [];
  const stop = () => {
    for (const w of workers) void w.terminate();
  };
  signal?.addEventListener('abort', stop, { once: true });
  try {
    const replies = await Promise.all(
      tasks.map(
        (workerData) =>
          new Promise<ReplayStretchReply>((resolve) => {
            const w = new Worker(THREAD_FILE, { workerData });
            workers.push(w);
            w.once('message', (reply: ReplayStretchReply) => resolve(reply));
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
