import { describe, expect, it } from 'vitest';
import { summarizeMetrics } from './console-metrics.ts';

describe('the Health page’s reading of /metrics', () => {
  it('sums each vendor route’s calls, latency and errors, and the shed decisions', () => {
    const text = [
      '# HELP riskgate_upstream_call_duration_seconds Upstream call latency',
      'riskgate_upstream_call_duration_seconds_bucket{upstream="signals",operation="new-browser",le="0.1"} 3',
      'riskgate_upstream_call_duration_seconds_count{upstream="signals",operation="new-browser"} 4',
      'riskgate_upstream_call_duration_seconds_sum{upstream="signals",operation="new-browser"} 0.2',
      'riskgate_upstream_errors_total{upstream="signals",operation="new-browser",code="RG_ERR_UPSTREAM_TIMEOUT"} 1',
      'riskgate_upstream_errors_total{upstream="signals",operation="new-browser",code="RG_ERR_CIRCUIT_OPEN"} 2',
      'riskgate_decisions_total{verdict="allow",degraded="false"} 90',
      'riskgate_decisions_total{verdict="deny",degraded="true"} 10',
      'riskgate_decisions_shed_total{reason="in_flight",answer="refused"} 5',
    ].join('\n');
    expect(summarizeMetrics(text)).toEqual({
      vendor: [{ upstream: 'signals', operation: 'new-browser', calls: 4, meanMs: 50, errors: 3 }],
      decisions: 100,
      shed: 5,
    });
  });
});
