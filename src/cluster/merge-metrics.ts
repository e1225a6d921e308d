import type { MetricData, ResourceMetrics, ScopeMetrics } from '@opentelemetry/sdk-metrics';
import { OUTBOX_GAUGES } from '../outbox/outbox-gauges.ts';

/**
 * Gauges that read a store every worker shares (the outbox's SQLite file or Redis): each worker
 * reads the same figure, so they are reported once, from the lowest-numbered worker that has
 * them, without a `worker` label; a sum over the series is then the store's figure, not a multiple
 * of it. (Across replicas sharing one PostgreSQL outbox each replica still reports it: aggregate those
 * with `max`, as deploy/prometheus-rules.yaml does.)
 */
export const STORE_WIDE_GAUGES: ReadonlySet<string> = new Set([
  OUTBOX_GAUGES.pending,
  OUTBOX_GAUGES.oldestPendingAgeSeconds,
  OUTBOX_GAUGES.dead,
]);

/**
 * A worker's collected metrics as plain data, for IPC: OpenTelemetry's `ResourceMetrics` with the
 * resource reduced to its attributes (all the Prometheus serializer reads of it).
 */
export function plainMetrics(collected: ResourceMetrics): ResourceMetrics {
  return {
    resource: { attributes: collected.resource.attributes },
    scopeMetrics: collected.scopeMetrics,
  } as ResourceMetrics;
}

/**
 * Merges the collected metrics of several worker processes into one: every data point gets a
 * `worker` attribute (`"<index>"`, first among its labels), and each metric holds the data points
 * of every worker, in worker order, so the exposition writes each family once. The metrics in
 * `storeWide` (default `STORE_WIDE_GAUGES`) are taken from one worker only and carry no `worker`
 * label. The resource is the lowest-numbered worker's. Structured all the way: nothing is parsed.
 */
export function mergeWorkerMetrics(
  collected: readonly { worker: number; metrics: ResourceMetrics }[],
  storeWide: ReadonlySet<string> = STORE_WIDE_GAUGES,
): ResourceMetrics {
  const sorted = [...collected].sort((a, b) => a.worker - b.worker);
  const scopes = new Map<string, { scope: ScopeMetrics; metrics: Map<string, MetricData> }>();
  for (const { worker, metrics } of sorted) {
    for (const scopeMetrics of metrics.scopeMetrics) {
      const key = `${scopeMetrics.scope.name}@${scopeMetrics.scope.version ?? ''}`;
      let scope = scopes.get(key);
      if (scope === undefined) {
        scope = { scope: { scope: scopeMetrics.scope, metrics: [] }, metrics: new Map() };
        scopes.set(key, scope);
      }
      for (const metric of scopeMetrics.metrics) {
        const name = metric.descriptor.name;
        const merged = scope.metrics.get(name);
        if (storeWide.has(name)) {
          if (merged === undefined) scope.metrics.set(name, metric);
          continue;
        }
        const labelled = metric.dataPoints.map((p) => ({
          ...p,
          attributes: { worker: String(worker), ...p.attributes },
        }));
        if (merged === undefined) scope.metrics.set(name, { ...metric, dataPoints: labelled } as MetricData);
        else (merged.dataPoints as unknown[]).push(...labelled);
      }
    }
  }
  return {
    resource: sorted[0]?.metrics.resource ?? { attributes: {} },
    scopeMetrics: [...scopes.values()].map((s) => ({
      scope: s.scope.scope,
      metrics: [...s.metrics.values()],
    })),
  } as ResourceMetrics;
}
