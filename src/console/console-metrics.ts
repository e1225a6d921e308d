/**
 * What the Health page reads from the Prometheus text of `GET /metrics`: each vendor route's
 * calls, mean latency and errors, and the decisions shed under overload, since this process
 * started (the counters' own span; a rate over time is Prometheus's job).
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

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (m === null) continue;
    const value = Number(m[3]);
    if (!Number.isFinite(value)) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value });
  }
  return out;
}

/** The vendor routes (by upstream and operation) and shed counts of a Prometheus exposition. */
export function summarizeMetrics(text: string): MetricsSummary {
  const routes = new Map<string, VendorRouteStats & { sumS: number }>();
  const route = (l: Record<string, string>) => {
    const upstream = l.upstream ?? '?';
    const operation = l.operation ?? '?';
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
  for (const s of samples(text)) {
    if (s.name === 'riskgate_upstream_call_duration_seconds_count') route(s.labels).calls += s.value;
    else if (s.name === 'riskgate_upstream_call_duration_seconds_sum') route(s.labels).sumS += s.value;
    else if (s.name === 'riskgate_upstream_errors_total') route(s.labels).errors += s.value;
    else if (s.name === 'riskgate_decisions_total') decisions += s.value;
    else if (s.name === 'riskgate_decisions_shed_total') shed += s.value;
  }
  const vendor = [...routes.values()]
    .map(({ sumS, ...r }) => ({ ...r, meanMs: r.calls === 0 ? 0 : (sumS * 1000) / r.calls }))
    .sort((a, b) => `${a.upstream} ${a.operation}`.localeCompare(`${b.upstream} ${b.operation}`));
  return { vendor, decisions, shed };
}
