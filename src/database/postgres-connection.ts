/**
 * How riskgate connects to PostgreSQL, in a module of its own: the pool (database.ts) and the
 * decision store's writer thread (src/decision-store/pg-store-thread.ts, run by Node's type
 * stripping, which loads no module with TypeScript-only syntax) share it.
 */

/** How to open a PostgreSQL connection: the pool's settings, for a client of one's own. */
export interface PostgresConnection {
  url: string;
  /** A statement (and a wait for a pooled connection) gives up after this long, milliseconds. */
  statementTimeoutMs: number;
  /** Connecting gives up after this long, milliseconds. */
  connectTimeoutMs: number;
}

/**
 * node-postgres's settings for `connection`: the server cancels a statement past the timeout
 * (`statement_timeout`), and the client gives up waiting for its answer (`query_timeout`: a frozen
 * server never answers the cancel either).
 */
export function pgClientConfig(connection: PostgresConnection) {
  return {
    connectionString: connection.url,
    connectionTimeoutMillis: connection.connectTimeoutMs,
    statement_timeout: connection.statementTimeoutMs,
    query_timeout: connection.statementTimeoutMs,
  };
}
