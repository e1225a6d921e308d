import { parentPort, workerData } from 'node:worker_threads';
import { pruneStep } from './decision-batch.ts';
import { wireWriter } from './sqlite-batch-wire.ts';
import { openWriterConnections } from './sqlite-writer-connections.ts';
import type { ThreadReply, ThreadRequest } from './store-thread.ts';

/**
 * The decision store's SQLite writer thread (src/decision-store/sqlite-thread-sink.ts says why):
 * its own connection to the file the main thread migrated and reads, one request at a time.
 */

const { path, busyTimeoutMs } = workerData as { path: string; busyTimeoutMs: number };
// Requests run one at a time: never both connections at once.
const { writer, db } = openWriterConnections(path, busyTimeoutMs);
const write = wireWriter(writer);

async function answer(request: ThreadRequest): Promise<ThreadReply> {
  try {
    switch (request.type) {
      case 'write':
        write(request.batch);
        return { id: request.id, ok: true, value: 0 };
      case 'prune':
        return { id: request.id, ok: true, value: await pruneStep(db, request.retention, request.nowMs) };
      case 'close':
        writer.close();
        await db.destroy();
        return { id: request.id, ok: true, value: 0 };
    }
  } catch (error) {
    const errcode = (error as { errcode?: unknown }).errcode;
    return {
      id: request.id,
      ok: false,
      error: error instanceof Error ? error.message : String(error),
      errcode: typeof errcode === 'number' ? errcode : undefined,
    };
  }
}

// One at a time, in order: a write never interleaves with another on this connection.
let chain = Promise.resolve();
parentPort!.on('message', (request: ThreadRequest) => {
  chain = chain.then(async () => {
    parentPort!.postMessage(await answer(request));
    if (request.type === 'close') parentPort!.close();
  });
});
