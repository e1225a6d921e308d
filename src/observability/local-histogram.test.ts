import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { describe, expect, it } from 'vitest';
import { addLocalHistograms, createLocalHistogram } from './local-histogram.ts';
import { createMetrics, serializeMetrics } from './metrics.ts';

const BOUNDARIES = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
// On a bound, between bounds, past the last, zero, and what the SDK drops (negative, NaN).
const VALUES = [0.001, 0.0007, 0.003, 0.0025, 0.04, 7, 0, 5, 0.25, -1, Number.NaN, 0.012];

/** The Prometheus lines of one metric family, comments included. */
function family(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.includes(name));
}

describe('a locally aggregated histogram', () => {
  it('exposes what the OpenTelemetry SDK histogram exposes for the same records, series by series', async () => {
    const reader = new PrometheusExporter({ preventServerStart: true });
    const provider = new MeterProvider({ readers: [reader] });
    const sdk = provider.getMeter('riskgate').createHistogram('h_seconds', {
      description: 'a histogram',
      unit: 's',
      advice: { explicitBucketBoundaries: BOUNDARIES },
    });
    const local = createLocalHistogram({
      name: 'h_seconds',
      description: 'a histogram',
      unit: 's',
      boundaries: BOUNDARIES,
    });
    const a = local.series({ upstream: 'signals', operation: 'new-browser' });
    const b = local.series({ upstream: 'admin', operation: 'get-user' });
    VALUES.forEach((v, i) => {
      const attrs = i % 3 === 0 ? { upstream: 'admin', operation: 'get-user' } : undefined;
      sdk.record(v, attrs ?? { upstream: 'signals', operation: 'new-browser' });
      (attrs ? b : a).record(v);
    });

    const expected = serializeMetrics((await reader.collect()).resourceMetrics);
    const mine = serializeMetrics(
      addLocalHistograms({ resource: { attributes: {} } as never, scopeMetrics: [] }, 'riskgate', [local]),
    );
    const lines = (text: string) => family(text, 'h_seconds').sort();
    expect(lines(mine)).toEqual(lines(expected));
    expect(lines(mine)).toContain('h_seconds_bucket{upstream="signals",operation="new-browser",le="+Inf"} 7');
    await provider.shutdown();
  });

  it('is left out of the collection until something is recorded, as the SDK leaves it out', async () => {
    const local = createLocalHistogram({ name: 'h', description: 'd', unit: '', boundaries: [1] });
    local.series({});
    const collected = addLocalHistograms(
      { resource: { attributes: {} } as never, scopeMetrics: [] },
      'riskgate',
      [local],
    );
    expect(collected.scopeMetrics).toEqual([]);
  });

  it('reaches riskgate’s metrics: decision and upstream call durations, and batch sizes', async () => {
    const metrics = createMetrics({ runtime: false });
    metrics.recordDecision('deny', false, 3);
    metrics.recordDecision('deny', true, 30);
    metrics.recordUpstreamCall('signals', 'new-browser', 2);
    metrics.recordRemoteAccessToolBatch(3);
    const text = await metrics.render();
    expect(text).toMatch(/^riskgate_decision_duration_seconds_bucket\{verdict="deny",le="0.005"\} 1$/m);
    expect(text).toMatch(/^riskgate_decision_duration_seconds_count\{verdict="deny"\} 2$/m);
    expect(text).toMatch(
      /^riskgate_upstream_call_duration_seconds_bucket\{upstream="signals",operation="new-browser",le="0.0025"\} 1$/m,
    );
    expect(text).toMatch(/^riskgate_remote_access_tool_batch_size_bucket\{le="5"\} 1$/m);
    expect(text).toMatch(/^# TYPE riskgate_upstream_call_duration_seconds histogram$/m);
    // Still counted as the SDK counts: the counters beside them are untouched.
    expect(text).toMatch(/^riskgate_decisions_total\{verdict="deny",degraded="true"\} 1$/m);
    await metrics.shutdown();
  });
});
