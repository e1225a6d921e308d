import { z } from 'zod';
import type { AdminClient } from '../admin/admin-client.ts';
import type { AdminDevice } from '../admin/admin-schemas.ts';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import type { PolicyAction } from '../policy/policy-types.ts';
import { checkSubject } from '../subject/subject-binding.ts';
import type { CallOptions, UpstreamResult } from '../upstream/upstream-result.ts';

/**
 * An Admin action as data: what the durable outbox stores and any process can carry out later.
 * `id` is the idempotency key (`<decisionId>:<type>:<target>`): the outbox keeps one entry per id,
 * and every call is idempotent at the Admin API (a repeated PUT answers 304, a repeated DELETE 410),
 * so a retry after an unknown outcome does no harm. `orderingKey` (the user) keeps one user's
 * actions in order: a later one never overtakes an earlier one still pending.
 */
export const actionSpecSchema = z.object({
  id: z.string().min(1),
  decisionId: z.string().min(1),
  type: z.enum(['lock_out_user', 'restrict_factors', 'archive_device', 'deliver_webhook', 'unlock_user']),
  target: z.string().min(1),
  orderingKey: z.string().min(1),
  call: z.discriminatedUnion('method', [
    z.object({
      method: z.literal('updateUser'),
      userId: z.string().min(1),
      update: z.object({
        status: z.enum(['locked_out', 'enabled']).optional(),
        allowed_factors: z.array(z.string()).optional(),
      }),
    }),
    z.object({ method: z.literal('deleteDevice'), deviceId: z.string().min(1) }),
    // An event to a webhook receiver (src/webhooks/): `receiver` names the configured URL by its
    // hash (the URL may carry credentials, so the outbox never holds it); `body` is the event JSON
    // as signed, sent byte for byte by every attempt.
    z.object({
      method: z.literal('postWebhook'),
      receiver: z.string().min(1),
      webhookId: z.string().min(1),
      body: z.string().min(1),
    }),
  ]),
  traceparent: z.string().optional(),
  /** Not due before this wall-clock time, milliseconds (a temporary lock-out's end). Default: at once. */
  notBeforeMs: z.number().int().optional(),
  /**
   * Set on the unlock that ends a temporary lock-out: before it runs, the outbox asks the lock-out
   * records whether it still should (src/lockouts/unlock-gate.ts): not when an operator or a later
   * lock-out extended it, or when `escalateWithinMs` makes it permanent.
   */
  scheduledUnlock: z
    .object({
      lockedAtMs: z.number().int(),
      escalateWithinMs: z.number().int().positive().optional(),
    })
    .optional(),
  /**
   * Set when the decision could not read the Admin user (an Admin outage): each attempt first
   * checks the user is the account's (subject binding, `username` mode) and, for a device, that
   * it is one of the user's; a mismatch drops the action (`RG_ERR_SUBJECT_MISMATCH`), a failed
   * read is retried like a failed call.
   */
  verifySubject: z
    .object({ accountId: z.string().min(1), userId: z.string().min(1), deviceId: z.string().optional() })
    .optional(),
});
export type ActionSpec = z.infer<typeof actionSpecSchema>;

/** A planned action, as a decision submits it to the outbox. */
export interface ActionJob {
  /** Deduplication key: the same key is never run twice (`<decisionId>:<type>:<target>`). */
  key: string;
  decisionId: string;
  /** The action type, for outcomes and metrics. */
  type: string;
  /** What the action acts on (user or device id), for the log. */
  target: string;
  /** The action as data: what the outbox stores and its attempts carry out (`attemptAction`). */
  spec: ActionSpec;
}

/** The `postWebhook` call of an action: one event to one receiver. */
export type WebhookCall = Extract<ActionSpec['call'], { method: 'postWebhook' }>;

/** Who carries out a `postWebhook` attempt (src/webhooks/webhook-delivery.ts). */
export interface WebhookPoster {
  /** Timeout of one attempt, milliseconds (the outbox's lease outlasts it). */
  readonly timeoutMs: number;
  /**
   * How long one delivery is retried, milliseconds, within the outbox's horizon (the shorter
   * wins): one event a receiver refuses holds its stream no longer. Undefined: the outbox's.
   */
  readonly retryHorizonMs?: number | undefined;
  /** One signed POST of `call`: ok on a 2xx, else a typed failure the outbox retries or ends. */
  post(call: WebhookCall, options: CallOptions): Promise<UpstreamResult<unknown>>;
}

/** The Admin API calls an action's attempts make. */
export type ActionAdmin = Pick<
  AdminClient,
  'updateUser' | 'deleteDevice' | 'getUserCached' | 'getUserDevicesCached'
>;

/**
 * An `ActionSpec` read back from the outbox: its own earlier write, so the common case is checked
 * by shape alone (zod per claimed entry was a visible share of the outbox's CPU); anything that does
 * not look right goes through the full schema, which says what is wrong.
 */
export function parseStoredSpec(text: string): ActionSpec {
  const v = JSON.parse(text) as Partial<ActionSpec> | null;
  const call = v?.call as
    | { method?: unknown; userId?: unknown; deviceId?: unknown; receiver?: unknown; body?: unknown }
    | undefined;
  const plausible =
    typeof v?.id === 'string' &&
    typeof v.decisionId === 'string' &&
    typeof v.target === 'string' &&
    typeof v.orderingKey === 'string' &&
    (v.type === 'lock_out_user' ||
      v.type === 'restrict_factors' ||
      v.type === 'archive_device' ||
      v.type === 'unlock_user') &&
    ((call?.method === 'updateUser' && typeof call.userId === 'string') ||
      (call?.method === 'deleteDevice' && typeof call.deviceId === 'string'));
  // A webhook delivery: the full schema (its body is the one field worth the check).
  if (v?.type === 'deliver_webhook') return actionSpecSchema.parse(v);
  return plausible ? (v as ActionSpec) : actionSpecSchema.parse(v);
}

/**
 * One attempt of `spec` against the Admin API (its subject verified first when it asks), or, for a
 * `postWebhook` call, to its receiver through `webhooks` (none configured: it fails for good).
 */
export function attemptAction(
  spec: ActionSpec,
  admin: ActionAdmin,
  webhooks?: WebhookPoster,
): (options: CallOptions) => Promise<UpstreamResult<unknown>> {
  const call = spec.call;
  if (call.method === 'postWebhook') {
    return (o) => (webhooks === undefined ? Promise.resolve(noWebhooks()) : webhooks.post(call, o));
  }
  const act =
    call.method === 'updateUser'
      ? (o: CallOptions) => admin.updateUser(call.userId, call.update, o) as Promise<UpstreamResult<unknown>>
      : (o: CallOptions) => admin.deleteDevice(call.deviceId, o) as Promise<UpstreamResult<unknown>>;
  const verify = spec.verifySubject;
  const run =
    verify === undefined
      ? act
      : async (o: CallOptions): Promise<UpstreamResult<unknown>> => {
          const checked = await verifiedSubject(verify, admin, o);
          return checked.ok ? act(o) : checked;
        };
  return spec.traceparent === undefined ? run : (o) => run({ ...o, traceparent: spec.traceparent });
}

/**
 * A webhook delivery left in the outbox by a riskgate configured with receivers, read by one
 * without: dead-lettered (`RG_ERR_INVALID_CONFIG`), for an operator to drop or retry.
 */
function noWebhooks(): UpstreamResult<unknown> {
  return {
    ok: false,
    error: new UpstreamError(ErrorCode.INVALID_CONFIG, 'no webhook receivers are configured', {
      upstream: 'webhook',
    }),
    durationMs: 0,
  };
}

/**
 * Reads the Admin user (and its devices, when a device is named) and checks it is the account's,
 * as the decision would have: ok, a read's failure (retried), or `RG_ERR_SUBJECT_MISMATCH`
 * (final). A user that is gone (404) is a mismatch too: there is nobody of that account to act on.
 */
async function verifiedSubject(
  subject: NonNullable<ActionSpec['verifySubject']>,
  admin: ActionAdmin,
  options: CallOptions,
): Promise<UpstreamResult<undefined>> {
  const startedAt = performance.now();
  const mismatch = (): UpstreamResult<undefined> => ({
    ok: false,
    error: new UpstreamError(ErrorCode.SUBJECT_MISMATCH, 'the Admin user is not the account’s', {
      upstream: 'admin',
    }),
    durationMs: performance.now() - startedAt,
  });
  const user = await admin.getUserCached(subject.userId, options);
  if (!user.ok) return user.error.code === ErrorCode.UPSTREAM_NOT_FOUND ? mismatch() : user;
  let devices: readonly AdminDevice[] | undefined;
  if (subject.deviceId !== undefined) {
    const read = await admin.getUserDevicesCached(subject.userId, undefined, options);
    if (!read.ok) return read.error.code === ErrorCode.UPSTREAM_NOT_FOUND ? mismatch() : read;
    devices = read.value.devices;
  }
  const check = checkSubject('username', subject, user.value, devices);
  return check.status === 'verified'
    ? { ok: true, value: undefined, durationMs: performance.now() - startedAt }
    : mismatch();
}

/**
 * What each policy action means as Admin API calls. `planActions` turns a decision's actions into
 * queue jobs (one per target), or says why an action cannot run for this request.
 */

export interface ActionPlan {
  action: PolicyAction;
  /** Jobs to enqueue; empty when `skipped` is set. */
  jobs: ActionJob[];
  /** Why nothing can be done (a required id is missing from the request). */
  skipped?: string;
}

export interface ActionTargets {
  decisionId: string;
  userId: string | undefined;
  deviceId: string | undefined;
  /** The decision's trace, when tracing is on: each attempt's client span is its child. */
  traceparent?: string | undefined;
  /**
   * The account whose Admin user the decision could not read: each action first verifies its
   * subject is that account's (`ActionSpec.verifySubject`).
   */
  verifyAccountId?: string | undefined;
  /** Wall clock of the decision, milliseconds: when a temporary lock-out starts. Default `Date.now()`. */
  nowMs?: number | undefined;
}

/** Plans the after-answer actions of a decision (the one-time code is fetched before answering). */
export function planActions(actions: readonly PolicyAction[], t: ActionTargets): ActionPlan[] {
  const plans: ActionPlan[] = [];
  for (const action of actions) {
    switch (action.type) {
      case 'one_time_code':
        break;
      case 'lock_out_user':
        plans.push(
          t.userId === undefined
            ? { action, jobs: [], skipped: 'no_user_id' }
            : { action, jobs: lockOutJobs(t, action, t.userId) },
        );
        break;
      case 'restrict_factors': {
        const factors = action.allowedFactors ?? [];
        plans.push(
          t.userId === undefined
            ? { action, jobs: [], skipped: 'no_user_id' }
            : {
                action,
                jobs: [
                  job(t, action, t.userId, t.userId, {
                    method: 'updateUser',
                    userId: t.userId,
                    update: { allowed_factors: [...factors] },
                  }),
                ],
              },
        );
        break;
      }
      case 'archive_device': {
        const ids = action.deviceIds ?? (t.deviceId === undefined ? [] : [t.deviceId]);
        plans.push(
          ids.length === 0
            ? { action, jobs: [], skipped: 'no_device_id' }
            : {
                action,
                // Ordered with the user's other actions when the user is known.
                jobs: ids.map((id) =>
                  job(t, action, id, t.userId ?? id, { method: 'deleteDevice', deviceId: id }),
                ),
              },
        );
        break;
      }
    }
  }
  return plans;
}

/** An action's id: `<decisionId>:<type>:<target>` (its idempotency key). */
export function actionId(decisionId: string, type: string, target: string): string {
  return `${decisionId}:${type}:${target}`;
}

/** The user's ordering key of the unlocks that end temporary lock-outs. */
export function scheduledUnlockOrderingKey(userId: string): string {
  return `${userId}:scheduled-unlock`;
}

/**
 * A lock-out, and for a temporary one (`durationMs`) its end: an unlock due then, appended with it
 * so it is as durable as the lock-out. The unlock is ordered apart from the user's other actions
 * (else it would hold them until it is due); its gate waits while the lock-out is still pending.
 */
function lockOutJobs(t: ActionTargets, action: PolicyAction, userId: string): ActionJob[] {
  const lock = job(t, action, userId, userId, {
    method: 'updateUser',
    userId,
    update: { status: 'locked_out' },
  });
  if (action.durationMs === undefined) return [lock];
  const lockedAtMs = t.nowMs ?? Date.now();
  const { verifySubject: _checkedByTheLockOut, ...unlock } = job(
    t,
    { ...action, type: 'unlock_user' },
    userId,
    scheduledUnlockOrderingKey(userId),
    { method: 'updateUser', userId, update: { status: 'enabled' } },
  ).spec;
  const spec: ActionSpec = {
    ...unlock,
    notBeforeMs: lockedAtMs + action.durationMs,
    scheduledUnlock: {
      lockedAtMs,
      ...(action.escalateWithinMs !== undefined && { escalateWithinMs: action.escalateWithinMs }),
    },
  };
  return [lock, { key: spec.id, decisionId: t.decisionId, type: spec.type, target: userId, spec }];
}

function job(
  t: ActionTargets,
  action: Pick<PolicyAction, 'type'> | { type: 'unlock_user' },
  target: string,
  orderingKey: string,
  call: ActionSpec['call'],
): ActionJob {
  const spec: ActionSpec = {
    id: actionId(t.decisionId, action.type, target),
    decisionId: t.decisionId,
    type: action.type as ActionSpec['type'],
    target,
    orderingKey,
    call,
    ...(t.traceparent !== undefined && { traceparent: t.traceparent }),
    ...(t.verifyAccountId !== undefined &&
      t.userId !== undefined && {
        verifySubject: {
          accountId: t.verifyAccountId,
          userId: t.userId,
          ...(call.method === 'deleteDevice' && { deviceId: call.deviceId }),
        },
      }),
  };
  return {
    key: spec.id,
    decisionId: t.decisionId,
    type: action.type,
    target,
    spec,
  };
}
