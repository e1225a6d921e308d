import type { Pool } from 'undici';
import type { UpstreamName } from '../errors/riskgate-error.ts';
import { type CallInfo, type RetryTuning, retryDefaults, type UpstreamContext } from './upstream-call.ts';
import { createUpstreamPool, type UpstreamPoolOptions } from './upstream-pool.ts';

/** What a client decides about its upstream; the rest are shared defaults. Times in milliseconds. */
export interface UpstreamClientSettings {
  upstream: UpstreamName;
  /** `scheme://host[:port]` (see `splitBaseUrl`). */
  origin: string;
  /** Upper bound on open connections to the origin. */
  connections: number;
  /** Connection tuning (timeouts are backstops; calls carry their own). */
  pool?: Omit<UpstreamPoolOptions, 'connections'> | undefined;
  /** Timeout of one attempt when the call gives none. */
  defaultTimeoutMs: number;
  /** Retry limits; defaults in `retryDefaults`. */
  retry?: RetryTuning | undefined;
  /** Larger bodies are malformed. */
  maxBodyBytes: number;
  /** Epoch milliseconds. */
  now: () => number;
  onCall?: ((info: CallInfo) => void) | undefined;
}

/**
 * The connection pool of one client and the `UpstreamContext` its calls run in. The client owns
 * the pool: it closes it in its own `close()`.
 */
export function createUpstreamContext(s: UpstreamClientSettings): { ctx: UpstreamContext; pool: Pool } {
  const pool = createUpstreamPool(s.origin, { ...s.pool, connections: s.connections });
  const ctx: UpstreamContext = {
    upstream: s.upstream,
    dispatcher: pool,
    now: s.now,
    defaultTimeoutMs: s.defaultTimeoutMs,
    ...retryDefaults(s.retry),
    maxBodyBytes: s.maxBodyBytes,
    onCall: s.onCall,
  };
  return { ctx, pool };
}
