import { randomUUID } from 'node:crypto';
import { type Context, Hono } from 'hono';
import { z } from 'zod';
import { UUID_PATTERN } from '../../signals/identifiers.ts';
import { readReceivedRequest, verifyHmacRequest } from '../admin/hmac-verifier.ts';
import { parseControlBody } from '../control/control-input.ts';
import type { EventSink, LogEvent, SandboxModule, SandboxModuleContext } from '../sandbox-module.ts';
import {
  handleVendorError,
  invalidParameter,
  tooManyRequests,
  VendorApiError,
} from '../vendor-api-errors.ts';
import { seedDashboardHistory } from './dashboard-history.ts';
import { LogEventStore, type LogScope } from './event-store.ts';
import { parseLogTimestamp, resolveLogRange } from './log-range.ts';

/** A fixed-window rate limit for the Log API (docs/vendor-api.md#rate-limits). */
export interface LogRateLimit {
  /** Requests allowed per window (both endpoints together). */
  maxRequests: number;
  /** Window length, ms. */
  windowMs: number;
}

export interface LogsModuleOptions {
  /** Answer 429 with `Retry-After` beyond this rate. Default: off. Settable at runtime too. */
  rateLimit?: LogRateLimit;
}

/** The logs module: the Log API, its event store (the sink every sandbox module emits into). */
export type LogsModule = SandboxModule & { events: EventSink; store: LogEventStore };

const KNOWN_PATHS = [/^\/logs\/v1\/service\/[^/]+$/, /^\/logs\/v1\/organization\/[^/]+$/];

const injectSchema = z.object({
  scope: z.enum(['service', 'organization']),
  type: z.string().min(1),
  created_at: z.string().optional(),
  event_id: z.string().min(1).optional(),
  client_ip_address: z.string().optional(),
  client_port: z.string().optional(),
  fields: z.record(z.string(), z.unknown()).default({}),
});

const rateLimitSchema = z.union([
  z.object({ max_requests: z.number().int().positive(), window_ms: z.number().int().positive() }),
  z.object({ max_requests: z.null() }),
]);

/**
 * The sandbox's Log API (docs/vendor-api.md#log-api) and the event store it streams from.
 *
 * Routes: `GET /logs/v1/service/:service_id`, `GET /logs/v1/organization/:organization_id`; control
 * routes `GET|POST /sandbox/logs/events` (inspect / inject history) and `PUT /sandbox/logs/rate-limit`,
 * whose errors are problem+json like every control route.
 */
export function createLogsModule(ctx: SandboxModuleContext, options: LogsModuleOptions = {}): LogsModule {
  const store = new LogEventStore(ctx);
  let rateLimit: LogRateLimit | undefined = options.rateLimit;
  let windowStart = 0;
  let windowCount = 0;

  const app = new Hono();
  app.onError(handleVendorError);

  const checkRateLimit = () => {
    if (!rateLimit) return;
    const now = ctx.clock.now();
    if (now - windowStart >= rateLimit.windowMs) {
      windowStart = now;
      windowCount = 0;
    }
    windowCount++;
    if (windowCount > rateLimit.maxRequests) {
      throw tooManyRequests(Math.max(1, Math.ceil((windowStart + rateLimit.windowMs - now) / 1000)));
    }
  };

  const streamEvents = (scope: LogScope) => async (c: Context) => {
    const { credentials } = ctx.config;
    const pathId = c.req.param('id') ?? '';
    const expectedId = scope === 'service' ? credentials.serviceId : credentials.organizationId;
    const key = scope === 'service' ? credentials.serviceLogApiKey : credentials.organizationLogApiKey;
    const idName = scope === 'service' ? 'service_id' : 'organization_id';
    // Malformed unless it looks like the vendor's IDs (UUIDs) or is the configured one.
    if (!UUID_PATTERN.test(pathId) && pathId !== expectedId) {
      throw new VendorApiError(40000, 'Invalid request parameters', `invalid ${idName}: ${pathId}`);
    }
    const received = await readReceivedRequest(c);
    const { id } = verifyHmacRequest(received, {
      dateHeaderName: 'Date',
      dateHeaderValue: c.req.header('date'),
      authorization: c.req.header('authorization'),
      keyFor: (candidate) => (candidate === expectedId ? key : undefined),
      nowMs: ctx.clock.now(),
      skewSeconds: ctx.config.hmacSkewSeconds,
    });
    if (id !== pathId) {
      throw new VendorApiError(
        40100,
        'Authorization data missing or invalid',
        `${idName} in the path does not match the credentials`,
      );
    }
    checkRateLimit();
    const params: { start?: string; end?: string } = {};
    const seen = new Set<string>();
    for (const [k, v] of received.query) {
      if (seen.has(k)) throw invalidParameter(k, 'must be given once');
      seen.add(k);
      if (k === 'start' || k === 'end') params[k] = v;
    }
    const range = resolveLogRange(params, ctx.clock.now());
    const events = shuffle(store.query(scope, range));
    return new Response(ndjsonStream(events), {
      status: 200,
      headers: { 'content-type': 'application/x-ndjson' },
    });
  };

  app.get('/logs/v1/service/:id', streamEvents('service'));
  app.get('/logs/v1/organization/:id', streamEvents('organization'));
  app.all('/logs/v1/*', (c) => {
    const path = new URL(c.req.url).pathname;
    if (KNOWN_PATHS.some((re) => re.test(path))) {
      throw new VendorApiError(40500, 'Method not allowed', `${c.req.method} is not valid for ${path}`);
    }
    throw new VendorApiError(40400, 'Resource not found', path);
  });

  app.get('/sandbox/logs/events', (c) => {
    const scope = c.req.query('scope');
    if (scope !== undefined && scope !== 'service' && scope !== 'organization') {
      throw invalidParameter('scope', 'must be service or organization');
    }
    const events = store.all(scope);
    return c.json({ events, count: events.length });
  });

  app.post('/sandbox/logs/events', async (c) => {
    const b = await parseControlBody(c, injectSchema);
    if (b.created_at === undefined) {
      const client = { ip: b.client_ip_address ?? '127.0.0.1', port: b.client_port ?? '0' };
      const event =
        b.scope === 'service'
          ? store.emitServiceEvent(b.type, b.fields, client)
          : store.emitOrganizationEvent(b.type, b.fields, client);
      if (b.event_id !== undefined) event.event_id = b.event_id;
      return c.json(event);
    }
    const atNs = parseLogTimestamp(b.created_at);
    if (atNs === undefined) throw invalidParameter('created_at', 'not an accepted timestamp');
    const { credentials } = ctx.config;
    const event: LogEvent = {
      ...b.fields,
      created_at: b.created_at,
      type: b.type,
      event_id: b.event_id ?? randomUUID(),
      client_ip_address: b.client_ip_address ?? '127.0.0.1',
      client_port: b.client_port ?? '0',
      ...(b.scope === 'service'
        ? { service_id: credentials.serviceId }
        : { organization_id: credentials.organizationId }),
    };
    return c.json(store.insert(b.scope, atNs, event));
  });

  app.put('/sandbox/logs/rate-limit', async (c) => {
    const body = await parseControlBody(c, rateLimitSchema);
    rateLimit =
      body.max_requests === null ? undefined : { maxRequests: body.max_requests, windowMs: body.window_ms };
    windowStart = 0;
    windowCount = 0;
    return c.json({
      rate_limit: rateLimit ? { max_requests: rateLimit.maxRequests, window_ms: rateLimit.windowMs } : null,
    });
  });

  return {
    app,
    events: store,
    store,
    seed(scenario) {
      seedDashboardHistory(store, {
        startedAtMs: ctx.startedAtMs(),
        serviceId: ctx.config.credentials.serviceId,
        seedText: scenario.name,
      });
    },
    reset() {
      store.clear();
      rateLimit = options.rateLimit;
      windowStart = 0;
      windowCount = 0;
    },
  };
}

/** Fisher–Yates: the Log API promises no order, so the sandbox really gives none. */
function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** One chunk per line, pulled on demand, so a fault can cut the stream between lines. */
function ndjsonStream(events: LogEvent[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      const event = events[i++];
      if (event === undefined) {
        controller.close();
        return;
      }
      controller.enqueue(encoder.encode(`${JSON.stringify(event)}\n`));
    },
  });
}
