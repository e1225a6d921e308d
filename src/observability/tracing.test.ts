import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { describe, expect, it, vi } from 'vitest';
import { parseRedaction, type RedactionRule } from '../config/redaction-rules.ts';
import { createRedactor, hashForLog } from '../decision-log/log-redaction.ts';
import { createTracing, isTracingRequested, type SpanRedaction } from './tracing.ts';

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
    const origin = 'http://127.0.0.1:4010';
    const ok = tracing.calls.startCall(span.traceparent, undefined, {
      name: 'signals new-browser',
      method: 'GET',
      origin,
      path: '/api/v1/signals/new-browser',
    });
    ok.end(200, undefined, 1);
    const failed = tracing.calls.startCall(span.traceparent, undefined, {
      name: 'admin get-user',
      method: 'GET',
      origin,
      path: '/srv/admin/v1/users/U1',
    });
    failed.end(503, 'RG_ERR_UPSTREAM_SERVER_ERROR', 2);
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
    expect(children.map((c) => c.name).sort()).toEqual(['admin get-user', 'signals new-browser']);
    expect(children.every((c) => c.kind === SpanKind.CLIENT)).toBe(true);
    // Each call sends its own span as the parent the upstream sees.
    expect(ok.traceparent).toContain(
      children.find((c) => c.name === 'signals new-browser')!.spanContext().spanId,
    );
    const admin = children.find((c) => c.name === 'admin get-user')!;
    expect(admin.status.code).toBe(SpanStatusCode.ERROR);
    expect(admin.attributes).toEqual({
      'http.request.method': 'GET',
      'server.address': '127.0.0.1',
      'server.port': 4010,
      // The user's id stays out of the span (the default redaction keeps identifiers out).
      'url.full': 'http://127.0.0.1:4010/srv/admin/v1/users/{userId}',
      'http.response.status_code': 503,
      'http.request.resend_count': 1,
      'error.type': 'RG_ERR_UPSTREAM_SERVER_ERROR',
    });
    expect(root.resource.attributes['service.name']).toBe('riskgate');
  });

  it('makes a background call the root of its own trace, linked to the decisions it serves', async () => {
    const exporter = new InMemorySpanExporter();
    const tracing = createTracing(
      { ...ENDPOINT, OTEL_SERVICE_NAME: 'riskgate-eu' },
      { spanProcessor: new SimpleSpanProcessor({ exporter }) },
    )!;
    const decisions = [
      tracing.startDecision(undefined, undefined),
      tracing.startDecision(undefined, undefined),
    ];
    const call = tracing.calls.startCall(
      undefined,
      decisions.map((d) => d.traceparent!),
      {
        name: 'signals remote-access-tool-batch',
        method: 'POST',
        origin: 'https://signals.example.com',
        path: '/x',
      },
    );
    call.end(200, undefined, 1);
    const [span] = exporter.getFinishedSpans();
    await tracing.shutdown();
    expect(span!.parentSpanContext).toBeUndefined();
    expect(span!.links.map((l) => l.context.traceId)).toEqual(
      decisions.map((d) => d.traceparent!.split('-')[1]),
    );
    expect(span!.attributes['server.port']).toBe(443);
    expect(span!.resource.attributes['service.name']).toBe('riskgate-eu');
  });

  it('writes each span as a JSON line on stderr, never stdout, with OTEL_TRACES_EXPORTER=console', async () => {
    const stderr: string[] = [];
    const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      stderr.push(String(chunk));
      return true;
    });
    const out = vi.spyOn(process.stdout, 'write');
    const dir = vi.spyOn(console, 'dir');
    const log = vi.spyOn(console, 'log');
    try {
      const tracing = createTracing({ OTEL_TRACES_EXPORTER: 'console' })!;
      tracing
        .startDecision(undefined, undefined)
        .end({ verdict: 'allow', degraded: false, policyRevision: 'r' });
      await tracing.shutdown();
      expect(out).not.toHaveBeenCalled();
      expect(dir).not.toHaveBeenCalled();
      expect(log).not.toHaveBeenCalled();
    } finally {
      for (const spy of [err, out, dir, log]) spy.mockRestore();
    }
    expect(stderr).toHaveLength(1);
    expect(JSON.parse(stderr[0]!)).toMatchObject({
      msg: 'span',
      name: 'POST /decide',
      attributes: { 'riskgate.verdict': 'allow' },
    });
  });

  it('follows the decision log’s redaction for identifiers in url.full: hashed as the log hashes them, kept only with none', async () => {
    const urlOf = async (redaction: SpanRedaction | undefined) => {
      const exporter = new InMemorySpanExporter();
      const tracing = createTracing(ENDPOINT, {
        spanProcessor: new SimpleSpanProcessor({ exporter }),
        redaction,
      })!;
      tracing.calls
        .startCall(undefined, undefined, {
          name: 'admin delete-device',
          method: 'DELETE',
          origin: 'http://127.0.0.1:4010',
          path: '/srv/admin/v1/users/U1/devices/D9',
        })
        .end(200, undefined, 1);
      const [span] = exporter.getFinishedSpans();
      await tracing.shutdown();
      return span!.attributes['url.full'];
    };
    const base = 'http://127.0.0.1:4010/srv/admin/v1/users';
    expect(await urlOf(undefined)).toBe(`${base}/{userId}/devices/{deviceId}`);
    expect(await urlOf({ rules: parseRedaction('request.ip:truncate') as RedactionRule[] })).toBe(
      `${base}/{userId}/devices/{deviceId}`,
    );
    const hashKey = 'k'.repeat(20);
    const hashed = { rules: parseRedaction('request.userId:hash') as RedactionRule[], hashKey };
    expect(await urlOf(hashed)).toBe(`${base}/${hashForLog('U1', hashKey)}/devices/{deviceId}`);
    // The same value the decision log writes for request.userId.
    expect(createRedactor(hashed.rules, hashKey)({ request: { userId: 'U1' } })).toEqual({
      request: { userId: hashForLog('U1', hashKey) },
    });
    expect(await urlOf({ rules: [] })).toBe(`${base}/U1/devices/D9`);
  });

  it('gives the decision span HTTP semantic-convention attributes; the User-Agent follows redaction', async () => {
    const attributesOf = async (redaction?: SpanRedaction | undefined) => {
      const exporter = new InMemorySpanExporter();
      const tracing = createTracing(ENDPOINT, {
        spanProcessor: new SimpleSpanProcessor({ exporter }),
        redaction,
      })!;
      tracing
        .startDecision(undefined, undefined, {
          method: 'POST',
          url: 'http://riskgate.internal:8080/decide',
          route: '/decide',
          userAgent: 'login-backend/2.1',
        })
        .end({ verdict: 'deny', degraded: false, policyRevision: 'r1', status: 200 });
      const [span] = exporter.getFinishedSpans();
      await tracing.shutdown();
      expect(span!.name).toBe('POST /decide');
      return span!.attributes;
    };
    expect(await attributesOf()).toEqual({
      'http.request.method': 'POST',
      'http.route': '/decide',
      'url.path': '/decide',
      'url.scheme': 'http',
      'server.address': 'riskgate.internal',
      'server.port': 8080,
      'user_agent.original': 'login-backend/2.1',
      'http.response.status_code': 200,
      'riskgate.verdict': 'deny',
      'riskgate.degraded': false,
      'riskgate.policy.revision': 'r1',
    });
    const dropped = await attributesOf({
      rules: parseRedaction('request.userAgent:drop') as RedactionRule[],
    });
    expect(dropped['user_agent.original']).toBeUndefined();
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
