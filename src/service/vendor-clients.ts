import {
  ADMIN_OPERATIONS,
  type AdminClient,
  type AdminClientOptions,
  createAdminClient,
} from '../admin/admin-client.ts';
import { audienceScope, createTokenManager, type TokenManager } from '../auth/token-manager.ts';
import type { RiskgateConfig, UpstreamConfig } from '../config/riskgate-config.ts';
import type { Component, InputWarmth, LifecycleLog } from '../lifecycle/component.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import { createSignalsClient, SIGNALS_OPERATIONS, type SignalsClient } from '../signals/signals-client.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { CallTracer } from '../upstream/call-tracer.ts';
import { type CircuitBreakerOptions, CircuitBreakers } from '../upstream/circuit-breaker.ts';
import type { CallInfo } from '../upstream/upstream-call.ts';

/** The vendor's clients and what they share: one token, one set of circuit breakers, call metrics. */
export interface VendorClients {
  tokens: TokenManager;
  signals: SignalsClient;
  admin: AdminClient;
  breakers: CircuitBreakers | undefined;
  /** Records one vendor call in the metrics (the Log API follower's calls too). */
  recordCall: (info: CallInfo) => void;
  /** Settles once the first token request finished (successful or not; see `/readyz`). */
  ready: Promise<void>;
}

export interface VendorClientsOptions {
  config: Pick<RiskgateConfig, 'signalsConnections' | 'adminConnections' | 'ratBatchWindowMs' | 'ratCacheMs'>;
  upstream: UpstreamConfig;
  metrics: RiskgateMetrics;
  log: LifecycleLog;
  tracer?: CallTracer | undefined;
  /** Circuit breaker tuning; `false`: none. */
  breakers?: Omit<CircuitBreakerOptions, 'onTransition' | 'onUncounted'> | false | undefined;
  /** Admin read cache lifetimes (defaults in `AdminClientOptions.cache`). */
  adminCache?: AdminClientOptions['cache'];
  /** The service's clock (src/timing/clock.ts). Default {@link systemClock}. */
  clock?: Clock | undefined;
}

/** The token request's scope: the audience as given when it is already the URN (config checked the rest). */
function signalsScope(upstream: UpstreamConfig): string {
  const audience = upstream.signalsAudience;
  return audience.startsWith('urn:') ? audience : audienceScope(upstream.signalsIdp!, audience);
}

/** The token's state for /healthz: never the token itself. */
function tokenHealth(tokens: TokenManager, nowMs: number): Record<string, unknown> {
  const s = tokens.stats();
  return {
    valid: tokens.isReady(),
    ...(s.expiresAt !== undefined && {
      expiresInSeconds: Math.max(0, Math.round((s.expiresAt - nowMs) / 1000)),
    }),
    consecutiveFailures: s.consecutiveFailures,
    ...(s.lastErrorCode !== undefined && { lastErrorCode: s.lastErrorCode }),
  };
}

/**
 * The token's warmth for `/readyz`: warm while one is held; before the first one (or while a
 * refresh is under way with no failure) behind; while the token endpoint fails, unavailable
 * (every replica asks the same endpoint: the degraded verdict covers it).
 */
export function tokenWarmth(tokens: TokenManager): InputWarmth {
  const s = tokens.stats();
  const everWarm = s.refreshes > 0;
  if (tokens.isReady()) return { state: 'warm', everWarm };
  if (s.consecutiveFailures > 0) {
    return {
      state: 'unavailable',
      everWarm,
      reason: `the token endpoint is failing (${s.lastErrorCode ?? 'error'}, ${s.consecutiveFailures} in a row)`,
    };
  }
  return { state: 'behind', everWarm, reason: 'the first access token is being requested' };
}

function createBreakers(o: VendorClientsOptions): CircuitBreakers | undefined {
  if (o.breakers === false) return undefined;
  const { metrics, log } = o;
  // One set of breakers for every vendor route riskgate calls (routes are named per upstream).
  const breakers = new CircuitBreakers({
    clock: o.clock ?? systemClock,
    // Tests may drive the breakers' clock alone.
    ...o.breakers,
    onTransition: (route, from, to) => {
      metrics.recordCircuitTransition(route, to);
      log({ level: to === 'open' ? 'warn' : 'info', msg: 'circuit breaker', route, from, to });
    },
    onUncounted: (route, reason) => metrics.recordCircuitNotCounted(route, reason),
  });
  breakers.declareRoutes([
    ...SIGNALS_OPERATIONS.map((op) => `signals ${op}`),
    ...ADMIN_OPERATIONS.map((op) => `admin ${op}`),
  ]);
  return breakers;
}

/**
 * The token manager (its background refresh starts here), the Trust Signals and Admin clients and
 * their circuit breakers. `/healthz` shows the token's state and the breakers not closed; `/readyz`
 * the token's warmth (`tokenWarmth`) when the active policy reads a signal.
 */
export function vendorClientsComponent(o: VendorClientsOptions): Component<VendorClients, RiskgateMetrics> {
  return {
    name: 'vendor clients',
    start() {
      const { upstream, config, metrics, tracer } = o;
      const clock = o.clock ?? systemClock;
      const breakers = createBreakers(o);
      const recordCall = (info: CallInfo) => {
        metrics.recordUpstreamCall(info.upstream, info.name, info.durationMs, info.code);
        if (info.items !== undefined) metrics.recordRemoteAccessToolBatch(info.items);
      };
      const tokens = createTokenManager({
        authUrl: upstream.authUrl,
        clientId: upstream.clientId,
        clientSecret: upstream.clientSecret,
        audience: upstream.signalsAudience,
        scope: signalsScope(upstream),
        onCall: (info) => {
          recordCall(info);
          metrics.recordTokenRefresh(info.code === undefined ? 'ok' : 'error');
        },
        tracer,
        clock,
      });
      const signals = createSignalsClient({
        baseUrl: upstream.signalsUrl,
        serviceId: upstream.serviceId,
        tokens,
        connections: config.signalsConnections,
        batch: { windowMs: config.ratBatchWindowMs },
        cache: { ttlMs: config.ratCacheMs },
        onCall: recordCall,
        tracer,
        breakers,
        clock,
      });
      const admin = createAdminClient({
        baseUrl: upstream.adminUrl,
        serviceId: upstream.serviceId,
        apiKey: upstream.adminApiKey,
        connections: config.adminConnections,
        onCall: recordCall,
        tracer,
        breakers,
        clock,
        ...(o.adminCache !== undefined && { cache: o.adminCache }),
      });
      const ready = tokens.start();
      return {
        handle: { tokens, signals, admin, breakers, recordCall, ready },
        stop: async () => {
          await Promise.all([tokens.stop(), signals.close(), admin.close()]);
        },
        ready: () => ({ token: tokenWarmth(tokens) }),
        health: () => ({
          vendor: {
            token: tokenHealth(tokens, clock.nowMs()),
            // Routes with a breaker that is not closed (a closed route is the normal case, not listed).
            circuits: breakers?.states().filter((b) => b.state !== 'closed') ?? [],
          },
        }),
        observe(registry) {
          registry.observeCircuits(() => breakers?.states() ?? []);
          registry.observeGauge(
            'riskgate_vendor_token_valid',
            '1 while a valid Trust Signals access token is held, else 0 (decisions are degraded without one)',
            () => (tokens.isReady() ? 1 : 0),
          );
          registry.observeGauge(
            'riskgate_vendor_token_consecutive_failures',
            'Token requests failed since the last success',
            () => tokens.stats().consecutiveFailures,
          );
        },
      };
    },
  };
}
