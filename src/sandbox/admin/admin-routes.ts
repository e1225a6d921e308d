import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context, Hono } from 'hono';
import type { SandboxModuleContext } from '../sandbox-module.ts';
import { notFound, VendorApiError } from '../vendor-api-errors.ts';
import { activeUsers, serviceActivity, userActivity } from './activity.ts';
import {
  decodeJsonObject,
  parseBody,
  postBackupCodesSchema,
  postDeviceSchema,
  postLogoSchema,
  postOneTimeCodeSchema,
  postUserDeviceSchema,
  postUserSchema,
  putDeviceSchema,
  putInfoSchema,
  putUserSchema,
  QueryParams,
} from './admin-input.ts';
import type { AdminState, EventClient } from './admin-state.ts';
import { deleteDevice, getDevice, listDevices, listUserDevices, updateDevice } from './devices.ts';
import {
  addUserDevice,
  deleteEnrollment,
  getEnrollment,
  listEnrollments,
  listUserEnrollments,
} from './enrollments.ts';
import { type ReceivedRequest, readReceivedRequest, verifyHmacRequest } from './hmac-verifier.ts';
import { createBackupCodes, createOneTimeCode, getBackupCodes } from './passcodes.ts';
import { deleteLogo, getInfo, getLogo, setLogo, updateInfo } from './service-info.ts';
import { archiveUser, createUser, getUser, lookupUsers, updateUser } from './users.ts';

/** Path prefix of the Admin API. */
export const ADMIN_PREFIX = '/srv/admin/v1';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** What a handler gets: the request as received (signed parts), its query and body decoded. */
export interface AdminRequest {
  c: Context;
  received: ReceivedRequest;
  query: QueryParams;
  /** The JSON object body of POST/PUT (`{}` when empty). */
  body: Record<string, unknown>;
  param(name: string): string;
  client: EventClient;
  /** `http://host` as the client addressed us, for absolute URLs in answers. */
  origin: string;
}

/** The HTTP client of a request, for event attribution; undefined outside a Node server. */
export function eventClient(c: Context): EventClient {
  try {
    const info = getConnInfo(c);
    return { ip: info.remote.address ?? '127.0.0.1', port: String(info.remote.port ?? 0) };
  } catch {
    return undefined;
  }
}

const received = new WeakMap<Request, ReceivedRequest>();

/**
 * Registers the Admin API on `app`: HMAC middleware (all but ping and api_version), every endpoint
 * the sandbox emulates (docs/vendor-api.md#admin-endpoints), and 404 / 405 envelopes for the rest of
 * the prefix.
 */
export function registerAdminRoutes(
  app: Hono,
  state: AdminState,
  ctx: SandboxModuleContext,
  opts: { apiVersion: string },
): void {
  const patterns: { method: Method; re: RegExp }[] = [];
  const unauthenticated = new Set([`${ADMIN_PREFIX}/server/ping`, `${ADMIN_PREFIX}/server/api_version`]);

  app.use(`${ADMIN_PREFIX}/*`, async (c, next) => {
    const req = await readReceivedRequest(c);
    received.set(c.req.raw, req);
    if (c.req.method === 'GET' && unauthenticated.has(req.rawPath)) return next();
    verifyHmacRequest(req, {
      dateHeaderName: 'SVC-Date',
      dateHeaderValue: c.req.header('svc-date'),
      authorization: c.req.header('authorization'),
      keyFor: (id) =>
        id === ctx.config.credentials.serviceId ? ctx.config.credentials.adminApiKey : undefined,
      nowMs: ctx.clock.now(),
      skewSeconds: ctx.config.hmacSkewSeconds,
    });
    return next();
  });

  const route = (
    method: Method,
    path: string,
    handler: (r: AdminRequest) => Response | Promise<Response>,
  ) => {
    const full = `${ADMIN_PREFIX}${path}`;
    patterns.push({ method, re: new RegExp(`^${full.replace(/:[a-z_]+/g, '[^/]+')}$`) });
    const h = async (c: Context) => {
      const req = received.get(c.req.raw) ?? (await readReceivedRequest(c));
      const body =
        method === 'POST' || method === 'PUT' ? decodeJsonObject(req.body, c.req.header('content-type')) : {};
      const host = c.req.header('host') ?? 'localhost';
      return handler({
        c,
        received: req,
        query: new QueryParams(req.query),
        body,
        param: (name) => c.req.param(name) ?? '',
        client: eventClient(c),
        origin: `${req.protocol}//${host}`,
      });
    };
    if (method === 'GET') app.get(full, h);
    else if (method === 'POST') app.post(full, h);
    else if (method === 'PUT') app.put(full, h);
    else app.delete(full, h);
  };

  const json = (r: AdminRequest, value: unknown) => r.c.json(value as Record<string, unknown>, 200);
  const notModified = () => new Response(null, { status: 304 });
  const maybe = (r: AdminRequest, value: Record<string, unknown> | undefined) =>
    value === undefined ? notModified() : json(r, value);

  // ---- server
  route('GET', '/server/ping', (r) => json(r, { time: String(ctx.clock.now()) }));
  route('GET', '/server/api_version', (r) => json(r, { api_version: opts.apiVersion }));
  route('GET', '/server/test', (r) => json(r, { time: String(ctx.clock.now()) }));
  route('POST', '/server/test', (r) => json(r, { time: String(ctx.clock.now()) }));

  // ---- service
  route('GET', '/info', (r) => json(r, getInfo(state)));
  route('PUT', '/info', (r) => maybe(r, updateInfo(state, parseBody(putInfoSchema, r.body))));
  route('GET', '/logo', (r) => {
    const logo = getLogo(state);
    if (!logo) throw notFound('no logo stored');
    return json(r, { logo_url: `${r.origin}/sandbox/logo/${logo.id}.png` });
  });
  route('POST', '/logo', (r) => {
    const id = setLogo(state, parseBody(postLogoSchema, r.body).logo);
    return json(r, { logo_url: `${r.origin}/sandbox/logo/${id}.png` });
  });
  route('DELETE', '/logo', (r) => {
    if (!deleteLogo(state)) throw notFound('no logo stored');
    return json(r, { result: 'ok' });
  });

  // ---- activity
  route('GET', '/activity', (r) => json(r, serviceActivity(state, r.query)));
  route('GET', '/active_users', (r) => json(r, activeUsers(state, r.query)));

  // ---- users
  route('GET', '/users', (r) => json(r, lookupUsers(state, r.query)));
  route('POST', '/users', (r) =>
    json(r, createUser(state, parseBody(postUserSchema, r.body), r.origin, r.client)),
  );
  route('GET', '/users/:id', (r) => json(r, getUser(state, r.param('id'))));
  route('PUT', '/users/:id', (r) =>
    maybe(r, updateUser(state, r.param('id'), parseBody(putUserSchema, r.body), r.client)),
  );
  route('DELETE', '/users/:id', (r) => {
    archiveUser(state, r.param('id'), r.client);
    return json(r, { result: 'ok' });
  });
  route('GET', '/users/:id/activity', (r) => json(r, userActivity(state, r.param('id'), r.query)));
  route('GET', '/users/:id/devices', (r) => json(r, listUserDevices(state, r.param('id'), r.query)));
  route('POST', '/users/:id/devices', (r) =>
    json(r, addUserDevice(state, r.param('id'), parseBody(postUserDeviceSchema, r.body), r.origin, r.client)),
  );
  route('GET', '/users/:id/enrollments', (r) => json(r, listUserEnrollments(state, r.param('id'))));
  route('GET', '/users/:id/backup_codes', (r) => json(r, getBackupCodes(state, r.param('id'))));
  route('POST', '/users/:id/backup_codes', (r) =>
    json(r, createBackupCodes(state, r.param('id'), parseBody(postBackupCodesSchema, r.body))),
  );
  route('POST', '/users/:id/one_time_code', (r) =>
    json(r, createOneTimeCode(state, r.param('id'), parseBody(postOneTimeCodeSchema, r.body))),
  );

  // ---- devices
  route('GET', '/devices', (r) => json(r, listDevices(state, r.query)));
  route('POST', '/devices', (r) => {
    const { user_id, ...body } = parseBody(postDeviceSchema, r.body);
    return json(r, addUserDevice(state, user_id, body, r.origin, r.client));
  });
  route('GET', '/devices/:id', (r) => json(r, getDevice(state, r.param('id'))));
  route('PUT', '/devices/:id', (r) =>
    maybe(r, updateDevice(state, r.param('id'), parseBody(putDeviceSchema, r.body), r.client)),
  );
  route('DELETE', '/devices/:id', (r) => json(r, deleteDevice(state, r.param('id'), r.client)));

  // ---- enrollments by identifier (shapes the vendor does not show: the Enrollment record)
  route('GET', '/enrollments', (r) => json(r, listEnrollments(state, r.query)));
  for (const path of ['/enrollments/enrollment_id/:id', '/enrollments/:id']) {
    route('GET', path, (r) => json(r, getEnrollment(state, r.param('id'))));
    route('DELETE', path, (r) => {
      deleteEnrollment(state, r.param('id'), r.client);
      return json(r, { result: 'ok' });
    });
    route('PUT', path, () => {
      throw new VendorApiError(50100, 'Not implemented', 'enrollment updates are not emulated');
    });
  }

  // ---- hardware tokens: not emulated (docs/vendor-api.md#admin-endpoints)
  app.all(`${ADMIN_PREFIX}/hwtokens`, () => {
    throw new VendorApiError(50100, 'Not implemented', 'hardware token endpoints are not emulated');
  });
  app.all(`${ADMIN_PREFIX}/hwtokens/*`, () => {
    throw new VendorApiError(50100, 'Not implemented', 'hardware token endpoints are not emulated');
  });

  // ---- everything else under the prefix: 405 on a known path, else 404 (both in the envelope)
  app.all(`${ADMIN_PREFIX}/*`, (c) => {
    const path = received.get(c.req.raw)?.rawPath ?? new URL(c.req.url).pathname;
    if (patterns.some((p) => p.re.test(path))) {
      throw new VendorApiError(40500, 'Method not allowed', `${c.req.method} is not valid for ${path}`);
    }
    throw new VendorApiError(40400, 'Not found', `no such endpoint: ${path}`);
  });
}
