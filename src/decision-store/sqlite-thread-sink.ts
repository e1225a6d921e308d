import { Worker } from 'node:worker_threads';
import { settlesWithin } from '../timing/with-timeout.ts';
import type { DecisionSink, Retention } from './decision-batch.ts';
import { type WireBatch, wireBatch } from './sqlite-batch-wire.ts';

/**
 * The decision store's SQLite writes on a worker thread. node:sqlite is synchronous: a batch of
 * 500 decisions written on the main thread holds its event loop 17 to 50 ms (measured on the 2-core
 * CI machine, bench/RESULTS.md "Issue 25"), which every decision waiting behind it would pay. On a
 * thread of its own, with its own connection (WAL: the main thread's reads go on meanwhile), the
 * main thread only builds the rows and hands them over, as flat arrays (sqlite-batch-wire.ts). A thread that dies is started again on the
 * next request.
 */

export type ThreadRequest =
  | { id: number; type: 'write'; batch: WireBatch }
  | { id: number; type: 'prune'; retention: Retention; nowMs: number }
  | { id: number; type: 'close' };

export type ThreadReply =
  | { id: number; ok: true; value: number }
  | { id: number; ok: false; error: string; errcode?: number | undefined };

type Waiter = { resolve: (value: number) => void; reject: (error: Error) => void };

// Built to dist/ as .js beside this file; run from src/ (tsx, vitest) as .ts, by Node's own type stripping.
const THREAD_FILE = new URL(
  import.meta.url.endsWith('.ts') ? './sqlite-store-thread.ts' : './sqlite-store-thread.js',
  import.meta.url,
);

/** A sink writing the SQLite file at `path` from a worker thread. */
export function sqliteThreadSink(path: string, options: { busyTimeoutMs?: number } = {}): DecisionSink {
  let worker: Worker | undefined;
  let nextId = 1;
  const waiting = new Map<number, Waiter>();

  const failAll = (error: Error) => {
    for (const w of waiting.values()) w.reject(error);
    waiting.clear();
  };
  const start = (): Worker => {
    const w = new Worker(THREAD_FILE, { workerData: { path, busyTimeoutMs: options.busyTimeoutMs ?? 5000 } });
    w.unref();
    w.on('message', (reply: ThreadReply) => {
      const waiter = waiting.get(reply.id);
      if (waiter === undefined) return;
      waiting.delete(reply.id);
      if (reply.ok) waiter.resolve(reply.value);
      // SQLite's code crosses too: the writer tells a refused row from a failing file by it.
      else waiter.reject(Object.assign(new Error(reply.error), { errcode: reply.errcode }));
    });
    w.on('error', (error) => {
      if (worker === w) worker = undefined;
      failAll(error);
    });
    w.on('exit', () => {
      if (worker === w) worker = undefined;
      failAll(new Error('the decision store thread exited'));
    });
    return w;
  };
  const ask = (
    request: ThreadRequest extends infer R ? (R extends ThreadRequest ? Omit<R, 'id'> : never) : never,
  ): Promise<number> => {
    worker ??= start();
    const id = nextId++;
    return new Promise<number>((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      worker!.postMessage({ ...request, id });
    });
  };
  const close = async (): Promise<void> => {
    const w = worker;
    if (w === undefined) return;
    const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
    // A thread stuck on a write (a locked file) is ended rather than waited for.
    if (
      !(await settlesWithin(
        ask({ type: 'close' }).catch(() => {}),
        2000,
        { ref: false },
      ))
    ) {
      await w.terminate();
    }
    await settlesWithin(exited, 2000, { ref: false });
  };
  return {
    write: async (ops) => {
      await ask({ type: 'write', batch: wireBatch(ops) });
    },
    prune: (retention, nowMs) => ask({ type: 'prune', retention, nowMs }),
    close,
    // The next request starts a thread, which opens the file at `path` again.
    restart: close,
  };
}
