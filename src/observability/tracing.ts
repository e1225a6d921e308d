import {
  type Attributes,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { ExportResultCode, hrTimeToMicroseconds, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_RESEND_COUNT,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions';
import { DEFAULT_REDACTION, parseRedaction, type RedactionRule } from '../config/redaction-rules.ts';
import { hashForLog } from '../decision-log/log-redaction.ts';
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
 * `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`, batched) or `console` (each span as it ends, one JSON
 * line on stderr: stdout is the decision log's default stream and stays pure NDJSON).
 *
 * Personal data in spans follows the decision log's redaction (RISKGATE_DECISION_LOG_REDACT), with
 * identifiers kept out unless it allows them: an Admin API path's user and device ids become
 * `{userId}` and `{deviceId}` in `url.full`, or their `hmac:` hash when the redaction hashes
 * `request.userId` / `request.deviceId` (so spans correlate with log lines), and stay only with
 * redaction `none`; a query string (usernames, account ids) is never recorded. The caller's
 * `User-Agent` is `user_agent.original` unless a rule drops or hashes `request.userAgent`.
 */

export interface DecisionSpan {
  /** The `traceparent` its upstream calls are children of (the decision span's). */
  traceparent: string | undefined;
  /** Ends the span; `status` is the HTTP status answered (default 200). */
  end(attributes: { verdict: string; degraded: boolean; policyRevision: string; status?: number }): void;
}

/** The request a server span describes (HTTP semantic conventions). */
export interface ServerRequestInfo {
  method: string;
  /** The URL as the server saw it: scheme, the `Host` header, path (a query is not recorded). */
  url: string;
  /** The matched route template, e.g. `/decide`. */
  route: string;
  userAgent?: string | undefined;
}

/** The decision log's redaction settings, which span attributes follow (see the module comment). */
export interface SpanRedaction {
  rules: readonly RedactionRule[];
  /** RISKGATE_DECISION_LOG_HASH_KEY, for the `hash` mode. */
  hashKey?: string | undefined;
}

export interface DecisionTracing {
  startDecision(
    incomingTraceparent: string | undefined,
    incomingTracestate: string | undefined,
    request?: ServerRequestInfo,
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

/**
 * `OTEL_TRACES_EXPORTER=console`: each span as one JSON line on stderr, beside the service log
 * (`msg: "span"`), never on stdout, where the decision log goes by default.
 */
class StderrSpanExporter implements SpanExporter {
  export(spans: ReadableSpan[], done: (result: { code: ExportResultCode }) => void): void {
    for (const span of spans) {
      const context = span.spanContext();
      process.stderr.write(
        `${JSON.stringify({
          time: new Date().toISOString(),
          level: 'info',
          msg: 'span',
          name: span.name,
          kind: span.kind,
          traceId: context.traceId,
          spanId: context.spanId,
          parentSpanId: span.parentSpanContext?.spanId,
          startTimeUs: hrTimeToMicroseconds(span.startTime),
          durationUs: hrTimeToMicroseconds(span.duration),
          attributes: span.attributes,
          status: span.status,
          links: span.links.map((l) => ({ traceId: l.context.traceId, spanId: l.context.spanId })),
        })}\n`,
      );
    }
    done({ code: ExportResultCode.SUCCESS });
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** The span processor `OTEL_TRACES_EXPORTER` names (the first of a list; `otlp` by default). */
function processorFor(env: Readonly<Record<string, string | undefined>>): SpanProcessor {
  const exporter = (env.OTEL_TRACES_EXPORTER ?? 'otlp').split(',')[0]!.trim();
  if (exporter === 'console') return new SimpleSpanProcessor({ exporter: new StderrSpanExporter() });
  // From the environment given (the exporter would read process.env itself): the same precedence.
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.replace(/\/+$/, '');
  const url = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || (base ? `${base}/v1/traces` : undefined);
  return new BatchSpanProcessor({ exporter: new OTLPTraceExporter(url === undefined ? {} : { url }) });
}

type FieldPolicy = 'keep' | 'hash' | 'omit';

/** How spans treat the personal fields, from the decision log's redaction rules. */
interface SpanPrivacy {
  userId: FieldPolicy;
  deviceId: FieldPolicy;
  userAgent: FieldPolicy;
  hashKey: string | undefined;
}

function privacyOf(redaction: SpanRedaction | undefined): SpanPrivacy {
  const rules = redaction?.rules ?? (parseRedaction(DEFAULT_REDACTION) as RedactionRule[]);
  const policy = (path: string, otherwise: FieldPolicy): FieldPolicy => {
    if (rules.length === 0) return 'keep'; // RISKGATE_DECISION_LOG_REDACT=none
    const rule = rules.find((r) => r.path.join('.') === path);
    if (rule === undefined) return otherwise;
    return rule.mode === 'hash' ? 'hash' : 'omit';
  };
  return {
    userId: policy('request.userId', 'omit'),
    deviceId: policy('request.deviceId', 'omit'),
    userAgent: policy('request.userAgent', 'keep'),
    hashKey: redaction?.hashKey,
  };
}

/** An Admin API path segment that is a user's or a device's id. */
const ID_SEGMENT = /\/(users|devices)\/([^/]+)/g;

/** `path` with the identifiers `privacy` keeps out replaced by a placeholder or their hash. */
function redactIdentifiers(path: string, privacy: SpanPrivacy): string {
  return path.replace(ID_SEGMENT, (segment, kind: string, id: string) => {
    const policy = kind === 'users' ? privacy.userId : privacy.deviceId;
    if (policy === 'keep') return segment;
    if (policy === 'hash') return `/${kind}/${hashForLog(id, privacy.hashKey)}`;
    return `/${kind}/${kind === 'users' ? '{userId}' : '{deviceId}'}`;
  });
}

/**
 * Starts the tracer provider when the environment asks for tracing; undefined otherwise. Nothing
 * is registered globally: spans are parented explicitly. Only src/riskgate-process.ts calls it with the
 * process environment; tests pass their own `spanProcessor`. `redaction` is the decision log's
 * (default: its default, which keeps identifiers out of spans).
 */
export function createTracing(
  env: Readonly<Record<string, string | undefined>>,
  options: { spanProcessor?: SpanProcessor; version?: string; redaction?: SpanRedaction } = {},
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
  const privacy = privacyOf(options.redaction);
  return {
    startDecision: (traceparent, tracestate, request) =>
      startDecision(tracer, traceparent, tracestate, request, privacy),
    calls: { startCall: (parent, links, start) => startCall(tracer, parent, links, start, privacy) },
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
  request: ServerRequestInfo | undefined,
  privacy: SpanPrivacy,
): DecisionSpan {
  const span = tracer.startSpan(
    request === undefined ? 'POST /decide' : `${request.method} ${request.route}`,
    { kind: SpanKind.SERVER, attributes: request === undefined ? {} : serverAttributes(request, privacy) },
    contextOf(traceparent, tracestate),
  );
  return {
    traceparent: traceparentOf(span),
    end({ verdict, degraded, policyRevision, status = 200 }) {
      span.setAttributes({
        [ATTR_HTTP_RESPONSE_STATUS_CODE]: status,
        'riskgate.verdict': verdict,
        'riskgate.degraded': degraded,
        'riskgate.policy.revision': policyRevision,
      });
      // A 4xx is the caller's error, not the server's: the span's status stays unset (semconv).
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    },
  };
}

function serverAttributes(request: ServerRequestInfo, privacy: SpanPrivacy): Attributes {
  const url = new URL(request.url);
  const scheme = url.protocol.slice(0, -1);
  const attributes: Attributes = {
    [ATTR_HTTP_REQUEST_METHOD]: request.method,
    [ATTR_HTTP_ROUTE]: request.route,
    [ATTR_URL_PATH]: url.pathname,
    [ATTR_URL_SCHEME]: scheme,
    [ATTR_SERVER_ADDRESS]: url.hostname,
    [ATTR_SERVER_PORT]: Number(url.port) || (scheme === 'https' ? 443 : 80),
  };
  const ua = request.userAgent;
  if (ua !== undefined && ua !== '' && privacy.userAgent !== 'omit')
    attributes[ATTR_USER_AGENT_ORIGINAL] =
      privacy.userAgent === 'hash' ? hashForLog(ua, privacy.hashKey) : ua;
  return attributes;
}

/** Links beyond this many are dropped (a full batch serves up to 100 lookups). */
const MAX_LINKS = 32;

function startCall(
  tracer: Tracer,
  parent: string | undefined,
  links: readonly string[] | undefined,
  start: CallSpanStart,
  privacy: SpanPrivacy,
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
        [ATTR_URL_FULL]: start.origin + redactIdentifiers(start.path, privacy),
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
