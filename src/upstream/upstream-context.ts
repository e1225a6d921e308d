import type { Pool } from 'undici';
import type { UpstreamName } from '../errors/riskgate-error.ts';
import type { Clock } from '../timing/clock.ts';
import type { CallTracer } from './call-tracer.ts';
import type { CircuitBreakers } from './circuit-breaker.ts';
import { type CallInfo, type RetryTuning, retryDefaults, type UpstreamContext } from './upstream-call.ts';
import { createUpstreamPool, type UpstreamPoolOptions } from './upstream-pool.ts';
import type { LateAnswers } from './upstream-request.ts';

/** What a client's options may tune about its upstream (all optional). Times in milliseconds. */
export interface UpstreamTuning {
  /** Upper bound on open connections to the origin. */
  connections?: number | undefined;
  /** Connection tuning (timeouts are backstops; calls carry their own). */
  pool?: Omit<UpstreamPoolOptions, 'connections'> | undefined;
  /** Timeout of one attempt when the call gives none. */
  defaultTimeoutMs?: number | undefined;
  /** Retry limits; defaults in `retryDefaults`. */
  retry?: RetryTuning | undefined;
  /** Larger bodies are malformed, bytes. */
  maxBodyBytes?: number | undefined;
  onCall?: ((info: CallInfo) => void) | undefined;
  /** Client spans and `traceparent` on every call (src/observability/tracing.ts); off when unset. */
  tracer?: CallTracer | undefined;
  /** Per-route circuit breakers (src/upstream/circuit-breaker.ts); off when unset. */
  breakers?: CircuitBreakers | undefined;
}

/** A client's own defaults for what `UpstreamTuning` leaves out. */
export interface UpstreamDefaults {
  connections: number;
  defaultTimeoutMs: number;
  maxBodyBytes: number;
}

/**
 * The connection pool of one client and the `UpstreamContext` its calls run in, from the client's
 * options (`tuning`) over its own `defaults`. The client owns the pool: its own `close()` calls the
 * `close` returned here (late answers still being drained are aborted first).
 *
 * @param origin `scheme://host[:port]` (see `splitBaseUrl`).
 * @param clock the client's clock (its wall time signs and dates requests).
 */
export function createUpstreamContext(
  upstream: UpstreamName,
  origin: string,
  clock: Clock,
  tuning: UpstreamTuning,
  defaults: UpstreamDefaults,
): { ctx: UpstreamContext; pool: Pool; close: () => Promise<void> } {
  const pool = createUpstreamPool(origin, {
    ...tuning.pool,
    connections: tuning.connections ?? defaults.connections,
  });
  const lateAnswers: LateAnswers = new Set();
  const ctx: UpstreamContext = {
    upstream,
    dispatcher: pool,
    clock,
    defaultTimeoutMs: tuning.defaultTimeoutMs ?? defaults.defaultTimeoutMs,
    ...retryDefaults(tuning.retry),
    maxBodyBytes: tuning.maxBodyBytes ?? defaults.maxBodyBytes,
    lateAnswerGraceMs: tuning.pool?.lateAnswerGraceMs ?? 5000,
    lateAnswers,
    onCall: tuning.onCall,
    tracer: tuning.tracer,
    origin,
    breakers: tuning.breakers,
  };
  /** Ends the late answers nobody waits for, then closes the pool once in-flight calls finish. */
  const close = async (): Promise<void> => {
    const closing = new Error('client closed');
    for (const a of [...lateAnswers]) a.abort(closing);
    await pool.close();
  };
  return { ctx, pool, close };
}
