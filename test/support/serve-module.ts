import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { request } from 'undici';
import type { z } from 'zod';
import { type AdminModuleOptions, createAdminModule } from '../../src/sandbox/admin/admin-module.ts';
import type { AdjustableClock } from '../../src/sandbox/clock/sandbox-clock.ts';
import { createSandboxApp, type SandboxApp } from '../../src/sandbox/create-sandbox-app.ts';
import {
  createLogsModule,
  type LogsModule,
  type LogsModuleOptions,
} from '../../src/sandbox/logs/logs-module.ts';
import {
  DEFAULT_CREDENTIALS,
  DEFAULT_THRESHOLDS,
  type SandboxConfig,
} from '../../src/sandbox/sandbox-config.ts';
import type { SandboxModule, SandboxModuleContext } from '../../src/sandbox/sandbox-module.ts';
import { scenarioSchema } from '../../src/sandbox/scenario/scenario-schema.ts';
import { apiOfPath, vendorErrorResponse } from '../../src/sandbox/vendor-api-errors.ts';
import { encodeRfc3986, formatRfc2822, signRequest } from '../../src/vendor-auth/hmac-signature.ts';

/** A scenario as written (defaults not yet applied). */
export type ScenarioInput = z.input<typeof scenarioSchema>;

/** A clock tests move by hand (also usable as the assembled sandbox's AdjustableClock). */
export interface ManualClock extends AdjustableClock {
  set(ms: number): void;
}

export function manualClock(startMs: number): ManualClock {
  let now = startMs;
  return {
    now: () => now,
    set: (ms) => {
      now = ms;
    },
    advance: (ms) => {
      now += ms;
    },
    offsetMs: () => 0,
    // A reset of the sandbox must not move a test's clock.
    resetOffset: () => {},
  };
}

/** What both helpers below answer: a listening server, its clock and config. */
export interface Served {
  baseUrl: string;
  /** `127.0.0.1:<port>`, as a client puts it in the Host header. */
  host: string;
  clock: ManualClock;
  config: SandboxConfig;
  close(): Promise<void>;
}

/**
 * The whole sandbox as S1 assembles it (createSandboxApp: stats, faults, every module), on a real
 * HTTP server on port 0, with a manual clock at `nowMs`.
 */
export async function serveSandbox(
  opts: {
    nowMs?: number;
    scenario?: ScenarioInput;
    credentials?: Partial<SandboxConfig['credentials']>;
  } = {},
): Promise<Served & { sandbox: SandboxApp }> {
  const clock = manualClock(opts.nowMs ?? Date.UTC(2026, 0, 15, 12, 0, 0));
  const config: SandboxConfig = {
    credentials: { ...DEFAULT_CREDENTIALS, ...opts.credentials },
    thresholds: { ...DEFAULT_THRESHOLDS },
    tokenLifetimeSeconds: 43200,
    hmacSkewSeconds: 300,
  };
  const sandbox = await createSandboxApp({
    config,
    scenario: scenarioSchema.parse(opts.scenario ?? { name: 'test' }),
    clock,
    logError: () => {},
  });
  const server = serve({ fetch: sandbox.app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}`;
  sandbox.setPublicUrl(baseUrl);
  return {
    baseUrl,
    host: `127.0.0.1:${port}`,
    clock,
    config,
    sandbox,
    close: () =>
      new Promise<void>((resolve) => {
        sandbox.shutdown();
        server.close(() => resolve());
        if ('closeAllConnections' in server) server.closeAllConnections();
      }),
  };
}

export interface ServedModules extends Served {
  logs: LogsModule;
  admin: SandboxModule;
}

/**
 * Only the logs and admin modules, built with their own options (which the assembled sandbox does not
 * expose). Mounts them the way the sandbox does (`app.route('/', module.app)`) on a real
 * HTTP server on port 0, with a manual clock. Seeds `scenario` (after a reset) when given.
 */
export async function serveModules(
  opts: {
    nowMs?: number;
    scenario?: ScenarioInput;
    logs?: LogsModuleOptions;
    admin?: AdminModuleOptions;
    credentials?: Partial<SandboxConfig['credentials']>;
  } = {},
): Promise<ServedModules> {
  const clock = manualClock(opts.nowMs ?? Date.UTC(2026, 0, 15, 12, 0, 0));
  const startedAt = clock.now();
  const config: SandboxConfig = {
    credentials: { ...DEFAULT_CREDENTIALS, ...opts.credentials },
    thresholds: { ...DEFAULT_THRESHOLDS },
    tokenLifetimeSeconds: 43200,
    hmacSkewSeconds: 300,
  };
  const ctx: SandboxModuleContext = { config, clock, startedAtMs: () => startedAt };
  const logs = createLogsModule(ctx, opts.logs);
  const admin = createAdminModule(ctx, logs.events, opts.admin);
  if (opts.scenario) {
    const scenario = scenarioSchema.parse(opts.scenario);
    logs.seed(scenario);
    admin.seed(scenario);
  }
  const app = new Hono();
  app.route('/', logs.app);
  app.route('/', admin.app);
  // As the assembled sandbox does: an unexpected error is a bare 500 in the API's own shape.
  app.onError((_err, c) => vendorErrorResponse(apiOfPath(c.req.path), 500, 'Internal error'));
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    clock,
    config,
    logs,
    admin,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Builds a wire query string the way docs/vendor-api.md#signing wants it (RFC 3986, space as %20). */
export function wireQuery(pairs: readonly (readonly [string, string])[]): string {
  return pairs.map(([k, v]) => `${encodeRfc3986(k)}=${encodeRfc3986(v)}`).join('&');
}

export interface SignedCall {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: readonly (readonly [string, string])[];
  /** Raw query string sent as is (instead of `query`); still signed from its decoded pairs. */
  rawQuery?: string;
  body?: string;
  id: string;
  key: string;
  /** `SVC-Date` (Admin) or `Date` (Log). */
  dateHeader: 'SVC-Date' | 'Date';
  dateMs: number;
  headers?: Record<string, string>;
}

export interface CallResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: test convenience for reading JSON answers
  json: any;
}

/** Sends a request signed per docs/vendor-api.md#signing over real HTTP (undici). */
export async function signedCall(
  served: { baseUrl: string; host: string },
  call: SignedCall,
): Promise<CallResult> {
  const date = formatRfc2822(new Date(call.dateMs));
  const qs = call.rawQuery ?? (call.query ? wireQuery(call.query) : '');
  const decodedPairs: [string, string][] = qs
    ? qs.split('&').map((s) => {
        const i = s.indexOf('=');
        return [decodeURIComponent(s.slice(0, i)), decodeURIComponent(s.slice(i + 1))];
      })
    : [];
  const authorization = signRequest(
    {
      date,
      method: call.method,
      host: served.host,
      protocol: 'http:',
      path: call.path,
      query: decodedPairs,
      body: call.body,
    },
    call.id,
    call.key,
  );
  const headers: Record<string, string> = {
    [call.dateHeader.toLowerCase()]: date,
    authorization,
    ...(call.body !== undefined ? { 'content-type': 'application/json' } : {}),
    ...call.headers,
  };
  return plainCall(served, call.method, `${call.path}${qs ? `?${qs}` : ''}`, { headers, body: call.body });
}

/** An HTTP call with no signing. */
export async function plainCall(
  served: { baseUrl: string },
  method: string,
  pathAndQuery: string,
  init: { headers?: Record<string, string>; body?: string } = {},
): Promise<CallResult> {
  const res = await request(`${served.baseUrl}${pathAndQuery}`, {
    method: method as 'GET',
    headers: init.headers,
    body: init.body,
    headersTimeout: 5000,
    bodyTimeout: 5000,
  });
  const text = await res.body.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, headers: res.headers, text, json };
}

/** A signed Admin API call with the sandbox's credentials at the sandbox clock's now. */
export function adminCall(
  served: Served,
  method: SignedCall['method'],
  path: string,
  init: { query?: readonly (readonly [string, string])[]; body?: unknown } = {},
): Promise<CallResult> {
  return signedCall(served, {
    method,
    path: `/srv/admin/v1${path}`,
    ...(init.query ? { query: init.query } : {}),
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    id: served.config.credentials.serviceId,
    key: served.config.credentials.adminApiKey,
    dateHeader: 'SVC-Date',
    dateMs: served.clock.now(),
  });
}

/** A control-API call (unsigned JSON). */
export function controlCall(
  served: Served,
  method: string,
  path: string,
  body?: unknown,
): Promise<CallResult> {
  return plainCall(served, method, path, {
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** Test user and device IDs: `userId(3)` is `00000000-0000-4000-8000-000000000003`. */
export const userId = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
export const deviceId = (n: number) => `dddddddd-0000-4000-8000-${String(n).padStart(12, '0')}`;

/** The stored service-scope Log API events of `type` (through the control route). */
export async function serviceEvents(served: Served, type: string) {
  const r = await controlCall(served, 'GET', '/sandbox/logs/events?scope=service');
  // biome-ignore lint/suspicious/noExplicitAny: event shapes vary by type
  return (r.json.events as any[]).filter((e) => e.type === type);
}
