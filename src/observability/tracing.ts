import { ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BatchSpanProcessor, type SpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';

/**
 * Opt-in tracing. Off unless the standard `OTEL_*` variables ask for it; off means `createTracing`
 * returns undefined and /decide never touches the OpenTelemetry API (always-on tracing costs
 * ~130 µs per request on Node 20). On, each decision is one server span, a child of the caller's
 * `traceparent` when it sends one, with one child span per upstream call (recorded from its timing);
 * the upstream calls carry the decision span's W3C `traceparent`. Sampling follows `OTEL_TRACES_SAMPLER(_ARG)` (SDK default:
 * parent-based always-on).
 */

export interface DecisionSpan {
  /** The `traceparent` to send upstream (the decision span's). */
  traceparent: string | undefined;
  /** Records one finished upstream call as a child span (start = end − duration). */
  recordCall(name: string, durationMs: number, outcome: string): void;
  end(attributes: { verdict: string; degraded: boolean; policyRevision: string }): void;
}

export interface DecisionTracing {
  startDecision(
    incomingTraceparent: string | undefined,
    incomingTracestate: string | undefined,
  ): DecisionSpan;
  shutdown(): Promise<void>;
}

/** Whether the environment turns tracing on (an OTLP endpoint, or an explicit exporter). */
export function isTracingRequested(env: Readonly<Record<string, string | undefined>>): boolean {
  if (env.OTEL_SDK_DISABLED === 'true') return false;
  const exporter = env.OTEL_TRACES_EXPORTER;
  if (exporter !== undefined && exporter !== '') return exporter !== 'none';
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

const propagator = new W3CTraceContextPropagator();
const getter = {
  keys: (carrier: Record<string, string | undefined>) => Object.keys(carrier),
  get: (carrier: Record<string, string | undefined>, key: string) => carrier[key],
};

/**
 * Starts the tracer provider (OTLP over HTTP, batched) when the environment asks for tracing;
 * undefined otherwise. Nothing is registered globally: spans are parented explicitly. Only
 * src/main.ts calls it; tests pass their own `spanProcessor`.
 */
export function createTracing(
  env: Readonly<Record<string, string | undefined>>,
  options: { spanProcessor?: SpanProcessor } = {},
): DecisionTracing | undefined {
  if (!isTracingRequested(env)) return undefined;
  const provider = new TracerProvider({
    spanProcessors: [options.spanProcessor ?? new BatchSpanProcessor({ exporter: new OTLPTraceExporter() })],
  });
  const tracer = provider.getTracer('riskgate');
  return {
    startDecision: (traceparent, tracestate) => startDecision(tracer, traceparent, tracestate),
    shutdown: () => provider.shutdown(),
  };
}

function startDecision(
  tracer: Tracer,
  traceparent: string | undefined,
  tracestate: string | undefined,
): DecisionSpan {
  const parent =
    traceparent === undefined
      ? ROOT_CONTEXT
      : propagator.extract(ROOT_CONTEXT, { traceparent, tracestate }, getter);
  const span: Span = tracer.startSpan('POST /decide', { kind: SpanKind.SERVER }, parent);
  const spanContext = trace.setSpan(parent, span);
  const carrier: Record<string, string> = {};
  propagator.inject(spanContext, carrier, {
    set: (c, k, v) => {
      c[k] = v;
    },
  });
  return {
    traceparent: carrier.traceparent,
    recordCall(name, durationMs, outcome) {
      const end = Date.now();
      const child = tracer.startSpan(
        name,
        { kind: SpanKind.CLIENT, startTime: end - durationMs },
        spanContext,
      );
      child.setAttribute('riskgate.outcome', outcome);
      if (outcome !== 'ok') child.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
      child.end(end);
    },
    end({ verdict, degraded, policyRevision }) {
      span.setAttributes({
        'riskgate.verdict': verdict,
        'riskgate.degraded': degraded,
        'riskgate.policy.revision': policyRevision,
      });
      span.end();
    },
  };
}
