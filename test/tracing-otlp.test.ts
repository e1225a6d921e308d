import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { createTracing, type DecisionTracing } from '../src/observability/tracing.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * Tracing end to end, as an operator turns it on: OTEL_* variables, spans exported over OTLP/HTTP
 * to a collector (here a local receiver on port 0), and every call the vendor receives carrying a
 * `traceparent`. A decision's calls belong to the decision's trace, each with its own client span.
 */

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: Record<string, unknown> }[];
}
interface OtlpExport {
  resourceSpans: {
    resource: { attributes: { key: string; value: { stringValue?: string } }[] };
    scopeSpans: { spans: OtlpSpan[] }[];
  }[];
}

type SeenRequests = { requests: { route: string; traceparent: string | null }[] };

const CALLER_TRACE = '0af7651916cd43dd8448eb211c80319c';
const SPAN_KIND_SERVER = 2;
const SPAN_KIND_CLIENT = 3;

let receiver: Server;
const exports: OtlpExport[] = [];
let h: Harness;
let tracing: DecisionTracing;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') exports.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = (receiver.address() as AddressInfo).port;
  tracing = createTracing(
    { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_SERVICE_NAME: 'riskgate-otlp-test' },
    { version: '9.9.9' },
  )!;
  // Patient timeouts and deadline: the spans, not the timing, are tested (and mallory's deny).
  h = await startHarness({
    policy: { yaml: patientShippedPolicy() },
    deadlineMs: PATIENT_DEADLINE_MS,
    riskgate: { tracing },
  });
});

afterAll(async () => {
  await h?.stop();
  await new Promise((r) => receiver.close(r));
});

describe('tracing over OTLP', () => {
  it('exports the decision and a client span per upstream call; every vendor request carries its span as traceparent', async () => {
    const { mallory } = await lookUpUserIds(h.sandbox, ['mallory']);
    await h.control('POST', '/sandbox/stats/reset');
    const res = await h.decide(demoRequest('mallory', mallory), {
      headers: { traceparent: `00-${CALLER_TRACE}-b7ad6b7169203331-01` },
    });
    expect(res.body.verdict).toBe('deny');
    // The lock-out runs after the answer, in the decision's trace too.
    // (The outbox delivers it within milliseconds, not before this line runs: wait for it.)
    await eventually(async () => ((await h.calls('PUT /srv/admin/v1/users/:id')) === 1 ? true : undefined));

    const { requests } = (await h.control('GET', '/sandbox/stats/requests')) as SeenRequests;
    const decisionRoutes = requests.filter((r) => !r.route.startsWith('GET /logs/'));
    expect(decisionRoutes.map((r) => r.route)).toEqual(
      expect.arrayContaining([
        'POST /api/v1/signals/remote-access-tool',
        'GET /api/v1/signals/new-browser',
        'GET /srv/admin/v1/users/:id',
        'PUT /srv/admin/v1/users/:id',
      ]),
    );
    for (const r of decisionRoutes)
      expect(r.traceparent, r.route).toMatch(new RegExp(`^00-${CALLER_TRACE}-`));

    // A token request is a background call: a trace of its own, with a traceparent all the same.
    h.riskgate.tokens.invalidate(h.riskgate.tokens.peekToken()!);
    await h.decide(demoRequest('alice', undefined));
    const after = (await h.control('GET', '/sandbox/stats/requests')) as SeenRequests;
    const token = after.requests.find((r) => r.route === 'POST /oauth/v2/token');
    expect(token?.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(token?.traceparent).not.toContain(CALLER_TRACE);
    for (const r of after.requests) expect(r.traceparent, r.route).not.toBeNull();

    await tracing.shutdown(); // flushes the batch to the receiver
    const resources = exports.flatMap((e) => e.resourceSpans);
    expect(resources.length).toBeGreaterThan(0);
    for (const rs of resources) {
      const attrs = Object.fromEntries(rs.resource.attributes.map((a) => [a.key, a.value.stringValue]));
      expect(attrs['service.name']).toBe('riskgate-otlp-test');
      expect(attrs['service.version']).toBe('9.9.9');
    }
    const spans = resources.flatMap((rs) => rs.scopeSpans.flatMap((s) => s.spans));
    const server = spans.find((s) => s.kind === SPAN_KIND_SERVER && s.traceId === CALLER_TRACE);
    expect(server?.name).toBe('POST /decide');
    expect(server?.parentSpanId).toBe('b7ad6b7169203331');
    // Each request the vendor saw names, as its parent, a client span riskgate exported.
    const bySpanId = new Map(spans.map((s) => [s.spanId, s]));
    for (const r of decisionRoutes) {
      const client = bySpanId.get(r.traceparent!.split('-')[2]!);
      expect(client, r.route).toBeDefined();
      expect(client!.kind).toBe(SPAN_KIND_CLIENT);
      expect(client!.parentSpanId).toBe(server!.spanId);
      const attrs = Object.fromEntries(client!.attributes.map((a) => [a.key, Object.values(a.value)[0]]));
      expect(attrs['http.request.method']).toBe(r.route.split(' ')[0]);
      expect(attrs['server.address']).toBe('127.0.0.1');
      expect(String(attrs['url.full'])).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//);
      expect(Number(attrs['http.response.status_code'])).toBeGreaterThanOrEqual(200);
    }

    // The decision's server span speaks HTTP semantic conventions.
    const serverAttrs = Object.fromEntries(server!.attributes.map((a) => [a.key, Object.values(a.value)[0]]));
    expect(serverAttrs).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/decide',
      'url.path': '/decide',
      'url.scheme': 'http',
      'server.address': '127.0.0.1',
      'server.port': Number(new URL(h.url).port),
      'http.response.status_code': 200,
      'user_agent.original': expect.any(String),
    });
    // No span names the user: the Admin reads and the lock-out carry `{userId}` in their URL.
    const urls = spans.flatMap((s) =>
      s.attributes.filter((a) => a.key === 'url.full').map((a) => String(a.value.stringValue)),
    );
    expect(urls.some((u) => u.endsWith('/srv/admin/v1/users/{userId}'))).toBe(true);
    for (const s of spans) expect(JSON.stringify(s.attributes), s.name).not.toContain(mallory);
  });
});
