import { riskgateVersion } from './build-info/riskgate-version.ts';
import { loadConfig, type RiskgateConfig, type UpstreamConfig } from './config/riskgate-config.ts';
// Type only (erased): the module itself is loaded by a dynamic import in sandbox mode alone.
import type { EmbeddedSandbox } from './dev/embedded-sandbox.ts';
import { isRiskgateError } from './errors/riskgate-error.ts';
import { createTracing } from './observability/tracing.ts';
import { type RunningRiskgate, startRiskgate, stderrLog } from './service/start-riskgate.ts';

/**
 * The process: reads the environment, starts riskgate (on the embedded sandbox when no vendor is
 * configured), handles SIGTERM/SIGINT with a graceful shutdown. The only module with side effects
 * at the process level.
 */

/** Longest wait for the decision log after a fatal error, milliseconds, before exiting anyway. */
const CRASH_FLUSH_TIMEOUT_MS = 2000;

/** The service once started: what a fatal error has to wind down. */
let running: RunningRiskgate | undefined;
let crashing = false;

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
 * stop accepting, report every queued or running action failed (`process_crash`) in the decision
 * log, flush it (bounded) and exit 1. A second fatal error while doing so exits at once.
 */
function onFatal(kind: 'uncaughtException' | 'unhandledRejection') {
  return (error: unknown) => {
    if (crashing) process.exit(1);
    crashing = true;
    stderrLog({ level: 'fatal', msg: `${kind}: exiting`, ...describeFatal(error) });
    const service = running;
    if (service === undefined) process.exit(1);
    // A backstop in case the flush itself hangs on something close() does not bound.
    setTimeout(() => process.exit(1), CRASH_FLUSH_TIMEOUT_MS + 500);
    void service.abandon('process_crash', CRASH_FLUSH_TIMEOUT_MS).finally(() => process.exit(1));
  };
}

function fail(message: string): never {
  process.stderr.write(`riskgate: ${message}\n`);
  process.exit(1);
}

async function main(): Promise<void> {
  process.on('uncaughtException', onFatal('uncaughtException'));
  process.on('unhandledRejection', onFatal('unhandledRejection'));
  let config: RiskgateConfig;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    fail(isRiskgateError(error) ? error.message : String(error));
  }

  let upstream: UpstreamConfig | undefined = config.upstream;
  let apiKeys = config.apiKeys;
  let sandbox: EmbeddedSandbox | undefined;
  let devKey: { key: string; file: string } | undefined;
  if (upstream === undefined) {
    if (process.env.NODE_ENV === 'production') {
      fail(
        'RISKGATE_SIGNALS_URL is required with NODE_ENV=production (the embedded sandbox is for development)',
      );
    }
    // Loaded only here, so nothing in the production import graph reaches src/sandbox/.
    const { startEmbeddedSandbox } = await import('./dev/embedded-sandbox.ts');
    try {
      sandbox = await startEmbeddedSandbox(config.sandboxPort);
    } catch (error) {
      fail(
        `cannot start the embedded sandbox on port ${config.sandboxPort} (set SANDBOX_PORT): ${String(error)}`,
      );
    }
    upstream = sandbox.upstream;
    if (apiKeys === undefined) {
      const { loadOrCreateDevApiKey } = await import('./dev/dev-api-key.ts');
      try {
        devKey = loadOrCreateDevApiKey(config.stateDir);
      } catch (error) {
        fail(
          `cannot keep the development caller key in RISKGATE_STATE_DIR (${config.stateDir}): ${String(error)}`,
        );
      }
      apiKeys = [devKey.key];
    }
  }

  let service: RunningRiskgate;
  try {
    service = await startRiskgate({
      config,
      upstream,
      apiKeys: apiKeys!,
      tracing: createTracing(process.env, { version: riskgateVersion() }),
      log: stderrLog,
      version: riskgateVersion(),
    });
  } catch (error) {
    await sandbox?.stop();
    fail(error instanceof Error ? error.message : String(error));
  }

  running = service;

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) {
      process.stderr.write(`riskgate: ${signal} again, exiting now\n`);
      process.exit(1);
    }
    stopping = true;
    stderrLog({ level: 'info', msg: 'shutting down', signal });
    void service
      .stop()
      .then(() => sandbox?.stop())
      .then(
        () => process.exit(0),
        (error: unknown) => fail(`shutdown failed: ${String(error)}`),
      );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  if (sandbox === undefined) {
    stderrLog({
      level: 'info',
      msg: 'riskgate listening',
      port: service.port,
      policy: service.policies.status(),
    });
    return;
  }
  await service.ready;
  const { printDemo } = await import('./dev/demo-requests.ts');
  await printDemo({
    riskgateUrl: `http://localhost:${service.port}`,
    sandboxUrl: sandbox.url,
    apiKey: apiKeys![0]!,
    keyFile: devKey?.file,
    userIds: await sandbox.userIds(['alice', 'bob', 'mallory']),
  });
}

await main();
