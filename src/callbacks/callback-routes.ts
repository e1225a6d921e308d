import { declareRoute } from '../edge/route-declaration.ts';
import { ErrorCode, InputError } from '../errors/riskgate-error.ts';
import type { LifecycleLog, RouteMount } from '../lifecycle/component.ts';
import { problemOf, problemResponse } from '../problem/problem-details.ts';
import { CallbackReplayGuard } from './callback-replay-guard.ts';
import { MAX_CALLBACK_BODY_BYTES, verifyCallbackSignature } from './jws-signature.ts';

/**
 * Enrollment success and accounts migration are told apart by their fields (docs/vendor-api.md#callbacks).
 */
function callbackKind(body: unknown): 'enrollment' | 'migration' | 'unknown' {
  if (typeof body !== 'object' || body === null) return 'unknown';
  if ('migrated_to_device_id' in body) return 'migration';
  if ('enrollment_id' in body || 'activation_code' in body) return 'enrollment';
  return 'unknown';
}

/** The ids a callback is about. Never the rest: an enrollment carries its activation code. */
const CALLBACK_LOGGED_IDS = ['user_id', 'device_id', 'enrollment_id'] as const;

function callbackIds(body: unknown): Record<string, string> {
  const ids: Record<string, string> = {};
  if (typeof body !== 'object' || body === null) return ids;
  for (const key of CALLBACK_LOGGED_IDS) {
    const value = (body as Record<string, unknown>)[key];
    if (typeof value === 'string') ids[key] = value.slice(0, 100);
  }
  return ids;
}

export const ADMIN_CALLBACK_ROUTE = declareRoute({
  method: 'post',
  path: '/callbacks/admin',
  surface: 'vendor',
  operationId: 'adminCallback',
  summary: 'The Admin API’s enrollment and migration callbacks',
  description:
    'Served on RISKGATE_PORT once a callback signature key is configured (RISKGATE_CALLBACK_SIGNATURE_KEY), else 404. Logged by kind and ids, never the activation code.',
  body: {
    // Verified over its raw bytes before it is parsed: the handler reads it itself.
    jsonSchema: { type: 'object' },
    maxBytes: MAX_CALLBACK_BODY_BYTES,
    description: `The callback as the Admin API sends it (JSON, at most ${MAX_CALLBACK_BODY_BYTES} bytes), signed over its raw bytes.`,
  },
  responses: { 200: { description: 'Verified and logged.', schema: 'CallbackAck' } },
  problems: {
    [ErrorCode.INVALID_INPUT]: 'The body, signed correctly, is not valid JSON.',
    [ErrorCode.INVALID_SIGNATURE]:
      'x-jws-signature missing, not verifying over this body, or not canonical unpadded base64url.',
    [ErrorCode.CALLBACK_REPLAYED]: 'This signed callback was already received: not processed again.',
    [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_CALLBACK_BODY_BYTES} bytes.`,
    [ErrorCode.NOT_FOUND]: 'No callback signature key is configured: the route is not served.',
  },
});

/**
 * `POST /callbacks/admin`: the Admin API's signed callbacks, verified (JWS over the body with the
 * callback signature key) and refused when replayed; logged by kind and ids.
 */
export function callbackRoutes(o: {
  /** The callback signature key (RISKGATE_CALLBACK_SIGNATURE_KEY). */
  signatureKey: string;
  /** Remembers verified signatures to refuse replays. Default: 24 h, 100,000 entries. */
  replays?: CallbackReplayGuard | undefined;
  log: LifecycleLog;
}): RouteMount {
  const { signatureKey, log } = o;
  const replays = o.replays ?? new CallbackReplayGuard();
  return {
    surface: 'caller',
    routes: [ADMIN_CALLBACK_ROUTE],
    mount(app) {
      ADMIN_CALLBACK_ROUTE.mount(app, async (c) => {
        const raw = new Uint8Array(await c.req.arrayBuffer());
        const verified = await verifyCallbackSignature(c.req.header('x-jws-signature'), raw, signatureKey);
        if (!verified.ok) {
          log({ level: 'warn', msg: 'admin callback refused', reason: verified.reason });
          return problemResponse(
            problemOf(ErrorCode.INVALID_SIGNATURE, 'x-jws-signature does not verify over this body.'),
          );
        }
        let body: unknown;
        try {
          body = JSON.parse(Buffer.from(raw).toString('utf8'));
        } catch {
          throw new InputError('The callback body is not valid JSON.', [
            { field: '', message: 'is not valid JSON' },
          ]);
        }
        // Keyed on the signature's bytes: a replay re-spelled (a `=` pad, other unused low bits) is
        // still a replay. A spelling the vendor never sends is refused and not remembered either way.
        const replayed = verified.canonical
          ? !replays.firstSighting(verified.signature)
          : replays.seen(verified.signature);
        if (replayed) {
          log({
            level: 'warn',
            msg: 'admin callback replayed',
            callback: callbackKind(body),
            ...callbackIds(body),
          });
          return problemResponse(
            problemOf(
              ErrorCode.CALLBACK_REPLAYED,
              'This signed callback was already received; it is not processed again.',
            ),
          );
        }
        if (!verified.canonical) {
          log({ level: 'warn', msg: 'admin callback refused', reason: 'NON_CANONICAL_SIGNATURE' });
          return problemResponse(
            problemOf(ErrorCode.INVALID_SIGNATURE, 'x-jws-signature is not canonical unpadded base64url.'),
          );
        }
        log({ level: 'info', msg: 'admin callback', callback: callbackKind(body), ...callbackIds(body) });
        return c.json({ received: true });
      });
    },
  };
}
