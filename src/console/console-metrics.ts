import { DataPointType, type ResourceMetrics } from '@opentelemetry/sdk-metrics';

/**
 * What the Health page reads from the metrics `GET /metrics` serves, as collected (never their
 * text): each vendor route's calls, mean latency and errors, and the decisions shed under
 * overload, since this process started (the counters' own span; a rate over time is Prometheus's job).
 */

export interface VendorRouteStats {
  upstream: string;
  operation: string;
  calls: number;
  meanMs: number;
  errors: number;
}

export interface MetricsSummary {
  vendor: VendorRouteStats[];
  decisions: number;
  shed: number;
}

/** The vendor routes (by upstream and operation) and shed counts of collected metrics. */
export function summarizeMetrics(collected: ResourceMetrics): MetricsSummary {
  const routes = new Map<string, VendorRouteStats & { sumS: number }>();
  const route = (attributes: Record<string, unknown>) => {
    const upstream = String(attributes.upstream ?? '?');
    const operation = String(attributes.operation ?? '?');
    const key = `${upstream} ${operation}`;
    let r = routes.get(key);
    if (r === undefined) {
      r = { upstream, operation, calls: 0, meanMs: 0, errors: 0, sumS: 0 };
      routes.set(key, r);
    }
    return r;
  };
  let decisions = 0;
  let shed = 0;
  for (const metric of collected.scopeMetrics.flatMap((s) => s.metrics)) {
    const name = metric.descriptor.name;
    if (metric.dataPointType === DataPointType.HISTOGRAM) {
      if (name !== 'riskgate_upstream_call_duration_seconds') continue;
      for (const p of metric.dataPoints) {
        const r = route(p.attributes);
        r.calls += p.value.count;
        r.sumS += p.value.sum ?? 0;
      }
    } else if (metric.dataPointType === DataPointType.SUM) {
      const total = metric.dataPoints.reduce((n, p) => n + p.value, 0);
      if (name === 'riskgate_decisions') decisions += total;
      else if (name === 'riskgate_decisions_shed') shed += total;
      else if (name === 'riskgate_upstream_errors')
        for (const p of metric.dataPoints) route(p.attributes).errors += p.value;
    }
  }
  const vendor = [...routes.values()]
    .map(({ sumS, ...r }) => ({ ...r, meanMs: r.calls === 0 ? 0 : (sumS * 1000) / r.calls }))
    .sort((a, b) => `${a.upstream} ${a.operation}`.localeCompare(`${b.upstream} ${b.operation}`));
  return { vendor, decisions, shed };
}
