import {
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_RESEND_COUNT,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_URL_FULL,
} from '@opentelemetry/semantic-conventions';
import type { CallSpan, CallSpanStart, CallTracer } from '../upstream/call-tracer.ts';

/**
 * Opt-in tracing. Off unless the standard `OTEL_*` variables ask for it; off means `createTracing`
 * returns undefined and neither /decide nor the upstream layer touches the OpenTelemetry API. On,
 * each decision is one server span, a child of the caller's `traceparent` when it sends one, and
 * every upstream call is a client span of its own (HTTP semantic conventions) whose `traceparent`
 * the call sends: the decision's calls are children of its span; background calls (token refresh,
 * cache refresh, the Log API follower) are traces of their own. Sampling follows
 * `OTEL_TRACES_SAMPLER(_ARG)` (SDK default: parent-based always-on); `OTEL_SERVICE_NAME` names the
 * service (default `riskgate`); `OTEL_TRACES_EXPORTER` is `otlp` (OTLP/HTTP JSON to
 * `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`, batched) or `console` (each span on stdout as it ends).
 */

export interface DecisionSpan {
  /** The `traceparent` its upstream calls are children of (the decision span's). */
  traceparent: string | undefined;
  end(attributes: { verdict: string; degraded: boolean; policyRevision: string }): void;
}

export interface DecisionTracing {
  startDecision(
    incomingTraceparent: string | undefined,
    incomingTracestate: string | undefined,
  ): DecisionSpan;
  /** For the upstream clients: a client span per call. */
  calls: CallTracer;
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
const setter = {
  set: (carrier: Record<string, string>, key: string, value: string) => {
    carrier[key] = value;
  },
};

/** The span processor `OTEL_TRACES_EXPORTER` names (the first of a list; `otlp` by default). */
function processorFor(env: Readonly<Record<string, string | undefined>>): SpanProcessor {
  const exporter = (env.OTEL_TRACES_EXPORTER ?? 'otlp').split(',')[0]!.trim();
  if (exporter === 'console') return new SimpleSpanProcessor({ exporter: new ConsoleSpanExporter() });
  // From the environment given (the exporter would read process.env itself): the same precedence.
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.replace(/\/+$/, '');
  const url = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || (base ? `${base}/v1/traces` : undefined);
  return new BatchSpanProcessor({ exporter: new OTLPTraceExporter(url === undefined ? {} : { url }) });
}

/**
 * Starts the tracer provider when the environment asks for tracing; undefined otherwise. Nothing
 * is registered globally: spans are parented explicitly. Only src/main.ts calls it with the
 * process environment; tests pass their own `spanProcessor`.
 */
export function createTracing(
  env: Readonly<Record<string, string | undefined>>,
  options: { spanProcessor?: SpanProcessor; version?: string } = {},
): DecisionTracing | undefined {
  if (!isTracingRequested(env)) return undefined;
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: env.OTEL_SERVICE_NAME || 'riskgate',
      ...(options.version !== undefined && { [ATTR_SERVICE_VERSION]: options.version }),
    }),
    spanProcessors: [options.spanProcessor ?? processorFor(env)],
  });
  const tracer = provider.getTracer('riskgate', options.version);
  return {
    startDecision: (traceparent, tracestate) => startDecision(tracer, traceparent, tracestate),
    calls: { startCall: (parent, links, start) => startCall(tracer, parent, links, start) },
    shutdown: () => provider.shutdown(),
  };
}

function contextOf(traceparent: string | undefined, tracestate?: string) {
  return traceparent === undefined
    ? ROOT_CONTEXT
    : propagator.extract(ROOT_CONTEXT, { traceparent, tracestate }, getter);
}

function traceparentOf(span: Span): string {
  const carrier: Record<string, string> = {};
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, setter);
  return carrier.traceparent!;
}

function startDecision(
  tracer: Tracer,
  traceparent: string | undefined,
  tracestate: string | undefined,
): DecisionSpan {
  const span = tracer.startSpan(
    'POST /decide',
    { kind: SpanKind.SERVER },
    contextOf(traceparent, tracestate),
  );
  return {
    traceparent: traceparentOf(span),
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

/** Links beyond this many are dropped (a full batch serves up to 100 lookups). */
const MAX_LINKS = 32;

function startCall(
  tracer: Tracer,
  parent: string | undefined,
  links: readonly string[] | undefined,
  start: CallSpanStart,
): CallSpan {
  const url = new URL(start.origin);
  const linked: Link[] = [];
  for (const tp of links ?? []) {
    if (linked.length === MAX_LINKS) break;
    const context = trace.getSpanContext(contextOf(tp));
    if (context !== undefined) linked.push({ context });
  }
  const span = tracer.startSpan(
    start.name,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        [ATTR_HTTP_REQUEST_METHOD]: start.method,
        [ATTR_SERVER_ADDRESS]: url.hostname,
        [ATTR_SERVER_PORT]: Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
        [ATTR_URL_FULL]: start.origin + start.path,
      },
      links: linked,
    },
    contextOf(parent),
  );
  return {
    traceparent: traceparentOf(span),
    end(status, errorType, attempts) {
      if (status !== undefined) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      if (attempts > 1) span.setAttribute(ATTR_HTTP_REQUEST_RESEND_COUNT, attempts - 1);
      if (errorType !== undefined) {
        span.setAttribute(ATTR_ERROR_TYPE, errorType);
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorType });
      }
      span.end();
    },
  };
}
