import type { Attributes, Counter } from '@opentelemetry/api';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MeterProvider, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import type { UpstreamName } from '../errors/riskgate-error.ts';
import {
  addLocalMetrics,
  type CounterSeries,
  createLocalCounter,
  createLocalHistogram,
  type HistogramSeries,
} from './local-aggregation.ts';
import { startRuntimeMetrics } from './runtime-metrics.ts';

/**
 * riskgate's metrics: OpenTelemetry instruments, read through a Prometheus exporter that never
 * opens a port of its own; `GET /metrics` on the main server serialises on demand. One instance
 * per process (main) or per test; nothing is registered globally. Modules report through the
 * hooks they already have (`onCall`, `onBatch`, `onReload`), which the composition root (src/service/) wires here.
 */
export interface RiskgateMetrics {
  /** A decision answered; `durationMs` is what the caller waited. */
  recordDecision(verdict: string, degraded: boolean, durationMs: number): void;
  /** One upstream call, from a client's `onCall`; `code` when it failed. */
  recordUpstreamCall(upstream: UpstreamName, operation: string, durationMs: number, code?: string): void;
  /** Items in one remote-access-tool batch sent upstream. */
  recordRemoteAccessToolBatch(size: number): void;
  recordTokenRefresh(outcome: 'ok' | 'error'): void;
  recordPolicyReload(outcome: 'ok' | 'error'): void;
  /** A queued action's final outcome. */
  recordActionOutcome(type: string, status: 'done' | 'failed'): void;
  /**
   * An action as an answer reported it (`riskgate_action_answers_total{type,status}`): queued,
   * deferred (subject unverified, or the outbox slow), failed, skipped, done.
   */
  recordActionAnswer(type: string, status: string): void;
  /** Log API events read, by type (bounded: types beyond the first 100 count as `other`). */
  recordLogEvents(type: string, count: number): void;
  /** A Log API window that failed (it is read again after a backoff). */
  recordLogPollError(): void;
  /** A decision shed under overload: refused (503) or answered with the policy's overload verdict. */
  recordShed(reason: string, answer: 'refused' | 'verdict'): void;
  /** The shadow policy's verdict beside the active one (`riskgate_shadow_decisions_total{active,shadow}`). */
  recordShadow(active: string, shadow: string): void;
  /** The rules a decision matched (`riskgate_rule_hits_total{policy,revision,rule}`; policy active|shadow). */
  recordRuleHits(policy: 'active' | 'shadow', revision: string, rules: readonly { id: string }[]): void;
  /** A circuit breaker changed state (`riskgate_circuit_transitions_total`). */
  recordCircuitTransition(route: string, to: string): void;
  /**
   * A failed vendor call its breaker did not count: riskgate's own deadline cut it, or its timer
   * fired late (`riskgate_circuit_failures_not_counted_total{route,reason}`).
   */
  recordCircuitNotCounted(route: string, reason: string): void;
  /** `riskgate_circuit_state{route,state}`: 1 for each route's current state, read at scrape time. */
  observeCircuits(read: () => readonly { route: string; state: string }[]): void;
  /** A request entered riskgate's HTTP edge (`riskgate_http_requests_in_flight`). */
  requestStarted(): void;
  /** It was answered; a 4xx or 5xx is counted by status and `RG_ERR_*` code. */
  requestFinished(status: number, code: string | undefined): void;
  /** Reports a value read at scrape time that can go up and down (queue depth, lag). */
  observeGauge(name: string, description: string, read: () => number): void;
  /** Reports a running total read at scrape time (it only grows); exposed as `<name>_total`. */
  observeCounter(name: string, description: string, read: () => number): void;
  /**
   * `riskgate_build_info{version,node_version,policy_revision} 1`: which build and which policy
   * revision answer, read at scrape time (the revision follows reloads).
   */
  observeBuildInfo(version: string, policyRevision: () => string | undefined): void;
  /**
   * `riskgate_policy_version_info{source,version_id,revision,generation,staged_version_id,stage,percent} 1`:
   * which policy version this replica serves (source `database` or `file`) and which it stages,
   * read at scrape time; `riskgate_policy_version_refused` 1 while the version the database says
   * to serve (or stage) does not compile here (the last good one is served): alert on it.
   */
  observePolicyVersion(read: () => PolicyVersionInfo): void;
  /**
   * Every metric as collected (OpenTelemetry's data model, plain data): what a cluster worker
   * sends its primary and the console's Health page reads, never the text.
   */
  collect(): Promise<ResourceMetrics>;
  /** The Prometheus text exposition of every metric (`serializeMetrics` of `collect`). */
  render(): Promise<string>;
  shutdown(): Promise<void>;
}

/** The labels of `riskgate_policy_version_info`, and whether a version is refused. */
export interface PolicyVersionInfo {
  source: 'database' | 'file';
  versionId: string;
  revision: string;
  generation: number;
  stagedVersionId: string;
  stage: string;
  percent: number;
  refused: boolean;
}

const LATENCY_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const BATCH_BUCKETS = [1, 2, 5, 10, 20, 50, 100];

const CIRCUIT_STATES = ['closed', 'open', 'half_open'] as const;

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * The process's metrics. `runtime` (default true) also samples the event loop, memory and GC
 * (`src/observability/runtime-metrics.ts`), stopped by `shutdown()`.
 */
const serializer = new PrometheusSerializer(undefined, false, undefined, true, true);

/**
 * The Prometheus text exposition of collected metrics (this process's, or several workers'
 * merged). Reads only the resource's `attributes`, so metrics that crossed IPC as plain data
 * serialise as they were.
 */
export function serializeMetrics(metrics: ResourceMetrics): string {
  return serializer.serialize(metrics);
}

export function createMetrics(options: { runtime?: boolean } = {}): RiskgateMetrics {
  const reader = new PrometheusExporter({ preventServerStart: true });
  const provider = new MeterProvider({ readers: [reader] });
  const meter = provider.getMeter('riskgate');

  const counter = (name: string, description: string): Counter => meter.createCounter(name, { description });

  // The histograms and counters recorded on every decision are aggregated here, not by the SDK
  // (issue 32: it hashes the attributes of every record); `collect` hands them over as the SDK's
  // own data (src/observability/local-aggregation.ts).
  const decisionDuration = createLocalHistogram({
    name: 'riskgate_decision_duration_seconds',
    description: 'Time to answer POST /decide, by verdict',
    unit: 's',
    boundaries: LATENCY_BUCKETS_S,
  });
  const decisions = createLocalCounter({
    name: 'riskgate_decisions',
    description: 'Decisions answered, by verdict and degraded',
  });
  const upstreamDuration = createLocalHistogram({
    name: 'riskgate_upstream_call_duration_seconds',
    description: 'Upstream call latency, by upstream and operation',
    unit: 's',
    boundaries: LATENCY_BUCKETS_S,
  });
  const upstreamErrors = counter(
    'riskgate_upstream_errors',
    'Failed upstream calls, by upstream, operation and code',
  );
  const batchSize = createLocalHistogram({
    name: 'riskgate_remote_access_tool_batch_size',
    description: 'Items per remote-access-tool batch call',
    unit: '',
    boundaries: BATCH_BUCKETS,
  });
  const batchSizes = batchSize.series({});

  const tokenRefreshes = counter('riskgate_token_refreshes', 'Token requests, by outcome');
  const policyReloads = counter('riskgate_policy_reloads', 'Policy reloads, by outcome');
  const actionOutcomes = counter('riskgate_action_outcomes', 'Queued action outcomes, by type and status');
  const actionAnswers = createLocalCounter({
    name: 'riskgate_action_answers',
    description:
      'Actions as the answers reported them, by type and status (queued, deferred, failed, skipped, done)',
  });
  // Action types and statuses are riskgate's own names (a bounded set).
  const actionAnswerSeries = new Map<string, CounterSeries>();
  const logEvents = counter('riskgate_log_events', 'Log API events read, by type');
  const logPollErrors = counter('riskgate_log_poll_errors', 'Log API windows that failed and are read again');
  const httpErrors = counter(
    'riskgate_http_errors',
    'Answers of status 400 or more, by status and RG_ERR_* code',
  );
  let inFlight = 0;
  meter
    .createObservableGauge('riskgate_http_requests_in_flight', {
      description: 'Requests being handled by the HTTP edge (every route)',
    })
    .addCallback((r) => r.observe(inFlight));
  const httpErrorAttrs = new Map<string, Attributes>();
  const shedDecisions = counter(
    'riskgate_decisions_shed',
    'Decisions (and feedback) not started under overload, by reason (event_loop_delay, in_flight) and answer (refused: 503, verdict: the policy’s overload verdict)',
  );
  const shedAttrs = new Map<string, Attributes>();
  const shadowDecisions = counter(
    'riskgate_shadow_decisions',
    'Decisions evaluated by the shadow policy too, by active and shadow verdict (agreement when equal)',
  );
  const shadowAttrs = new Map<string, Attributes>();
  const ruleHits = createLocalCounter({
    name: 'riskgate_rule_hits',
    description: 'Rules matched, by policy (active or shadow), revision and rule',
  });
  const ruleSeries = new Map<string, CounterSeries>();
  const circuitTransitions = counter(
    'riskgate_circuit_transitions',
    'Circuit breaker state changes, by route (`<upstream> <operation>`) and new state',
  );
  const circuitNotCounted = counter(
    'riskgate_circuit_failures_not_counted',
    'Failed vendor calls the circuit breaker did not count against the route, by route and reason (deadline: the decision’s own deadline or caller cut it; riskgate_late: a timeout whose timer fired late, riskgate’s loop was behind)',
  );
  const notCountedAttrs = new Map<string, Attributes>();
  const runtime = options.runtime === false ? undefined : startRuntimeMetrics(meter);
  // Event types come from the vendor: a bounded label set, whatever it sends.
  const logEventAttrs = new Map<string, Attributes>();
  const OTHER_TYPE: Attributes = { type: 'other' };

  // Attribute objects and series are reused: the hot path records without allocating them.
  const verdictSeries = new Map<string, HistogramSeries>();
  // Operations are riskgate's own names (a bounded set): one series per upstream and operation.
  const upstreamSeries = new Map<string, HistogramSeries>();
  const decisionSeries = new Map<string, CounterSeries>();
  const localMetrics = [decisionDuration, decisions, upstreamDuration, batchSize, actionAnswers, ruleHits];
  const cached = <T>(map: Map<string, T>, key: string, make: () => T): T => {
    let attrs = map.get(key);
    if (attrs === undefined) {
      attrs = make();
      map.set(key, attrs);
    }
    return attrs;
  };

  // The series an alert or a dashboard rate()s exist at 0 from the start, so the first failure
  // is an increase (a series born at 1 is invisible to rate() and increase()).
  for (const outcome of ['ok', 'error']) {
    tokenRefreshes.add(0, { outcome });
    policyReloads.add(0, { outcome });
  }
  for (const reason of ['event_loop_delay', 'in_flight'])
    for (const answer of ['refused', 'verdict'])
      shedDecisions.add(
        0,
        cached(shedAttrs, `${reason}:${answer}`, () => ({ reason, answer })),
      );
  logPollErrors.add(0);

  const collect = async (): Promise<ResourceMetrics> =>
    addLocalMetrics((await reader.collect()).resourceMetrics, 'riskgate', localMetrics);

  return {
    recordDecision(verdict, degraded, durationMs) {
      cached(verdictSeries, verdict, () => decisionDuration.series({ verdict })).record(durationMs / 1000);
      cached(decisionSeries, degraded ? `${verdict}:degraded` : verdict, () =>
        decisions.series({ verdict, degraded }),
      ).add(1);
    },
    recordUpstreamCall(upstream, operation, durationMs, code) {
      cached(upstreamSeries, `${upstream}:${operation}`, () =>
        upstreamDuration.series({ upstream, operation }),
      ).record(durationMs / 1000);
      if (code !== undefined) upstreamErrors.add(1, { upstream, operation, code });
    },
    recordRemoteAccessToolBatch(size) {
      batchSizes.record(size);
    },
    recordTokenRefresh(outcome) {
      tokenRefreshes.add(1, { outcome });
    },
    recordPolicyReload(outcome) {
      policyReloads.add(1, { outcome });
    },
    recordActionOutcome(type, status) {
      actionOutcomes.add(1, { type, status });
    },
    recordActionAnswer(type, status) {
      cached(actionAnswerSeries, `${type}:${status}`, () => actionAnswers.series({ type, status })).add(1);
    },
    recordLogEvents(type, count) {
      let attrs = logEventAttrs.get(type);
      if (attrs === undefined) {
        if (logEventAttrs.size < 100 && /^[A-Za-z0-9._-]{1,100}$/.test(type)) {
          attrs = { type };
          logEventAttrs.set(type, attrs);
        } else attrs = OTHER_TYPE;
      }
      logEvents.add(count, attrs);
    },
    recordLogPollError() {
      logPollErrors.add(1);
    },
    recordShadow(active, shadow) {
      shadowDecisions.add(
        1,
        cached(shadowAttrs, `${active}:${shadow}`, () => ({ active, shadow })),
      );
    },
    recordRuleHits(policy, revision, rules) {
      for (const r of rules) {
        cached(ruleSeries, `${policy}:${revision}:${r.id}`, () =>
          ruleHits.series({ policy, revision, rule: r.id }),
        ).add(1);
      }
    },
    recordShed(reason, answer) {
      shedDecisions.add(
        1,
        cached(shedAttrs, `${reason}:${answer}`, () => ({ reason, answer })),
      );
    },
    recordCircuitTransition(route, to) {
      circuitTransitions.add(1, { route, to });
    },
    recordCircuitNotCounted(route, reason) {
      circuitNotCounted.add(
        1,
        cached(notCountedAttrs, `${route}:${reason}`, () => ({ route, reason })),
      );
    },
    observeCircuits(read) {
      meter
        .createObservableGauge('riskgate_circuit_state', {
          description:
            'Circuit breaker state per vendor route (every route riskgate calls, from the start): 1 on the current state (closed, open, half_open), 0 on the others',
        })
        .addCallback((r) => {
          for (const { route, state } of read()) {
            for (const s of CIRCUIT_STATES) r.observe(s === state ? 1 : 0, { route, state: s });
          }
        });
    },
    requestStarted() {
      inFlight++;
    },
    requestFinished(status, code) {
      inFlight--;
      if (status < 400) return;
      const key = `${status}:${code}`;
      httpErrors.add(
        1,
        cached(httpErrorAttrs, key, () => ({ status, code: code ?? 'none' })),
      );
    },
    observeGauge(name, description, read) {
      meter.createObservableGauge(name, { description }).addCallback((r) => r.observe(read()));
    },
    observeCounter(name, description, read) {
      meter.createObservableCounter(name, { description }).addCallback((r) => r.observe(read()));
    },
    observeBuildInfo(version, policyRevision) {
      meter
        .createObservableGauge('riskgate_build_info', {
          description: 'Always 1: the labels say which version, Node.js and policy revision answer',
        })
        .addCallback((r) =>
          r.observe(1, {
            version,
            node_version: process.versions.node,
            policy_revision: policyRevision() ?? 'none',
          }),
        );
    },
    observePolicyVersion(read) {
      meter
        .createObservableGauge('riskgate_policy_version_info', {
          description: 'Always 1: the labels say which policy version this replica serves and stages',
        })
        .addCallback((r) => {
          const v = read();
          r.observe(1, {
            source: v.source,
            version_id: v.versionId,
            revision: v.revision,
            generation: v.generation,
            staged_version_id: v.stagedVersionId,
            stage: v.stage,
            percent: v.percent,
          });
        });
      meter
        .createObservableGauge('riskgate_policy_version_refused', {
          description: '1 while the policy version the database says to serve does not compile here',
        })
        .addCallback((r) => r.observe(read().refused ? 1 : 0));
    },
    collect,
    async render() {
      return serializeMetrics(await collect());
    },
    shutdown: () => {
      runtime?.stop();
      return provider.shutdown();
    },
  };
}
