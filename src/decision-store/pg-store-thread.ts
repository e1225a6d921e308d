import { parentPort, workerData } from 'node:worker_threads';
import pg from 'pg';
import { type PostgresConnection, pgClientConfig } from '../database/postgres-connection.ts';
import { isRefusedRow } from '../database/refused-row.ts';
import type { WireBatch } from './decision-wire.ts';
import { columnTypes, isServerError, pgWireWriter } from './pg-batch-wire.ts';
import type { ThreadReply, ThreadRequest } from './store-thread.ts';

/**
 * The decision store's PostgreSQL writer thread (src/decision-store/pg-thread-sink.ts says why):
 * one `pg` client of its own, connected on the first write and again after a failure, with the
 * pool's connect and statement timeouts (src/database/database.ts). Writes run one at a time, in
 * order. A failure is answered with PostgreSQL's SQLSTATE, so the store's writer keeps its
 * accounting (a refused row set aside, a failing store retried with backoff, then dropped past
 * its buffer); a lost connection is retried once at once on a fresh one, never more.
 */

const connection = workerData as PostgresConnection;

/** The writer's `application_name` (pg_stat_activity). */
const WRITER_APPLICATION_NAME = 'riskgate decision store writer';

interface Open {
  client: pg.Client;
  write: (batch: WireBatch) => Promise<void>;
  /** Set when the connection reports an error between statements: it is not used again. */
  broken: boolean;
}

let open: Open | undefined;

async function connect(): Promise<Open> {
  // Named, so an operator tells it from the pool's connections in pg_stat_activity.
  const client = new pg.Client({ ...pgClientConfig(connection), application_name: WRITER_APPLICATION_NAME });
  const opened: Open = { client, write: async () => {}, broken: false };
  // Unheard, a connection's error (the server restarted while idle) would end the thread.
  client.on('error', () => {
    opened.broken = true;
  });
  try {
    await client.connect();
    opened.write = pgWireWriter(client, await columnTypes(client));
  } catch (error) {
    drop(opened);
    throw error;
  }
  return opened;
}

/** Ends a connection at once: a frozen server would never answer a graceful goodbye. */
function drop(o: Open): void {
  if (open === o) open = undefined;
  (o.client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

/** Whether a failure says the connection was lost before the server got to the batch. */
function lostConnection(error: unknown): boolean {
  if (isServerError(error)) return /^(08|57P0)/.test((error as { code: string }).code);
  return !/timeout/i.test(error instanceof Error ? error.message : String(error));
}

async function write(batch: WireBatch): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const reused = open !== undefined && !open.broken;
    if (open?.broken) drop(open);
    open ??= await connect();
    const o = open;
    try {
      await o.write(batch);
      return;
    } catch (error) {
      // A refused row leaves the connection as it was (the transaction rolled back): kept.
      if (!isRefusedRow(error)) drop(o);
      // One retry, on a fresh connection, when a connection that had been idle was found gone.
      if (attempt > 0 || !reused || !lostConnection(error)) throw error;
    }
  }
}

async function answer(request: ThreadRequest): Promise<ThreadReply> {
  try {
    if (request.type === 'write') await write(request.batch);
    // Retention runs on the main thread's pool (pg-thread-sink.ts): never asked here.
    else if (request.type === 'prune') throw new Error('retention is not written from this thread');
    return { id: request.id, ok: true, value: 0 };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return {
      id: request.id,
      ok: false,
      error: error instanceof Error ? error.message : String(error),
      code: typeof code === 'string' ? code : undefined,
    };
  }
}

// Writes one at a time, in order; a close at once (a write stuck on a frozen server is abandoned).
let chain = Promise.resolve();
parentPort!.on('message', (request: ThreadRequest) => {
  if (request.type === 'close') {
    if (open !== undefined) drop(open);
    parentPort!.postMessage({ id: request.id, ok: true, value: 0 } satisfies ThreadReply);
    parentPort!.close();
    return;
  }
  chain = chain.then(async () => {
    parentPort!.postMessage(await answer(request));
  });
});
