import type { ResourceMetrics } from '@opentelemetry/sdk-metrics';
import type { Hono } from 'hono';
import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import type { ActionSpec } from '../actions/admin-actions.ts';
import type { AdminClient, AdminClientOptions } from '../admin/admin-client.ts';
import type { AdmissionControl } from '../admission/admission-control.ts';
import type { TokenManager } from '../auth/token-manager.ts';
import { isLoopbackHost, type RiskgateConfig, type UpstreamConfig } from '../config/riskgate-config.ts';
import type { ConsoleDeps } from '../console/console-deps.ts';
import type { RiskgateDatabase } from '../database/database.ts';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import type { DecisionReader } from '../decision-store/decision-query.ts';
import type { DecisionStoreWriterOptions } from '../decision-store/decision-store-writer.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { EventSink } from '../events/riskgate-event.ts';
import type { FeatureStore } from '../features/feature-store.ts';
import type { DecisionMemory } from '../feedback/decision-memory.ts';
import type { ServiceLog } from '../http/create-app.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import type { DecisionTracing } from '../observability/tracing.ts';
import type { AuditTrail } from '../operators/audit-trail.ts';
import type { Outbox, OutboxOptions } from '../outbox/outbox.ts';
import type { OutboxStore } from '../outbox/outbox-store.ts';
import type { InputTable } from '../policy/inputs/input-row.ts';
import type { PolicyStore } from '../policy/policy-store.ts';
import type { SignalsClient } from '../signals/signals-client.ts';
import type { Clock } from '../timing/clock.ts';
import type { CircuitBreakerOptions } from '../upstream/circuit-breaker.ts';
import type { LogFollower, LogFollowerOptions } from './log-follower.ts';

/** What `startRiskgate` takes and what it hands back (src/service/start-riskgate.ts). */

export interface StartRiskgateOptions {
  config: RiskgateConfig;
  /**
   * The one clock every component reads and sets its timers on (wall and monotonic time,
   * src/timing/clock.ts). Default {@link systemClock}; tests step its wall time with the sandbox's
   * (`SteppedClock`) or drive it (`DrivenClock`).
   */
  clock?: Clock;
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
  /** An open database instead of `config.database` (tests share one); not closed on stop. */
  database?: RiskgateDatabase;
  /** Decision store tuning (tests: a small buffer, a short write deadline). */
  decisionStore?: Partial<Omit<DecisionStoreWriterOptions, 'sink'>>;
  /** Where operator changes (an unlock) are written first; absent, those changes are refused. */
  audit?: AuditTrail;
  /** Where lock-out and list events go (signed webhooks). Default none. */
  events?: EventSink<ActionSpec>;
  /** Runtime list snapshot tuning (tests poll faster or go stale sooner). */
  lists?: { pollMs?: number; staleAfterMs?: number };
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
  /**
   * The recent decisions `POST /feedback` checks (a cluster worker passes the primary's over IPC);
   * default this process's own (`RISKGATE_FEEDBACK_DECISIONS`).
   */
  recentDecisions?: DecisionMemory;
  /** What the console reads that the caller builds (tests: a rule report); default none. */
  console?: Pick<ConsoleDeps, 'rules'>;
  /** Quiet period before a policy reload, milliseconds. Default 200. */
  policyDebounceMs?: number;
  /**
   * The input table the policies compile against and the console shows: the built-in one
   * (src/policy/inputs/input-table.ts) unless a test adds an input through one row
   * (`[...INPUT_ROWS, row]`).
   */
  inputs?: InputTable;
  /** Log API follower tuning (tests shift its clock with the sandbox's and poll faster). */
  logs?: Pick<LogFollowerOptions, 'pollIntervalMs'>;
  /** Circuit breaker tuning (tests shorten the open period); `false`: none (tests of one failure at a time). */
  breakers?: Omit<CircuitBreakerOptions, 'onTransition' | 'onUncounted'> | false;
  /** Admin read cache lifetimes (defaults in `AdminClientOptions.cache`). */
  adminCache?: AdminClientOptions['cache'];
  /** Whether this process follows the Log API (when configured). Default true; false on workers 2..N. */
  followLogs?: boolean;
  /**
   * What `GET /metrics` and the console's Health page read. Default this process's metrics (a
   * worker gathers every worker's through its primary).
   */
  gatherMetrics?: () => Promise<ResourceMetrics>;
  /**
   * A node:cluster worker: the decision port is bound by this process itself, beside the other
   * workers (SO_REUSEPORT), not through the primary (src/http/accept-sockets.ts). Default false.
   */
  sharedPort?: boolean;
  /** Longest wait for in-flight requests and queued actions on stop, milliseconds. Default 10 000. */
  drainTimeoutMs?: number;
  version?: string;
  /**
   * Called before each component starts, with its name (`metrics`, `decision log`, ...); a throw
   * fails the start there, and what already started is stopped (tests inject failures). Default none.
   */
  beforeComponentStart?: (name: string) => void | Promise<void>;
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
  /** The decision store's queries (GET /decisions, the console). */
  decisions: DecisionReader;
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

/**
 * The operator keys in effect. Refuses an ops port reachable beyond this machine without any (a
 * host set other than through loadConfig); says once what is refused without them.
 */
export function resolveOpsKeys(
  options: Pick<StartRiskgateOptions, 'config' | 'opsKeys'>,
  log: ServiceLog,
): readonly string[] {
  const { config } = options;
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
  return opsKeys;
}
