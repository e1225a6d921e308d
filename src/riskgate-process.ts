import cluster from 'node:cluster';
import type { ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { riskgateVersion } from './build-info/riskgate-version.ts';
import {
  type ClusterPrimary,
  joinPrimary,
  onPrimaryStop,
  startPrimary,
  WORKER_INDEX_VARIABLE,
} from './cluster/worker-processes.ts';
import {
  describeUnknownVariable,
  loadConfig,
  type RiskgateConfig,
  type UpstreamConfig,
  unknownVariables,
} from './config/riskgate-config.ts';
// Type only (erased): the module itself is loaded by a dynamic import in sandbox mode alone.
import type { EmbeddedSandbox } from './dev/embedded-sandbox.ts';
import { isRiskgateError } from './errors/riskgate-error.ts';
import { IpcFeatureStore } from './features/ipc-feature-store.ts';
import { MemoryFeatureStore } from './features/memory-feature-store.ts';
import { IpcRecentDecisions, PrimaryRecentDecisions } from './feedback/ipc-recent-decisions.ts';
import { RecentDecisions } from './feedback/recent-decisions.ts';
import { assertPortFree } from './http/accept-sockets.ts';
import { IpcRequests } from './ipc/ipc-requests.ts';
import { type Component, stopWaitMs } from './lifecycle/component.ts';
import { Lifecycle, startOrTearDown } from './lifecycle/lifecycle.ts';
import { createTracing } from './observability/tracing.ts';
import {
  type RunningRiskgate,
  type StartRiskgateOptions,
  startRiskgate,
  stderrLog,
} from './service/start-riskgate.ts';

/**
 * The process: reads the environment, starts riskgate (on the embedded sandbox when no vendor is
 * configured), handles SIGTERM/SIGINT with a graceful shutdown. The only module with side effects
 * at the process level. The process is a lifecycle of its own (src/lifecycle/lifecycle.ts): the
 * embedded sandbox, then riskgate in this process or the cluster primary, stopped in reverse by
 * one teardown, for a signal (`graceful`), a fatal error (`fatal`: the decision log flushed,
 * nothing drained) and a start that failed half-way alike.
 */

/** Longest wait for the decision log after a fatal error, milliseconds, before exiting anyway. */
const CRASH_FLUSH_TIMEOUT_MS = 2000;

/** The process's own components: no state outside this lifecycle. */
type ProcessLifecycle = Lifecycle<undefined>;

/**
 * A fatal error's one log line: its name, message and stack. riskgate's own errors never carry a
 * secret (credentials travel in headers, never in messages); anything else is logged as thrown.
 */
function describeFatal(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { error: String(error).slice(0, 1000) };
  const code = (error as { code?: unknown }).code;
  return {
    error: `${error.name}: ${error.message}`.slice(0, 1000),
    ...(typeof code === 'string' && { code }),
    stack: error.stack?.split('\n').slice(1, 11).join('\n'),
  };
}

/**
 * An uncaught exception or unhandled rejection leaves the process in an unknown state: log it,
 * and stop the process's components with the `fatal` reason (stop accepting, flush the decision
 * log, bounded) and exit 1. Promised actions stay in the outbox for the next process (the memory
 * store, RISKGATE_OUTBOX=memory, has them reported failed with `process_crash` instead). A second
 * fatal error while doing so exits at once.
 */
function exitOnFatal(lifecycle: ProcessLifecycle): void {
  let crashing = false;
  const onFatal = (kind: 'uncaughtException' | 'unhandledRejection') => (error: unknown) => {
    if (crashing) process.exit(1);
    crashing = true;
    stderrLog({ level: 'fatal', msg: `${kind}: exiting`, ...describeFatal(error) });
    if (lifecycle.names().length === 0) process.exit(1);
    // A backstop in case the flush itself hangs on something a stop does not bound.
    setTimeout(() => process.exit(1), CRASH_FLUSH_TIMEOUT_MS + 500);
    void lifecycle
      .stop(Date.now() + CRASH_FLUSH_TIMEOUT_MS, 'fatal')
      .catch(() => {})
      .finally(() => process.exit(1));
  };
  process.on('uncaughtException', onFatal('uncaughtException'));
  process.on('unhandledRejection', onFatal('unhandledRejection'));
}

function fail(message: string): never {
  process.stderr.write(`riskgate: ${message}\n`);
  process.exit(1);
}

/** A start's error as its message (riskgate's errors say what to set; nothing else is secret). */
const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

async function main(): Promise<void> {
  const lifecycle: ProcessLifecycle = new Lifecycle({ registry: () => undefined, log: stderrLog });
  exitOnFatal(lifecycle);
  // A typo leaves its setting at the default: said first (once, by the primary), since it may be
  // why a required variable is missing.
  if (!cluster.isWorker) {
    for (const unknown of unknownVariables(process.env)) {
      stderrLog({ level: 'warn', msg: describeUnknownVariable(unknown), variable: unknown.name });
    }
  }
  let config: RiskgateConfig;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    fail(isRiskgateError(error) ? error.message : String(error));
  }
  // A start that fails stops what started before it (the sandbox), then exits with its message.
  const started = await startOrTearDown(lifecycle, 10_000, async (l) => {
    if (cluster.isWorker) return runWorker(l, config);
    const vendor = await resolveVendor(l, config);
    if (config.workers > 1) return runCluster(l, config, vendor);
    return runSingle(l, config, vendor);
  }).catch((error: unknown) => fail(messageOf(error)));
  await started?.();
}

/** The vendor riskgate talks to: the configured one, or the embedded sandbox (development). */
interface Vendor {
  upstream: UpstreamConfig;
  apiKeys: string[];
  /** Operator keys: the configured ones, or on the sandbox the generated development one. */
  opsKeys?: string[];
  sandbox?: EmbeddedSandbox;
  devKeyFile?: string;
  devOpsKeyFile?: string;
}

/** The embedded sandbox (development) as a component of the process. */
function embeddedSandboxComponent(port: number): Component<EmbeddedSandbox, undefined> {
  return {
    name: 'embedded sandbox',
    start: async () => {
      // Loaded only here, so nothing in the production import graph reaches src/sandbox/.
      const { startEmbeddedSandbox } = await import('./dev/embedded-sandbox.ts');
      const sandbox = await startEmbeddedSandbox(port).catch((error: unknown) => {
        throw new Error(
          `cannot start the embedded sandbox on port ${port} (set SANDBOX_PORT): ${String(error)}`,
        );
      });
      return { handle: sandbox, stop: () => sandbox.stop() };
    },
  };
}

async function resolveVendor(l: ProcessLifecycle, config: RiskgateConfig): Promise<Vendor> {
  if (config.upstream !== undefined) return { upstream: config.upstream, apiKeys: config.apiKeys! };
  if (process.env.NODE_ENV === 'production') {
    fail(
      'RISKGATE_SIGNALS_URL is required with NODE_ENV=production (the embedded sandbox is for development)',
    );
  }
  const sandbox = await l.start(embeddedSandboxComponent(config.sandboxPort));
  const { loadOrCreateDevApiKey, loadOrCreateDevOpsKey } = await import('./dev/dev-api-key.ts');
  try {
    const devKey = config.apiKeys === undefined ? loadOrCreateDevApiKey(config.stateDir) : undefined;
    // Operator endpoints never take a caller key: development gets an operator key of its own.
    const devOpsKey = config.opsKeys === undefined ? loadOrCreateDevOpsKey(config.stateDir) : undefined;
    return {
      upstream: sandbox.upstream,
      apiKeys: devKey === undefined ? config.apiKeys! : [devKey.key],
      sandbox,
      ...(devKey !== undefined && { devKeyFile: devKey.file }),
      ...(devOpsKey !== undefined && { opsKeys: [devOpsKey.key], devOpsKeyFile: devOpsKey.file }),
    };
  } catch (error) {
    throw new Error(
      `cannot keep the development keys in RISKGATE_STATE_DIR (${config.stateDir}): ${String(error)}`,
    );
  }
}

/**
 * riskgate in this process as a component of the process: a graceful stop drains it; a fatal one
 * is the same teardown's fast path (`abandon`: stop accepting, flush the decision log, leave the
 * promised actions to the next process).
 */
function serviceComponent(
  config: RiskgateConfig,
  vendor: Pick<Vendor, 'upstream' | 'apiKeys' | 'opsKeys'>,
  extra: Partial<StartRiskgateOptions> = {},
): Component<RunningRiskgate, undefined> {
  return {
    name: 'riskgate',
    start: async () => {
      const service = await startRiskgate({
        config,
        upstream: vendor.upstream,
        apiKeys: vendor.apiKeys,
        opsKeys: vendor.opsKeys,
        tracing: createTracing(process.env, {
          version: riskgateVersion(),
          redaction: { rules: config.decisionLogRedaction, hashKey: config.decisionLogHashKey },
        }),
        log: stderrLog,
        version: riskgateVersion(),
        ...extra,
      });
      return {
        handle: service,
        stop: (deadlineAtMs, reason) =>
          reason === 'fatal'
            ? service.abandon('process_crash', stopWaitMs(deadlineAtMs, CRASH_FLUSH_TIMEOUT_MS))
            : service.stop(),
      };
    },
  };
}

/**
 * SIGTERM/SIGINT: a graceful stop of the process's components, then exit 0. A second signal exits
 * at once, except in the cluster primary (`secondSignal: 'wait'`), whose workers each got a group
 * signal themselves and exit at once on their own. Returns what starts the same stop for another
 * reason (the primary asking a worker, workers that keep dying), which is not a signal: a worker
 * that got the group's Ctrl-C and then its primary's request stops once, gracefully.
 */
function onShutdown(
  lifecycle: ProcessLifecycle,
  secondSignal: 'exit' | 'wait' = 'exit',
): (reason: string) => void {
  let signals = 0;
  const begin = (fields: Record<string, string>) => {
    if (lifecycle.stopping) return;
    stderrLog({ level: 'info', msg: 'shutting down', ...fields });
    // The teardown's bound is each component's own (the service's drain, the primary's backstop).
    void lifecycle.stop(Number.POSITIVE_INFINITY).then(
      () => process.exit(0),
      (error: unknown) => fail(`shutdown failed: ${messageOf(error)}`),
    );
  };
  const onSignal = (signal: string) => {
    if (++signals > 1 && secondSignal === 'exit') {
      process.stderr.write(`riskgate: ${signal} again, exiting now\n`);
      process.exit(1);
    }
    begin({ signal });
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  return (reason) => begin({ reason });
}

/** SIGHUP (logrotate's postrotate): the decision log file is opened anew at its path. */
function onReopen(service: { decisionLog: { reopen?(): void } }): void {
  process.on('SIGHUP', () => {
    stderrLog({ level: 'info', msg: 'reopening the decision log', signal: 'SIGHUP' });
    service.decisionLog.reopen?.();
  });
}

/**
 * The whole of riskgate in this one process (RISKGATE_WORKERS=1). Returns what runs once started
 * (the demo, in development).
 */
async function runSingle(
  l: ProcessLifecycle,
  config: RiskgateConfig,
  vendor: Vendor,
): Promise<() => Promise<void>> {
  const service = await l.start(serviceComponent(config, vendor));
  onReopen(service);
  onShutdown(l);
  return async () => {
    if (vendor.sandbox === undefined) {
      stderrLog({
        level: 'info',
        msg: 'riskgate listening',
        host: config.host,
        port: service.port,
        ...(service.opsPort !== undefined && { opsPort: service.opsPort }),
        policy: service.policies.status(),
      });
      return;
    }
    await service.ready;
    await showDemo(service.port, vendor, 1, service.opsPort);
  };
}

/** The primary of RISKGATE_WORKERS processes as a component of the process. */
function clusterPrimaryComponent(
  options: Omit<Parameters<typeof startPrimary>[0], 'onGiveUp'> & { onGiveUp: () => (why: string) => void },
): Component<ClusterPrimary, undefined> {
  return {
    name: 'cluster primary',
    start: async () => {
      const primary = startPrimary({ ...options, onGiveUp: (why) => options.onGiveUp()(why) });
      // Fatal: this process exits at once; each worker, its channel gone, is stopped by the
      // orchestrator (or the group signal) as before.
      return {
        handle: primary,
        stop: (_deadline, reason) => (reason === 'fatal' ? undefined : primary.stop('shutdown')),
      };
    },
  };
}

/**
 * The primary of RISKGATE_WORKERS processes: serves nothing itself. The workers get the vendor (the
 * embedded sandbox's settings in development) and the caller keys as environment, so the sandbox
 * and the development key exist once.
 */
async function runCluster(l: ProcessLifecycle, config: RiskgateConfig, vendor: Vendor): Promise<undefined> {
  // Development only (the image has no src/dev/): the sandbox's settings for the workers.
  const sandboxEnv =
    vendor.sandbox === undefined
      ? {}
      : (await import('./dev/sandbox-env-file.ts')).riskgateEnvRecord(
          vendor.upstream,
          vendor.apiKeys[0]!,
          vendor.opsKeys?.[0],
        );
  // The host as the primary resolved it: a worker given the sandbox's settings is configured for a
  // vendor, whose default host is 0.0.0.0, and listened on every interface while this said 127.0.0.1.
  const env = { ...sandboxEnv, RISKGATE_HOST: config.host };
  // The workers bind the port themselves (SO_REUSEPORT): whether anyone else holds it is checked here, once.
  await assertPortFree(config.port, config.host).catch((error: unknown) => {
    throw new Error(`cannot listen on port ${config.port}: ${String(error)}`);
  });
  let shutdown: (reason: string) => void = () => {};
  await l.start(
    clusterPrimaryComponent({
      count: config.workers,
      env,
      firstWorkerPicksPort: config.port === 0,
      // Embedded counters and history live here, shared by the workers (src/features/ipc-feature-store.ts).
      ...(config.featureStore.kind === 'memory' && { features: new MemoryFeatureStore() }),
      // The decisions' caller keys too: feedback may reach any worker (src/feedback/ipc-recent-decisions.ts).
      recentDecisions: new PrimaryRecentDecisions(
        new RecentDecisions({ maxDecisions: config.feedback.maxDecisions }),
      ),
      drainTimeoutMs: 10_000,
      log: stderrLog,
      onGiveUp: () => shutdown,
      onListening: (port) => {
        stderrLog({
          level: 'info',
          msg: 'riskgate listening',
          host: config.host,
          port,
          workers: config.workers,
        });
        if (vendor.sandbox !== undefined) void showDemo(port, vendor, config.workers, config.opsPort);
      },
    }),
  );
  // A second signal changes nothing here: each worker that got it (a group signal) exits at once.
  shutdown = onShutdown(l, 'wait');
  return undefined;
}

/** One of the primary's workers: a whole riskgate; worker 1 alone follows the Log API. */
async function runWorker(l: ProcessLifecycle, config: RiskgateConfig): Promise<undefined> {
  if (config.upstream === undefined)
    fail('a worker needs the vendor in its environment (set by the primary)');
  const index = Number(process.env[WORKER_INDEX_VARIABLE] ?? '1');
  let gather: (() => Promise<ResourceMetrics>) | undefined;
  // A closed channel is a message not sent (process.send would raise an 'error' event nobody
  // handles, and the worker would die of it), and a long backlog (send's false) is still one that goes.
  const sendToPrimary = (m: unknown): boolean => {
    if (!process.connected || process.send === undefined) return false;
    process.send(m as Parameters<NonNullable<typeof process.send>>[0]);
    return true;
  };
  // One request/reply channel to the primary for every request (src/ipc/ipc-requests.ts).
  const requests = new IpcRequests({ send: sendToPrimary });
  process.on('message', (m) => requests.receive(m));
  const featureStore = config.featureStore.kind === 'memory' ? new IpcFeatureStore({ requests }) : undefined;
  const recentDecisions = new IpcRecentDecisions({ send: sendToPrimary, requests });
  const service: RunningRiskgate = await l.start(
    serviceComponent(
      config,
      { upstream: config.upstream, apiKeys: config.apiKeys! },
      {
        // Each worker binds the port itself with its own accept sockets (SO_REUSEPORT), so a burst
        // reaches every worker's admission control instead of waiting in the primary's accept queue.
        sharedPort: true,
        followLogs: index === 1,
        gatherMetrics: () => (gather ?? service.metrics.collect)(),
        ...(featureStore !== undefined && { featureStore }),
        recentDecisions,
      },
    ),
  );
  gather = joinPrimary(service.port, () => service.metrics.collect());
  const shutdown = onShutdown(l);
  onPrimaryStop((why) => shutdown(`primary: ${why}`));
  onReopen(service);
  return undefined;
}

async function showDemo(port: number, vendor: Vendor, workers: number, opsPort?: number): Promise<void> {
  const { printDemo, sendDemoLogins } = await import('./dev/demo-requests.ts');
  const userIds = await vendor.sandbox!.userIds(['alice', 'bob', 'mallory']);
  const riskgateUrl = `http://localhost:${port}`;
  const sent = await sendDemoLogins({
    riskgateUrl,
    apiKey: vendor.apiKeys[0]!,
    userIds,
    // Every worker answers on the port: a run of ready answers on fresh connections asks each.
    readiness: { url: riskgateUrl, inARow: workers > 1 ? 8 : 1 },
  });
  printDemo({
    riskgateUrl,
    sandboxUrl: vendor.sandbox!.url,
    apiKey: vendor.apiKeys[0]!,
    keyFile: vendor.devKeyFile,
    opsKey: vendor.opsKeys?.[0],
    opsKeyFile: vendor.devOpsKeyFile,
    ...(opsPort !== undefined && opsPort !== 0 && { operatorUrl: `http://localhost:${opsPort}` }),
    userIds,
    sent,
  });
}

await main();
