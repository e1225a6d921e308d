import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { describe, expect, it } from 'vitest';
import { addLocalMetrics, createLocalCounter, createLocalHistogram } from './local-aggregation.ts';
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
      addLocalMetrics({ resource: { attributes: {} } as never, scopeMetrics: [] }, 'riskgate', [local]),
    );
    const lines = (text: string) => family(text, 'h_seconds').sort();
    expect(lines(mine)).toEqual(lines(expected));
    expect(lines(mine)).toContain('h_seconds_bucket{upstream="signals",operation="new-browser",le="+Inf"} 7');
    await provider.shutdown();
  });

  it('is left out of the collection until something is recorded, as the SDK leaves it out', async () => {
    const local = createLocalHistogram({ name: 'h', description: 'd', unit: '', boundaries: [1] });
    local.series({});
    const collected = addLocalMetrics(
      { resource: { attributes: {} } as never, scopeMetrics: [] },
      'riskgate',
      [local],
    );
    expect(collected.scopeMetrics).toEqual([]);
  });

  it('a local counter exposes what the SDK counter exposes, a series added 0 included', async () => {
    const reader = new PrometheusExporter({ preventServerStart: true });
    const provider = new MeterProvider({ readers: [reader] });
    const sdk = provider.getMeter('riskgate').createCounter('c', { description: 'a counter' });
    const local = createLocalCounter({ name: 'c', description: 'a counter' });
    const allow = local.series({ verdict: 'allow', degraded: false });
    const deny = local.series({ verdict: 'deny', degraded: true });
    const zero = local.series({ verdict: 'challenge', degraded: false });
    local.series({ verdict: 'never', degraded: false });
    for (const [series, attrs, value] of [
      [allow, { verdict: 'allow', degraded: false }, 1],
      [allow, { verdict: 'allow', degraded: false }, 2.5],
      [deny, { verdict: 'deny', degraded: true }, 1],
      [deny, { verdict: 'deny', degraded: true }, -1],
      [zero, { verdict: 'challenge', degraded: false }, 0],
    ] as const) {
      sdk.add(value, attrs);
      series.add(value);
    }
    const expected = serializeMetrics((await reader.collect()).resourceMetrics);
    const mine = serializeMetrics(
      addLocalMetrics({ resource: { attributes: {} } as never, scopeMetrics: [] }, 'riskgate', [local]),
    );
    const lines = (text: string) => family(text, 'c_total').sort();
    expect(lines(mine)).toEqual(lines(expected));
    expect(lines(mine)).toContain('c_total{verdict="challenge",degraded="false"} 0');
    expect(mine).not.toContain('never');
    await provider.shutdown();
  });

  it('bounds its series as the SDK does: past 1,999 attribute sets, one overflow series', async () => {
    const reader = new PrometheusExporter({ preventServerStart: true });
    const provider = new MeterProvider({ readers: [reader] });
    const sdk = provider.getMeter('riskgate').createCounter('hits', { description: 'd' });
    const local = createLocalCounter({ name: 'hits', description: 'd' });
    for (let i = 0; i < 2100; i++) {
      sdk.add(1, { rule: `r${i}` });
      local.series({ rule: `r${i}` }).add(1);
    }
    const expected = serializeMetrics((await reader.collect()).resourceMetrics);
    const mine = serializeMetrics(
      addLocalMetrics({ resource: { attributes: {} } as never, scopeMetrics: [] }, 'riskgate', [local]),
    );
    const lines = (text: string) => family(text, 'hits_total').sort();
    expect(lines(mine)).toEqual(lines(expected));
    expect(lines(mine)).toContain('hits_total{otel_metric_overflow="true"} 101');
    await provider.shutdown();
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
    expect(text).toMatch(/^riskgate_decisions_total\{verdict="deny",degraded="true"\} 1$/m);
    metrics.recordRuleHits('active', 'r7', [{ id: 'new-device' }, { id: 'far-away' }]);
    metrics.recordRuleHits('active', 'r7', [{ id: 'new-device' }]);
    metrics.recordActionAnswer('lock-out', 'queued');
    const after = await metrics.render();
    expect(after).toMatch(/^riskgate_rule_hits_total\{policy="active",revision="r7",rule="new-device"\} 2$/m);
    expect(after).toMatch(/^riskgate_action_answers_total\{type="lock-out",status="queued"\} 1$/m);
    expect(after).toMatch(/^# TYPE riskgate_rule_hits_total counter$/m);
    await metrics.shutdown();
  });
});
