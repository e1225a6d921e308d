import type { ActionOutcome } from '../actions/action-dispatcher.ts';
import { admissionComponent } from '../admission/admission-component.ts';
import { callbackRoutes } from '../callbacks/callback-routes.ts';
import type { SignalFetcher } from '../decide/decide-ports.ts';
import { DECISION_LOG_CLOSE_TIMEOUT_MS } from '../decision-log/decision-log.ts';
import { decisionLogComponent } from '../decision-log/decision-log-component.ts';
import { actionLine } from '../decision-log/decision-record.ts';
import { featureComponent } from '../features/feature-component.ts';
import { feedbackComponent } from '../feedback/feedback-routes.ts';
import type { AppDeps } from '../http/create-app.ts';
import { httpSurfaces } from '../http/http-listener.ts';
import { probesComponent } from '../lifecycle/health-routes.ts';
import { Lifecycle, startOrTearDown } from '../lifecycle/lifecycle.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import { metricsComponent, tracingComponent } from '../observability/metrics-component.ts';
import { openApiRoute } from '../openapi/openapi-route.ts';
import { outboxComponent } from '../outbox/outbox-component.ts';
import { policyComponent } from '../policy/policy-component.ts';
import { logFollowerComponent } from './log-follower.ts';
import {
  type RunningRiskgate,
  resolveOpsKeys,
  type StartRiskgateOptions,
  stderrLog,
} from './riskgate-options.ts';
import { vendorClientsComponent } from './vendor-clients.ts';

export { type RunningRiskgate, type StartRiskgateOptions, stderrLog } from './riskgate-options.ts';

/**
 * Assembles riskgate from its configuration and listens. src/main.ts calls it with the
 * environment's configuration; end-to-end tests call it against a sandbox on port 0. riskgate is
 * an ordered list of components (src/lifecycle/component.ts), each started once the ones it uses
 * are; one teardown stops them in reverse, both for `stop()` and for a start that failed half-way.
 * That order is the graceful shutdown: stop accepting, finish in-flight decisions, drain the
 * actions, close the stores, flush the log.
 */
export async function startRiskgate(options: StartRiskgateOptions): Promise<RunningRiskgate> {
  const { config, upstream } = options;
  const log = options.log ?? stderrLog;
  const opsKeys = resolveOpsKeys(options, log);
  const version = options.version ?? '0.0.0';
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
    metrics = await l.start(metricsComponent(options.renderMetrics));
    const m = metrics;
    await l.start(tracingComponent(options.tracing));
    const decisionLog = await l.start(decisionLogComponent({ config, given: options.decisionLog, log }));
    const tracer = options.tracing?.calls;
    const vendor = await l.start(vendorClientsComponent({ ...options, metrics: m, log, tracer }));
    const { admin, signals } = vendor;
    const admission = await l.start(admissionComponent(config));
    const policies = await l.start(
      policyComponent({
        path: config.policyPath,
        shadowPath: config.shadowPolicyPath,
        debounceMs: options.policyDebounceMs ?? 200,
        log,
        onReload: (result) => m.recordPolicyReload(result),
      }),
    );
    m.observeBuildInfo(version, () => policies.store.current()?.revision);
    const features = await l.start(
      featureComponent({
        config,
        given: options.featureStore,
        historyConfigured: upstream.logsUrl !== undefined && upstream.logApiKey !== undefined,
        policyReadsHistory: () => policies.store.current().requirements.history,
        log,
      }),
    );
    const logs = await l.start(
      logFollowerComponent({
        enabled: options.followLogs !== false,
        upstream,
        stateDir: config.stateDir,
        admin,
        metrics: m,
        log,
        onCall: vendor.recordCall,
        tracer,
        features: features.store,
        ...options.logs,
      }),
    );
    const onOutcome = (outcome: ActionOutcome) => {
      decisionLog.write(actionLine(outcome));
      m.recordActionOutcome(outcome.type, outcome.status);
      if (outcome.status === 'failed') log({ level: 'warn', msg: 'action failed', ...outcome });
    };
    const outbox = await l.start(
      outboxComponent({
        config,
        given: options.outboxStore,
        admin,
        onOutcome,
        flushOutcomes: () => decisionLog.flush(),
        log,
        tuning: { ...options.actionQueue, ...options.outbox },
        drainTimeoutMs,
      }),
    );
    const recent = await l.start(
      feedbackComponent({ ...config.feedback, operatorKeys: opsKeys, decisionLog }),
    );
    const callbackKey = upstream.callbackSignatureKey;
    await l.start(
      probesComponent({
        health: () => l.health(),
        readiness: () => l.readiness(),
        extra: [
          openApiRoute(version),
          ...(callbackKey === undefined ? [] : [callbackRoutes({ signatureKey: callbackKey, log })]),
        ],
      }),
    );
    // The client has one method per signal, named as the policy names them.
    const fetchSignal = ((name, query, callOptions) =>
      (signals[name] as (q: unknown, o: unknown) => Promise<unknown>)(query, callOptions)) as SignalFetcher;

    const appDeps: AppDeps = {
      admission,
      decide: {
        signals: fetchSignal,
        admin,
        policies: policies.store,
        deadlineMs: config.deadlineMs,
        subjectBinding: config.subjectBinding,
        shadow: policies.shadow,
        features: features.reader,
      },
      ruleStats: policies.ruleStats,
      apiKeys: options.apiKeys,
      feedback: { decisions: recent },
      actions: outbox,
      decisionLog,
      metrics: m,
      auditRequired:
        config.decisionLogOnFailure === 'refuse' ? () => decisionLog.health?.().ok ?? true : undefined,
      isDraining: () => draining,
      tracing: options.tracing,
      log,
      ops: config.opsPort !== undefined ? { access: 'elsewhere' } : { access: 'keys', keys: opsKeys },
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
        metrics: m,
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
      metrics: m,
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
