import { DECISION_LOG_CLOSE_TIMEOUT_MS } from '../decision-log/decision-log.ts';
import type { AppDeps } from '../http/create-app.ts';
import { httpSurfaces } from '../http/http-listener.ts';
import { Lifecycle, startOrTearDown } from '../lifecycle/lifecycle.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import { metricsComponent } from '../observability/metrics-component.ts';
import {
  type RunningRiskgate,
  resolveOpsKeys,
  type StartRiskgateOptions,
  stderrLog,
} from './riskgate-options.ts';
import { startServices } from './service-components.ts';

export { type RunningRiskgate, type StartRiskgateOptions, stderrLog } from './riskgate-options.ts';

/**
 * Assembles riskgate from its configuration and listens. src/riskgate-process.ts calls it with the
 * environment's configuration; end-to-end tests call it against a sandbox on port 0. riskgate is
 * an ordered list of components (src/lifecycle/component.ts), each started once the ones it uses
 * are: the metrics, the services behind the HTTP surfaces (src/service/service-components.ts),
 * then the listeners. One teardown stops them in reverse, both for `stop()` and for a start that
 * failed half-way.
 * That order is the graceful shutdown: stop accepting, finish in-flight decisions, drain the
 * actions, close the stores, flush the log.
 */
export async function startRiskgate(options: StartRiskgateOptions): Promise<RunningRiskgate> {
  const { config } = options;
  const log = options.log ?? stderrLog;
  const opsKeys = resolveOpsKeys(options, log);
  const drainTimeoutMs = options.drainTimeoutMs ?? 10_000;
  // The listener's drain and the outbox's each wait up to drainTimeoutMs, then the log flushes.
  const teardownMs = 2 * drainTimeoutMs + DECISION_LOG_CLOSE_TIMEOUT_MS;
  let metrics: RiskgateMetrics | undefined;
  const lifecycle = new Lifecycle<RiskgateMetrics>({
    registry: () => metrics!,
    log,
    beforeStart: options.beforeComponentStart,
  });
  let draining = false;
  return startOrTearDown(lifecycle, teardownMs, async (l) => {
    metrics = await l.start(metricsComponent(options.gatherMetrics));
    const ctx = { options, log, opsKeys, drainTimeoutMs, metrics };
    const {
      decisionLog,
      decisions,
      audit,
      vendor,
      admission,
      policies,
      features,
      lists,
      snoozes,
      logs,
      lockouts,
      outbox,
      events,
      askUser,
      recent,
      outcomes,
    } = await startServices(l, ctx);
    const { admin, signals } = vendor;
    const appDeps: AppDeps = {
      admission,
      decide: {
        signals,
        admin,
        policies: policies.store,
        deadlineMs: config.deadlineMs,
        subjectBinding: config.subjectBinding,
        shadow: policies.shadow,
        rollout: policies.versions,
        features: features.reader,
        lists,
        snoozes,
        outcomes,
      },
      ruleStats: policies.ruleStats,
      apiKeys: options.apiKeys,
      feedback: { decisions: recent },
      actions: outbox,
      events,
      askUser,
      lockouts: lockouts.recorder,
      decisionLog,
      metrics,
      auditRequired:
        config.decisionLogOnFailure === 'refuse' ? () => decisionLog.health?.().ok ?? true : undefined,
      isDraining: () => draining,
      tracing: options.tracing,
      log,
      ops: config.opsPort !== undefined ? { access: 'elsewhere' } : { access: 'keys', keys: opsKeys },
      trustedProxy: config.trustedProxy,
      audit,
      routes: l.routes(),
    };
    const surfaces = httpSurfaces({
      app: appDeps,
      config,
      host: options.host ?? config.host,
      shared: options.sharedPort === true,
      opsKeys,
      shed: {
        admission,
        metrics,
        hasOverloadVerdict: () => policies.store.current().overloadVerdict !== undefined,
      },
      drainTimeoutMs,
      isDraining: () => draining,
    });
    const caller = await l.start(surfaces.caller);
    const ops = surfaces.ops === undefined ? undefined : await l.start(surfaces.ops);
    const port = caller.sockets.port;
    const opsPort = ops?.sockets.port;
    return {
      url: `http://127.0.0.1:${port}`,
      port,
      opsUrl: opsPort === undefined ? undefined : `http://127.0.0.1:${opsPort}`,
      opsPort,
      app: caller.app,
      policies: policies.store,
      tokens: vendor.tokens,
      signals,
      admin,
      actions: outbox,
      outbox,
      decisionLog,
      decisions,
      metrics,
      admission,
      logs,
      features: features.store,
      ready: vendor.ready,
      stop: () => {
        draining = true;
        return l.stop(Date.now() + teardownMs);
      },
      abandon: async (reason, timeoutMs) => {
        draining = true;
        void caller.sockets.close();
        void ops?.sockets.close();
        await outbox.abandon(reason);
        await decisionLog.close(timeoutMs).catch(() => {});
      },
    };
  });
}
