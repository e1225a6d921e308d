import type { DecisionSink } from './decision-batch.ts';
import { wireBatch } from './decision-wire.ts';
import { storeThread, threadFile } from './store-thread.ts';

/**
 * The decision store's SQLite writes on a worker thread. node:sqlite is synchronous: a batch of
 * 500 decisions written on the main thread holds its event loop 17 to 50 ms (measured on the 2-core
 * CI machine, bench/RESULTS.md "Issue 25"), which every decision waiting behind it would pay. On a
 * thread of its own, with its own connection (WAL: the main thread's reads go on meanwhile), the
 * main thread only builds the rows and hands them over, as flat arrays (decision-wire.ts). A
 * thread that dies is started again on the next request.
 */

/** A sink writing the SQLite file at `path` from a worker thread. */
export function sqliteThreadSink(path: string, options: { busyTimeoutMs?: number } = {}): DecisionSink {
  const thread = storeThread(threadFile('sqlite-store-thread', import.meta.url), {
    path,
    busyTimeoutMs: options.busyTimeoutMs ?? 5000,
  });
  return {
    write: async (ops) => {
      await thread.ask({ type: 'write', batch: wireBatch(ops) });
    },
    prune: (retention, nowMs) => thread.ask({ type: 'prune', retention, nowMs }),
    close: thread.close,
    // The next request starts a thread, which opens the file at `path` again.
    restart: thread.close,
  };
}
