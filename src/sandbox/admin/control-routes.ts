import type { Hono } from 'hono';
import { z } from 'zod';
import { parseControlBody } from '../control/control-input.ts';
import { notFound } from '../vendor-api-errors.ts';
import { factorSchema } from './admin-input.ts';
import { eventClient } from './admin-routes.ts';
import { type AdminState, PLACEHOLDER_PNG } from './admin-state.ts';
import { simulateAuthentication } from './authentications.ts';
import type { CallbackSender } from './callback-delivery.ts';
import { completeEnrollment, hasEnrollment, verifySmsDevice } from './enrollments.ts';
import { migrate } from './migrations.ts';
import { getLogo } from './service-info.ts';

/**
 * The sandbox's control API for the Admin side: things the real vendor does on its own (a user
 * authenticates, a phone finishes activation, an account is recovered onto a new device) made
 * callable by tests. Errors are RFC 9457 problem+json naming the field (the module's onError answers
 * VendorApiErrors on `/sandbox/` paths that way).
 */

const authenticationSchema = z
  .object({
    user_id: z.string().min(1).optional(),
    username: z.string().min(1).optional(),
    result: z.enum(['success', 'failure']).optional(),
    factor: factorSchema.optional(),
    device_id: z.string().min(1).optional(),
    ip: z.string().min(1).optional(),
    location: z.string().min(1).optional(),
    reason: z.string().optional(),
    type: z.string().min(1).optional(),
    totp_reused: z.boolean().optional(),
    passcode: z.string().min(1).optional(),
  })
  .strict()
  .refine((b) => b.user_id !== undefined || b.username !== undefined, {
    message: 'user_id or username is required',
    path: ['user_id'],
  })
  .refine((b) => b.result !== undefined || b.passcode !== undefined, {
    message: 'result is required unless passcode is given',
    path: ['result'],
  });

const completeSchema = z
  .object({
    type: z.enum(['android', 'ios']).optional(),
    display_name: z.string().min(1).max(100).optional(),
    version: z.string().min(1).optional(),
    device_integrity: z.string().min(1).optional(),
  })
  .strict();

const migrationSchema = z
  .object({ device_id: z.string().min(1).optional(), user_id: z.string().min(1).optional() })
  .strict()
  .refine((b) => (b.device_id === undefined) !== (b.user_id === undefined), {
    message: 'give either device_id or user_id',
    path: ['device_id'],
  });

/** Registers `/sandbox/...` control routes of the admin module. */
export function registerControlRoutes(app: Hono, state: AdminState, callbacks: CallbackSender): void {
  app.post('/sandbox/authentications', async (c) =>
    c.json(simulateAuthentication(state, await parseControlBody(c, authenticationSchema), eventClient(c))),
  );

  app.post('/sandbox/enrollments/:enrollment_id/complete', async (c) => {
    const body = await parseControlBody(c, completeSchema);
    return c.json(await completeEnrollment(state, c.req.param('enrollment_id') ?? '', body, eventClient(c)));
  });

  app.post('/sandbox/devices/:device_id/verify', (c) =>
    c.json(verifySmsDevice(state, c.req.param('device_id') ?? '', eventClient(c))),
  );

  app.post('/sandbox/migrations', async (c) =>
    c.json(await migrate(state, await parseControlBody(c, migrationSchema), eventClient(c))),
  );

  app.get('/sandbox/callbacks', (c) => {
    const list = callbacks.list();
    return c.json({ callbacks: list, count: list.length });
  });

  // Public images the Admin API links to (no Authorization, like the vendor's).
  app.get('/sandbox/qrcode/:file', (c) => {
    const file = c.req.param('file') ?? '';
    const id = file.endsWith('.png') ? file.slice(0, -4) : '';
    if (!hasEnrollment(state, id)) throw notFound(`no QR code ${file}`);
    return c.body(new Uint8Array(PLACEHOLDER_PNG), 200, { 'content-type': 'image/png' });
  });
  app.get('/sandbox/logo/:file', (c) => {
    const logo = getLogo(state);
    if (!logo || c.req.param('file') !== `${logo.id}.png`) throw notFound(`no logo ${c.req.param('file')}`);
    return c.body(new Uint8Array(logo.bytes), 200, { 'content-type': 'image/png' });
  });
}
