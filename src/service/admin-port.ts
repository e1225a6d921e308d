import { z } from 'zod';
import { adminDeviceSchema, adminUserSchema } from '../admin/admin-schemas.ts';
import type { UpstreamConfig } from '../config/riskgate-config.ts';
import type { AdminPort, AdminUserChanges } from '../decide/decide-ports.ts';
import type { UpstreamError } from '../errors/riskgate-error.ts';
import {
  type CallInfo,
  callUpstream,
  parseJsonBody,
  retryDefaults,
  type UpstreamContext,
} from '../upstream/upstream-call.ts';
import { createUpstreamPool, splitBaseUrl } from '../upstream/upstream-pool.ts';
import type { HttpMethod, RawResponse } from '../upstream/upstream-request.ts';
import { formatRfc2822, signRequest } from '../vendor-auth/hmac-signature.ts';

/**
 * INTERIM: the Admin API calls /decide and its actions need, over the shared upstream transport,
 * until the Admin client (src/admin/) lands; then this file shrinks to an adapter over it.
 */

export interface AdminClientPort extends AdminPort {
  close(): Promise<void>;
}

const PREFIX = '/srv/admin/v1';
const devicesSchema = z.object({ devices: z.array(adminDeviceSchema) });
const otcSchema = z.object({ one_time_code: z.string(), expiration: z.number() });

export function createAdminPort(upstream: UpstreamConfig, onCall: (info: CallInfo) => void): AdminClientPort {
  const { origin, pathPrefix, host, protocol } = splitBaseUrl(upstream.adminUrl);
  const pool = createUpstreamPool(origin, { connections: 16 });
  const ctx: UpstreamContext = {
    upstream: 'admin',
    dispatcher: pool,
    now: Date.now,
    defaultTimeoutMs: 1000,
    ...retryDefaults(),
    maxBodyBytes: 1024 * 1024,
    onCall,
  };

  function call<T>(
    name: string,
    method: HttpMethod,
    path: string,
    body: Record<string, unknown> | undefined,
    parse: (res: RawResponse) => T | UpstreamError,
    options: Parameters<AdminPort['getUser']>[1],
    accept?: (status: number) => boolean,
  ) {
    const fullPath = `${pathPrefix}${PREFIX}${path}`;
    const text = body === undefined ? undefined : JSON.stringify(body);
    return callUpstream(
      ctx,
      {
        name,
        retry: method !== 'POST',
        ...(accept && { accept }),
        parse,
        build: () => {
          const date = formatRfc2822(new Date());
          const authorization = signRequest(
            { date, method, host, protocol, path: fullPath, ...(text !== undefined && { body: text }) },
            upstream.serviceId,
            upstream.adminApiKey,
          );
          const headers: Record<string, string> = { 'svc-date': date, authorization };
          if (text !== undefined) headers['content-type'] = 'application/json';
          if (options.traceparent !== undefined) headers.traceparent = options.traceparent;
          return { method, path: fullPath, headers, body: text };
        },
      },
      options,
    );
  }
  const json =
    <S extends z.ZodType>(name: string, schema: S) =>
    (res: RawResponse) =>
      res.status === 304
        ? ({} as z.infer<S>)
        : (parseJsonBody('admin', name, res, schema) as z.infer<S> | UpstreamError);
  const ok200or304 = (s: number) => s === 200 || s === 304;
  const id = (v: string) => encodeURIComponent(v);

  return {
    getUser: (userId, o) =>
      call('get-user', 'GET', `/users/${id(userId)}`, undefined, json('get-user', adminUserSchema), o),
    getUserDevices: async (userId, o) => {
      const r = await call(
        'get-user-devices',
        'GET',
        `/users/${id(userId)}/devices`,
        undefined,
        json('get-user-devices', devicesSchema),
        o,
      );
      return r.ok ? { ok: true, value: r.value.devices, durationMs: r.durationMs } : r;
    },
    updateUser: (userId, changes: AdminUserChanges, o) =>
      call(
        'update-user',
        'PUT',
        `/users/${id(userId)}`,
        { ...changes },
        json('update-user', z.looseObject({})),
        o,
        ok200or304,
      ),
    archiveDevice: (deviceId, o) =>
      call(
        'archive-device',
        'DELETE',
        `/devices/${id(deviceId)}`,
        undefined,
        json('archive-device', z.looseObject({})),
        o,
      ),
    createOneTimeCode: async (userId, params, o) => {
      const body: Record<string, unknown> = {};
      if (params.length !== undefined) body.length = params.length;
      if (params.validSecs !== undefined) body.valid_secs = params.validSecs;
      const r = await call(
        'create-one-time-code',
        'POST',
        `/users/${id(userId)}/one_time_code`,
        body,
        json('create-one-time-code', otcSchema),
        o,
      );
      return r.ok
        ? {
            ok: true,
            value: { oneTimeCode: r.value.one_time_code, expiration: r.value.expiration },
            durationMs: r.durationMs,
          }
        : r;
    },
    close: () => pool.close(),
  };
}
