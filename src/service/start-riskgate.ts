import {
  createServer as createHttpServer,
  type Server as HttpServer,
  type RequestListener,
  type ServerOptions,
} from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import type { Hono } from 'hono';
import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import {
  ADMIN_OPERATIONS,
  type AdminClient,
  type AdminClientOptions,
  createAdminClient,
} from '../admin/admin-client.ts';
import { AdmissionControl } from '../admission/admission-control.ts';
import { shedBeforeApp } from '../admission/shed-before-app.ts';
import { audienceScope, createTokenManager, type TokenManager } from '../auth/token-manager.ts';
import { isLoopbackHost, type RiskgateConfig, type UpstreamConfig } from '../config/riskgate-config.ts';
import { actionOutcomeWriter } from '../decide/action-outcomes.ts';
import {
  DECISION_LOG_CLOSE_TIMEOUT_MS,
  type DecisionLog,
  openDecisionLog,
} from '../decision-log/decision-log.ts';
import { createRedactor } from '../decision-log/log-redaction.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { createFeatureReader } from '../features/feature-reader.ts';
import type { FeatureStore } from '../features/feature-store.ts';
import { openFeatureStore } from '../features/open-feature-store.ts';
import { FeedbackRateLimit } from '../feedback/feedback-rate-limit.ts';
import { RecentDecisions } from '../feedback/recent-decisions.ts';
import { type AcceptSockets, listenOnAcceptSockets } from '../http/accept-sockets.ts';
import { type AppDeps, createApp, readiness, type ServiceLog } from '../http/create-app.ts';
import { closeSilentConnections } from '../http/silent-connections.ts';
import { createMetrics, type RiskgateMetrics } from '../observability/metrics.ts';
import type { DecisionTracing } from '../observability/tracing.ts';
import { openOutboxStore } from '../outbox/open-outbox-store.ts';
import { Outbox, type OutboxOptions } from '../outbox/outbox.ts';
import type { OutboxStore } from '../outbox/outbox-store.ts';
import { createPolicyStore, type PolicyStore } from '../policy/policy-store.ts';
import type { CompiledPolicy } from '../policy/policy-types.ts';
import { RuleStats } from '../policy/rule-stats.ts';
import { createSignalsClient, SIGNALS_OPERATIONS, type SignalsClient } from '../signals/signals-client.ts';
import { type CircuitBreakerOptions, CircuitBreakers } from '../upstream/circuit-breaker.ts';
import type { CallInfo } from '../upstream/upstream-call.ts';
import { createLogFollower, type LogFollower, type LogFollowerOptions } from './log-follower.ts';

/**
 * Assembles riskgate from its configuration and listens: metrics, policy store, token manager,
 * clients, action outbox, decision log, Log API follower (when configured), app, server. src/main.ts calls it with the environment's
 * configuration; end-to-end tests call it against a sandbox on port 0. `stop()` is the graceful
 * shutdown: stop accepting, finish in-flight decisions, drain the actions, flush the log.
 */

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

/** Idle keep-alive connections are closed after this long, milliseconds (Node's default: 5000). */
const KEEP_ALIVE_TIMEOUT_MS = 5000;

export interface StartRiskgateOptions {
  config: RiskgateConfig;
  /** The vendor. In sandbox mode main passes the embedded sandbox's settings. */
  upstream: UpstreamConfig;
  /** Caller keys (the configured ones, or the generated development key). */
  apiKeys: readonly string[];
  /** Operator keys. Default `config.opsKeys` (RISKGATE_OPS_KEYS); main passes the generated development one. */
  opsKeys?: readonly string[] | undefined;
  /** Interface to bind. Default `config.host` (RISKGATE_HOST). */
  host?: string;
  log?: ServiceLog;
  tracing?: DecisionTracing | undefined;
  /** Overrides the configured decision log (tests collect lines). */
  decisionLog?: DecisionLog;
  /** The actions' retry delays (tests shorten the backoff); `outbox` overrides them. */
  actionQueue?: Pick<OutboxOptions, 'baseDelayMs' | 'maxDelayMs'>;
  /** Outbox tuning (tests poll faster). */
  outbox?: Partial<Omit<OutboxOptions, 'store' | 'admin' | 'onOutcome'>>;
  /** The outbox's store, opened by the caller (tests share one); default from `config.outbox`. */
  outboxStore?: OutboxStore;
  /**
   * The feature store (velocity counters, history), opened by the caller (a cluster worker passes
   * the primary's over IPC); default from `config.featureStore`. Closed on stop either way.
   */
  featureStore?: FeatureStore;
  /** Quiet period before a policy reload, milliseconds. Default 200. */
  policyDebounceMs?: number;
  /** Log API follower tuning (tests shift its clock with the sandbox's and poll faster). */
  logs?: Pick<LogFollowerOptions, 'now' | 'pollIntervalMs'>;
  /** Circuit breaker tuning (tests shorten the open period); `false`: none (tests of one failure at a time). */
  breakers?: Omit<CircuitBreakerOptions, 'onTransition' | 'onUncounted'> | false;
  /** Admin read cache lifetimes (defaults in `AdminClientOptions.cache`). */
  adminCache?: AdminClientOptions['cache'];
  /** Whether this process follows the Log API (when configured). Default true; false on workers 2..N. */
  followLogs?: boolean;
  /** What `GET /metrics` serves. Default this process's metrics (a worker gathers every worker's). */
  renderMetrics?: () => Promise<string>;
  /**
   * A node:cluster worker: the decision port is bound by this process itself, beside the other
   * workers (SO_REUSEPORT), not through the primary (src/http/accept-sockets.ts). Default false.
   */
  sharedPort?: boolean;
  /** Longest wait for in-flight requests and queued actions on stop, milliseconds. Default 10 000. */
  drainTimeoutMs?: number;
  version?: string;
}

export interface RunningRiskgate {
  url: string;
  port: number;
  /** The ops port's URL and port, when `RISKGATE_OPS_PORT` is set. */
  opsUrl: string | undefined;
  opsPort: number | undefined;
  app: Hono;
  policies: PolicyStore;
  tokens: TokenManager;
  signals: SignalsClient;
  admin: AdminClient;
  actions: ActionDispatcher;
  /** The outbox (over the memory store with RISKGATE_OUTBOX=memory). */
  outbox: Outbox;
  decisionLog: DecisionLog;
  metrics: RiskgateMetrics;
  admission: AdmissionControl;
  /** Follows the Log API when it is configured. */
  logs: LogFollower | undefined;
  /** Velocity counters and event history. */
  features: FeatureStore;
  /** Resolves once the first token request finished (successful or not; see `/readyz`). */
  ready: Promise<void>;
  /** Graceful shutdown; idempotent. */
  stop(): Promise<void>;
  /**
   * For a process about to die of a fatal error: stops accepting, reports the actions that die with
   * the process failed with `reason` (the memory outbox's, the deferred ones: nothing promised goes
   * unlogged) and flushes the decision log for at most `timeoutMs`. Never rejects; the caller exits.
   */
  abandon(reason: string, timeoutMs: number): Promise<void>;
}

/** JSON lines on stderr (stdout carries the decision log by default). */
export const stderrLog: ServiceLog = (line) => {
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), ...line })}\n`);
};

/** The token request's scope: the audience as given when it is already the URN (config checked the rest). */
function signalsScope(upstream: UpstreamConfig): string {
  const audience = upstream.signalsAudience;
  return audience.startsWith('urn:') ? audience : audienceScope(upstream.signalsIdp!, audience);
}

/**
 * An HTTP server for `app` listening on `port` and `host`, sized for a login path: headers within
 * seconds, a whole request within the deadline's order of magnitude, idle keep-alive short,
 * checked every second rather than Node's 30 s; past `maxConnections` a new one replaces the
 * longest idle or is refused at once (the file-descriptor table stays free for the vendor, the
 * decision log and a policy reload).
 * `acceptSockets` listening sockets accept a burst of connections under load
 * (src/http/accept-sockets.ts).
 */
async function listenHttp(
  app: Hono,
  o: { port: number; host: string; acceptSockets: number; shared?: boolean },
  config: RiskgateConfig,
  silent: { stop(): void }[],
  wrap?: (listener: RequestListener) => RequestListener,
): Promise<{ server: HttpServer; sockets: AcceptSockets }> {
  const server = createAdaptorServer({
    fetch: app.fetch,
    ...(wrap !== undefined && {
      createServer: ((options: ServerOptions, listener: RequestListener) =>
        createHttpServer(options, wrap(listener))) as unknown as typeof createHttpServer,
    }),
    serverOptions: {
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      connectionsCheckingInterval: 1000,
    },
  }) as HttpServer;
  silent.push(closeSilentConnections(server, config.headersTimeoutMs));
  const sockets = await listenOnAcceptSockets(server, {
    port: o.port,
    host: o.host,
    sockets: o.acceptSockets,
    maxConnections: config.maxConnections,
    shared: o.shared === true,
  });
  return { server, sockets };
}

/**
 * The shadow policy's store. A candidate that does not load never touches the active policy: it is
 * reported (log, `GET /policies`, the reload metric) and tried again every 5 s until it loads; once
 * loaded it reloads on change like the active one, keeping its last good revision on a bad edit.
 */
function openShadowPolicy(
  path: string,
  debounceMs: number,
  log: ServiceLog,
  metrics: RiskgateMetrics,
): { current(): CompiledPolicy | undefined; status(): object; close(): void; ready: Promise<void> } {
  let store: PolicyStore | undefined;
  let lastError: string | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  const tryOpen = async () => {
    try {
      const opened = await createPolicyStore({
        path,
        debounceMs,
        log: (line) => log({ ...line, shadow: true }),
        onReload: () => metrics.recordPolicyReload('ok'),
        onError: () => metrics.recordPolicyReload('error'),
      });
      if (closed) {
        opened.close();
        return;
      }
      store = opened;
      lastError = undefined;
      clearInterval(retry);
      log({ level: 'info', msg: 'shadow policy loaded', path, revision: opened.current().revision });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (message !== lastError)
        log({ level: 'error', msg: 'shadow policy not loaded', path, error: message });
      lastError = message;
    }
  };
  const ready = tryOpen();
  retry = setInterval(() => {
    if (store === undefined) void tryOpen();
  }, 5000);
  retry.unref();
  return {
    ready,
    current: () => store?.current(),
    status: () => store?.status() ?? { path, loaded: false, ...(lastError !== undefined && { lastError }) },
    close: () => {
      closed = true;
      clearInterval(retry);
      store?.close();
    },
  };
}

export async function startRiskgate(options: StartRiskgateOptions): Promise<RunningRiskgate> {
  const { config, upstream } = options;
  const log = options.log ?? stderrLog;
  const opsKeys = options.opsKeys ?? config.opsKeys ?? [];
  if (config.opsPort !== undefined && opsKeys.length === 0) {
    // loadConfig refuses a network ops port without keys; this catches a host set another way.
    if (!isLoopbackHost(config.opsHost)) {
      throw new RiskgateError(
        ErrorCode.INVALID_CONFIG,
        `RISKGATE_OPS_KEYS is required when the ops port listens beyond this machine (${config.opsHost})`,
      );
    }
    log({
      level: 'warn',
      msg: 'RISKGATE_OPS_KEYS is unset: the ops port serves /healthz and /readyz, and refuses the operator endpoints (403)',
    });
  } else if (opsKeys.length === 0) {
    log({
      level: 'info',
      msg: 'RISKGATE_OPS_KEYS is unset: /metrics, /policies, /openapi.json and /actions are refused (403)',
    });
  }
  const metrics = createMetrics();
  const tracer = options.tracing?.calls;
  // One set of breakers for every vendor route riskgate calls (routes are named per upstream).
  const breakers =
    options.breakers === false
      ? undefined
      : new CircuitBreakers({
          ...options.breakers,
          onTransition: (route, from, to) => {
            metrics.recordCircuitTransition(route, to);
            log({ level: to === 'open' ? 'warn' : 'info', msg: 'circuit breaker', route, from, to });
          },
          onUncounted: (route, reason) => metrics.recordCircuitNotCounted(route, reason),
        });
  breakers?.declareRoutes([
    ...SIGNALS_OPERATIONS.map((op) => `signals ${op}`),
    ...ADMIN_OPERATIONS.map((op) => `admin ${op}`),
  ]);
  metrics.observeCircuits(() => breakers?.states() ?? []);
  const recordCall = (info: CallInfo) => {
    metrics.recordUpstreamCall(info.upstream, info.name, info.durationMs, info.code);
    if (info.items !== undefined) metrics.recordRemoteAccessToolBatch(info.items);
  };

  const policies = await createPolicyStore({
    path: config.policyPath,
    debounceMs: options.policyDebounceMs ?? 200,
    log,
    onReload: () => metrics.recordPolicyReload('ok'),
    onError: () => metrics.recordPolicyReload('error'),
  });

  const shadow =
    config.shadowPolicyPath === undefined
      ? undefined
      : openShadowPolicy(config.shadowPolicyPath, options.policyDebounceMs ?? 200, log, metrics);
  await shadow?.ready; // a candidate that does not load is reported, never fatal
  const ruleStats = new RuleStats();

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
  });
  const admin = createAdminClient({
    baseUrl: upstream.adminUrl,
    serviceId: upstream.serviceId,
    apiKey: upstream.adminApiKey,
    connections: config.adminConnections,
    onCall: recordCall,
    tracer,
    breakers,
    ...(options.adminCache !== undefined && { cache: options.adminCache }),
  });
  const decisionLog =
    options.decisionLog ??
    openDecisionLog(config.decisionLog, {
      onError: (e) => log({ level: 'error', msg: 'decision log write failed', error: e.message }),
      onHealthChange: (ok) =>
        log(
          ok
            ? { level: 'info', msg: 'decision log writing again' }
            : {
                level: 'error',
                msg: 'decision log failing: decisions are not being recorded',
                onFailure: config.decisionLogOnFailure,
              },
        ),
      redact: createRedactor(config.decisionLogRedaction, config.decisionLogHashKey),
    });
  const decisionLogOk = () => decisionLog.health?.().ok ?? true;
  const onOutcome = actionOutcomeWriter({ decisionLog, metrics, log });
  const outboxStore = options.outboxStore ?? (await openOutboxStore(config));
  for (const warning of (await outboxStore.warnings?.()) ?? []) log({ level: 'warn', msg: warning });
  const outbox = new Outbox({
    store: outboxStore,
    admin,
    onOutcome,
    onError: (error) => log({ level: 'error', msg: 'outbox store failed', error: String(error) }),
    horizonMs: config.outboxHorizonMs,
    flushOutcomes: () => decisionLog.flush(),
    ...options.actionQueue,
    ...options.outbox,
  });
  const actions: ActionDispatcher = outbox;
  metrics.observeGauge(
    'riskgate_outbox_pending',
    'Actions in the outbox not yet delivered (the whole store, shared by every worker and any replica using it)',
    () => outbox.stats.pending,
  );
  metrics.observeGauge(
    'riskgate_outbox_oldest_pending_age_seconds',
    'Age of the oldest undelivered action in the store (an Admin outage shows here first)',
    () => outbox.stats.oldestPendingAgeMs / 1000,
  );
  metrics.observeGauge(
    'riskgate_outbox_dead',
    'Actions dead-lettered in the store (failed for good or out of horizon): an operator decides (riskgate actions)',
    () => outbox.stats.dead,
  );
  metrics.observeGauge(
    'riskgate_outbox_deferred',
    'Actions answered deferred that the outbox store has not acknowledged yet (held by this process)',
    () => outbox.deferred,
  );
  metrics.observeCounter(
    'riskgate_outbox_attempts',
    'Delivery attempts started by this process',
    () => outbox.attemptsStarted,
  );
  metrics.observeGauge(
    'riskgate_action_queue_size',
    'Actions queued, waiting to retry or running',
    () => actions.size,
  );
  metrics.observeCounter(
    'riskgate_decision_log_dropped_records',
    'Decision log records dropped under sustained backpressure',
    () => decisionLog.dropped,
  );
  metrics.observeGauge(
    'riskgate_decision_log_healthy',
    '1 while decision log records reach their destination, 0 while it fails (decisions go unrecorded)',
    () => (decisionLogOk() ? 1 : 0),
  );
  metrics.observeGauge(
    'riskgate_vendor_token_valid',
    '1 while a valid Trust Signals access token is held, else 0 (decisions are degraded without one)',
    () => (tokens.isReady() ? 1 : 0),
  );
  metrics.observeGauge(
    'riskgate_vendor_token_consecutive_failures',
    'Token requests failed since the last success',
    () => tokens.stats().consecutiveFailures,
  );
  metrics.observeBuildInfo(options.version ?? '0.0.0', () => policies.current()?.revision);

  const features = options.featureStore ?? (await openFeatureStore(config));
  let featureErrors = 0;
  let featureErrorLoggedAt = 0;
  // Without the Log API nothing feeds the history: said once here, not as a degradation per decision.
  const historyConfigured = upstream.logsUrl !== undefined && upstream.logApiKey !== undefined;
  if (!historyConfigured && policies.current().requirements.history)
    log({
      level: 'warn',
      msg: 'the policy reads history but the Log API is not configured (RISKGATE_LOGS_URL, RISKGATE_LOG_API_KEY): history is not_configured in every decision and its rules are skipped',
    });
  const featureReader = createFeatureReader({
    store: features,
    historyConfigured,
    onRecordError: (error) => {
      featureErrors++;
      // One line per 10 s at most: a store that is down fails every decision's count.
      if (Date.now() - featureErrorLoggedAt < 10_000) return;
      featureErrorLoggedAt = Date.now();
      log({
        level: 'warn',
        msg: 'velocity counts not recorded: feature store failing',
        error: error.message,
      });
    },
  });
  metrics.observeCounter(
    'riskgate_feature_store_record_errors',
    'Decisions whose velocity counts the feature store did not take (it was down or slow)',
    () => featureErrors,
  );

  const admission = new AdmissionControl({
    maxInFlight: config.maxInFlight,
    maxEventLoopDelayMs: config.maxEventLoopDelayMs,
    deadlineMs: config.deadlineMs,
  });
  admission.start();
  metrics.observeGauge(
    'riskgate_decisions_in_flight',
    'Decisions admitted and not yet answered (admission control sheds past RISKGATE_MAX_IN_FLIGHT)',
    () => admission.inFlight,
  );

  let draining = false;
  const appDeps: AppDeps = {
    admission,
    renderMetrics: options.renderMetrics,
    decide: {
      signals,
      admin,
      policies,
      deadlineMs: config.deadlineMs,
      subjectBinding: config.subjectBinding,
      shadow,
      features: featureReader,
    },
    ruleStats,
    shadowStatus: shadow?.status,
    apiKeys: options.apiKeys,
    feedback: {
      decisions: new RecentDecisions({ maxDecisions: config.feedback.maxDecisions }),
      rateLimit: new FeedbackRateLimit({
        ratePerSecond: config.feedback.ratePerSecond,
        burst: config.feedback.burst,
      }),
      operatorKeys: opsKeys,
    },
    actions,
    decisionLog,
    metrics,
    auditRequired: config.decisionLogOnFailure === 'refuse' ? decisionLogOk : undefined,
    health: () => ({
      ...(decisionLog.health !== undefined && { decisionLog: decisionLog.health() }),
      vendor: {
        token: tokenHealth(tokens, Date.now()),
        // Routes with a breaker that is not closed (a closed route is the normal case, not listed).
        circuits: breakers?.states().filter((b) => b.state !== 'closed') ?? [],
      },
    }),
    isDraining: () => draining,
    outboxStore,
    onActionDropped: (entry) => outbox.reportFinal(entry),
    onActionRetried: () => outbox.nudge(),
    callbackSignatureKey: upstream.callbackSignatureKey,
    tracing: options.tracing,
    log,
    version: options.version ?? '0.0.0',
    ops: config.opsPort !== undefined ? { access: 'elsewhere' } : { access: 'keys', keys: opsKeys },
  };
  const app = createApp(appDeps);
  metrics.observeGauge(
    'riskgate_ready',
    '1 while /readyz answers 200 (a policy loaded, not shutting down, the decision log writing when RISKGATE_DECISION_LOG_ON_FAILURE=refuse), else 0',
    () => (readiness(appDeps).ready ? 1 : 0),
  );
  // The separate ops port: health and the operator endpoints, behind the operator keys there too.
  const opsApp =
    config.opsPort === undefined
      ? undefined
      : createApp({ ...appDeps, surface: 'ops', ops: { access: 'keys', keys: opsKeys } });

  const logs =
    options.followLogs === false
      ? undefined
      : createLogFollower({
          upstream,
          stateDir: config.stateDir,
          admin,
          metrics,
          log,
          onCall: recordCall,
          tracer,
          features,
          ...options.logs,
        });
  if (logs !== undefined) {
    metrics.observeGauge(
      'riskgate_log_follower_lag_seconds',
      'How far behind now the Log API follower reads (at least the 2-minute ingestion delay)',
      () => {
        const cursor = logs.cursor();
        return cursor === undefined ? 0 : ((options.logs?.now ?? Date.now)() - cursor) / 1000;
      },
    );
    metrics.observeGauge(
      'riskgate_log_follower_leader',
      '1 while this process reads the Log API; 0 while another replica holds the lease (its lag is shown)',
      () => (logs.isFollowing() ? 1 : 0),
    );
  }

  const ready = tokens.start();
  const host = options.host ?? config.host;
  const silent: { stop(): void }[] = [];
  const listening: { server: HttpServer; sockets: AcceptSockets }[] = [];
  try {
    listening.push(
      await listenHttp(
        app,
        { port: config.port, host, acceptSockets: config.acceptSockets, shared: options.sharedPort === true },
        config,
        silent,
        (listener) =>
          shedBeforeApp(listener, {
            admission,
            metrics,
            hasOverloadVerdict: () => policies.current().overloadVerdict !== undefined,
          }),
      ),
    );
    if (opsApp !== undefined)
      listening.push(
        await listenHttp(
          opsApp,
          { port: config.opsPort!, host: config.opsHost, acceptSockets: 1 },
          config,
          silent,
        ),
      );
  } catch (error) {
    for (const s of silent) s.stop();
    for (const l of listening) void l.sockets.close();
    policies.close();
    await outboxStore.close();
    await Promise.all([tokens.stop(), signals.close(), admin.close(), logs?.stop(), metrics.shutdown()]);
    await features.close();
    throw error;
  }
  const { server, sockets } = listening[0]!;
  const ops = listening[1];
  const port = sockets.port;
  const opsPort = ops?.sockets.port;
  // In the background: the first window is due two minutes after start at the earliest.
  const logsStarted = logs?.start();
  // What an earlier process left undelivered goes out now.
  outbox.start();
  const drainTimeoutMs = options.drainTimeoutMs ?? 10_000;

  let stopping: Promise<void> | undefined;
  const stop = async () => {
    draining = true;
    // close() stops accepting and ends the connections idle at that moment; a connection busy with
    // a decision goes idle once answered, and is ended by the next sweep instead of lingering for
    // its keep-alive timeout. Past the drain timeout, everything is cut.
    const closed = sockets.close();
    void ops?.sockets.close();
    ops?.server.closeAllConnections();
    const sweep = setInterval(() => server.closeIdleConnections(), 20);
    const forced = setTimeout(() => server.closeAllConnections(), drainTimeoutMs);
    await closed;
    clearInterval(sweep);
    clearTimeout(forced);
    // The last answers' after-response work (log lines, action enqueues) runs on the next turn.
    await new Promise((resolve) => setImmediate(resolve));
    await actions.drain(drainTimeoutMs);
    await outboxStore.close();
    await logsStarted;
    await logs?.stop();
    await features.close();
    policies.close();
    shadow?.close();
    admission.stop();
    for (const s of silent) s.stop();
    await Promise.all([tokens.stop(), signals.close(), admin.close()]);
    await decisionLog.close(DECISION_LOG_CLOSE_TIMEOUT_MS); // bounded: a stuck destination cannot hold the exit
    await Promise.all([metrics.shutdown(), options.tracing?.shutdown()]);
  };

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    opsUrl: opsPort === undefined ? undefined : `http://127.0.0.1:${opsPort}`,
    opsPort,
    app,
    policies,
    tokens,
    signals,
    admin,
    actions,
    outbox,
    decisionLog,
    metrics,
    admission,
    logs,
    features,
    ready,
    stop: () => {
      stopping ??= stop();
      return stopping;
    },
    abandon: async (reason, timeoutMs) => {
      draining = true;
      void sockets.close();
      void ops?.sockets.close();
      await actions.abandon(reason);
      await decisionLog.close(timeoutMs).catch(() => {});
    },
  };
}
