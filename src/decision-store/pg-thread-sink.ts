import type { PostgresConnection } from '../database/postgres-connection.ts';
import { type DecisionDb, type DecisionSink, pruneStep } from './decision-batch.ts';
import { wireBatch } from './decision-wire.ts';
import { storeThread, threadFile } from './store-thread.ts';

/**
 * The decision store's PostgreSQL writes on a worker thread. Written through kysely on the event
 * loop (compiling each batch's statements, node-postgres serialising its parameters and parsing
 * the answers), the store cost the main thread 110 µs per record at 300/s (bench/RESULTS.md,
 * "Issue 32: the decision store's cost on the hot process"), nearly three times issue 32's 40 µs.
 * Here the main thread only builds the flat arrays (decision-wire.ts) and posts them; a thread
 * with its own connection (pg-store-thread.ts) writes them with named statements. Retention (a
 * step a minute) stays on the main thread's pool, in kysely's builder (`pruneStep`).
 */

/** A sink writing to the PostgreSQL at `connection` from a worker thread; retention through `db`. */
export function pgThreadSink(connection: PostgresConnection, db: DecisionDb): DecisionSink {
  const thread = storeThread(threadFile('pg-store-thread', import.meta.url), connection);
  return {
    write: async (ops) => {
      await thread.ask({ type: 'write', batch: wireBatch(ops) });
    },
    prune: (retention, nowMs) => pruneStep(db, retention, nowMs),
    close: thread.close,
  };
}
