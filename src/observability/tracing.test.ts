import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { createTracing, isTracingRequested } from './tracing.ts';

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };

describe('tracing', () => {
  it('is off unless the OTEL_* environment asks for it', () => {
    expect(isTracingRequested({})).toBe(false);
    expect(createTracing({})).toBeUndefined();
    expect(isTracingRequested(ENDPOINT)).toBe(true);
    expect(isTracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://x:4318/v1/traces' })).toBe(true);
    expect(isTracingRequested({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(isTracingRequested({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
    expect(isTracingRequested({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' })).toBe(false);
  });

  it('continues the caller’s trace, passes its own span upstream and records each call as a child', async () => {
    const exporter = new InMemorySpanExporter();
    const tracing = createTracing(ENDPOINT, { spanProcessor: new SimpleSpanProcessor({ exporter }) })!;
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const span = tracing.startDecision(`00-${traceId}-00f067aa0ba902b7-01`, undefined);
    expect(span.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    span.recordCall('signals-newBrowser', 8, 'ok');
    span.recordCall('admin-user', 3, 'timeout');
    span.end({ verdict: 'allow', degraded: true, policyRevision: 'r1' });

    const spans = exporter.getFinishedSpans(); // read before shutdown, which empties the exporter
    await tracing.shutdown();
    const root = spans.find((s) => s.name === 'POST /decide')!;
    expect(root.kind).toBe(SpanKind.SERVER);
    expect(root.spanContext().traceId).toBe(traceId);
    expect(root.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(root.attributes).toMatchObject({ 'riskgate.verdict': 'allow', 'riskgate.degraded': true });
    expect(span.traceparent).toContain(root.spanContext().spanId);
    const children = spans.filter((s) => s.parentSpanContext?.spanId === root.spanContext().spanId);
    expect(children.map((c) => c.name).sort()).toEqual(['admin-user', 'signals-newBrowser']);
    expect(children.find((c) => c.name === 'admin-user')?.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('starts a new trace when the caller sends none', async () => {
    const exporter = new InMemorySpanExporter();
    const tracing = createTracing(ENDPOINT, { spanProcessor: new SimpleSpanProcessor({ exporter }) })!;
    const span = tracing.startDecision(undefined, undefined);
    expect(span.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    span.end({ verdict: 'deny', degraded: false, policyRevision: 'r1' });
    const spans = exporter.getFinishedSpans();
    await tracing.shutdown();
    expect(spans).toHaveLength(1);
    expect(spans[0]!.parentSpanContext).toBeUndefined();
    expect(span.traceparent).toContain(spans[0]!.spanContext().traceId);
  });
});
