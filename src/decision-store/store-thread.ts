import { Worker } from 'node:worker_threads';
import { settlesWithin } from '../timing/with-timeout.ts';
import type { Retention } from './decision-batch.ts';
import type { WireBatch } from './decision-wire.ts';

/**
 * The main thread's side of a decision store writer thread (SQLite: sqlite-store-thread.ts,
 * PostgreSQL: pg-store-thread.ts): requests by id, each answered by a typed reply; a thread that
 * dies fails what waits on it and is started again on the next request; closing waits a bounded
 * time, then ends the thread.
 */

export type ThreadRequest =
  | { id: number; type: 'write'; batch: WireBatch }
  | { id: number; type: 'prune'; retention: Retention; nowMs: number }
  | { id: number; type: 'close' };

/**
 * A thread's answer. A failure carries the database's own code, so the writer tells a refused row
 * from a failing store (src/database/refused-row.ts): SQLite's `errcode`, PostgreSQL's SQLSTATE `code`.
 */
export type ThreadReply =
  | { id: number; ok: true; value: number }
  | { id: number; ok: false; error: string; errcode?: number | undefined; code?: string | undefined };

/** A request before it is given its id. */
export type ThreadAsk = ThreadRequest extends infer R
  ? R extends ThreadRequest
    ? Omit<R, 'id'>
    : never
  : never;

type Waiter = { resolve: (value: number) => void; reject: (error: Error) => void };

/** Longest wait for a thread to answer its close, then to exit, milliseconds. */
const CLOSE_WAIT_MS = 2000;

/**
 * The OS name of every decision store writer thread (`comm`, at most 15 bytes): what
 * bench/hot-path-cpu.ts `--thread` finds it by in /proc, beside the control database's.
 */
export const STORE_THREAD_NAME = 'decision-store';

/** The thread running `file` (a URL beside the caller's module) with `workerData`, started on first use. */
export function storeThread(file: URL, workerData: unknown) {
  let worker: Worker | undefined;
  let nextId = 1;
  const waiting = new Map<number, Waiter>();

  const failAll = (error: Error) => {
    for (const w of waiting.values()) w.reject(error);
    waiting.clear();
  };
  const start = (): Worker => {
    const w = new Worker(file, { workerData, name: STORE_THREAD_NAME });
    w.unref();
    w.on('message', (reply: ThreadReply) => {
      const waiter = waiting.get(reply.id);
      if (waiter === undefined) return;
      waiting.delete(reply.id);
      if (reply.ok) waiter.resolve(reply.value);
      else {
        const { errcode, code } = reply;
        waiter.reject(Object.assign(new Error(reply.error), { errcode, code }));
      }
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
  const ask = (request: ThreadAsk): Promise<number> => {
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
    // A thread stuck on a write (a locked file, a frozen server) is ended rather than waited for,
    // and so is one that answered but does not exit (a socket it could not let go of).
    const answered = await settlesWithin(
      ask({ type: 'close' }).catch(() => {}),
      CLOSE_WAIT_MS,
      { ref: false },
    );
    if (!answered || !(await settlesWithin(exited, CLOSE_WAIT_MS, { ref: false }))) await w.terminate();
  };
  return {
    ask,
    close,
    /** Whether a thread is running (tests: the stop path ends it). */
    running: () => worker !== undefined,
  };
}

/** The URL of the thread module `name` beside `base`: built to dist/ as .js, run from src/ as .ts. */
export function threadFile(name: string, base: string): URL {
  return new URL(base.endsWith('.ts') ? `./${name}.ts` : `./${name}.js`, base);
}
