import type { Context, MiddlewareHandler } from 'hono';
import { z } from 'zod';
import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import { type ActionSpec, actionId } from '../actions/admin-actions.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { emitCommitted } from '../events/emit-committed.ts';
import type { EventSink } from '../events/riskgate-event.ts';
import type { RouteEdge, RouteMount } from '../lifecycle/component.ts';
import { storeAnswer } from '../store/store-unavailable.ts';
import { storableLine, storableText } from '../text/storable-text.ts';
import { LOCKOUT_STATUSES, type LockoutView, OPERATOR_UNLOCK_SUFFIX } from './lockout-record.ts';
import { lockoutEvent } from './lockout-recorder.ts';
import { decodeCursor, LockoutStore, lockoutView } from './lockout-store.ts';

/** The query of `GET /lockouts`. */
export const lockoutsQuerySchema = z.strictObject({
  userId: storableLine().min(1).max(256).optional().describe('Only this Admin user’s lock-outs.'),
  accountId: storableLine()
    .min(1)
    .max(256)
    .optional()
    .describe('Only the lock-outs of this account (the login backend’s `accountId` of the decision).'),
  status: z.enum(LOCKOUT_STATUSES).optional().describe('Only lock-outs in this status.'),
  cursor: z
    .string()
    .max(512)
    .refine((c) => decodeCursor(c) !== undefined, 'must be a nextCursor of an earlier page')
    .optional()
    .describe('A previous page’s `nextCursor`: the older lock-outs after it.'),
  limit: z.coerce.number().int().min(1).max(200).default(50).describe('Most lock-outs in a page.'),
});

/** A lock-out id in a path: it goes to the database as is, so what one refuses is a 400 here. */
const lockoutPathSchema = z.object({ id: storableLine().min(1).max(512) });

/** The lock-out id of `c`'s path (400 naming `id` when it cannot be looked up). */
export function lockoutIdOf(c: Context, edge: Pick<RouteEdge, 'inputError'>): string {
  const path = lockoutPathSchema.safeParse({ id: c.req.param('id') });
  if (!path.success) throw edge.inputError(path.error, 'The path');
  return path.data.id;
}

/** The body of `POST /lockouts/{id}/unlock`. */
export const unlockRequestSchema = z.strictObject({
  reason: storableText()
    .trim()
    .min(1)
    .max(500)
    .describe(
      'Why the user is unlocked (the help desk vouched for them): kept on the record and in the audit trail.',
    ),
});

export interface LockoutRoutesOptions {
  store: LockoutStore;
  events: EventSink<ActionSpec>;
  /** The outbox: an unlock goes out through it (durable, retried). Read when an unlock is asked. */
  actions: () => Pick<ActionDispatcher, 'submit'>;
  log: (line: Record<string, unknown>) => void;
  /** Told each event lost (every emit try failed after its change committed): a metric. */
  onEventLost?: () => void;
}

/** The lock-out records and their unlock, as the endpoints and the console's Lock-outs page share them. */
export interface LockoutOperations {
  /** A page of lock-outs, newest first. */
  list(
    query: z.output<typeof lockoutsQuerySchema>,
  ): Promise<{ lockouts: LockoutView[]; nextCursor?: string }>;
  /** One lock-out (404 problem when there is none). */
  get(id: string): Promise<LockoutView>;
  /**
   * Unlocks lock-out `id` as the operator of `c`: audited first (503, nothing done, when the trail
   * cannot take it), then in one transaction queued in the outbox as an Admin API `status: enabled`
   * (durable, retried), recorded, and `lockout.ended` queued. One already unlocked is answered as
   * it is, nothing done twice.
   */
  unlock(c: Context, edge: RouteEdge, id: string, reason: string): Promise<LockoutView>;
}

/** The lock-outs' reads and the unlock over `o` (the endpoints below and the console use these). */
export function lockoutOperations(o: LockoutRoutesOptions): LockoutOperations {
  return {
    list: (query) => fromDatabase(o.store.list(query)),
    async get(id) {
      const row = await fromDatabase(o.store.get(id));
      if (row === undefined) throw lockoutNotFound(id);
      return lockoutView(row);
    },
    unlock: (c, edge, id, reason) => unlock(c, edge, o, id, reason),
  };
}

/**
 * `GET /lockouts`, `GET /lockouts/{id}` (operators) and `POST /lockouts/{id}/unlock` (an admin):
 * an unlock is written to the audit trail first (refused 503 when it cannot be), then, in one
 * transaction, queued in the outbox as an Admin API `status: enabled` (durable, retried, never
 * lost), recorded, and its `lockout.ended` event queued, before the answer.
 */
export function lockoutRoutes(o: LockoutRoutesOptions, operations = lockoutOperations(o)): RouteMount {
  return {
    surface: 'operator',
    mount(app, edge) {
      const viewer: MiddlewareHandler = edge.operatorAuth;
      app.get('/lockouts', viewer, async (c) => {
        const query = lockoutsQuerySchema.safeParse(c.req.query());
        if (!query.success) throw edge.inputError(query.error, 'The query');
        return c.json(await operations.list(query.data));
      });
      app.get('/lockouts/:id', viewer, async (c) => c.json(await operations.get(lockoutIdOf(c, edge))));
      app.post(
        '/lockouts/:id/unlock',
        edge.operatorAuth,
        edge.requireRole('admin'),
        edge.limitBody(4096),
        async (c) => {
          const id = lockoutIdOf(c, edge);
          const { reason } = await edge.readJsonBody(c, unlockRequestSchema);
          return c.json(await operations.unlock(c, edge, id, reason));
        },
      );
    },
  };
}

async function unlock(
  c: Context,
  edge: RouteEdge,
  o: LockoutRoutesOptions,
  id: string,
  reason: string,
): Promise<LockoutView> {
  const row = await fromDatabase(o.store.get(id));
  if (row === undefined) throw lockoutNotFound(id);
  // Unlocked already: the same answer, nothing done twice.
  if (row.status === 'unlocked') return lockoutView(row);
  // Written to the audit trail first: refused (503) and not made when it cannot be.
  const entry = await edge.recordChange(c, {
    action: 'lockout.unlock',
    target: id,
    detail: { userId: row.user_id, reason },
  });
  const operator = { name: entry.actor };
  const spec = operatorUnlockSpec(id, row.user_id);
  const ended = lockoutEvent('lockout.ended', id, row.user_id, undefined, operator.name);
  // Its event's deliveries join the transaction when the sink writes to the outbox.
  const eventEntries = o.events.wants('lockout.ended') ? o.events.entries?.(ended) : [];
  let won = false;
  // The record change and the unlock's entry are one commit: a delivered unlock always finds its
  // record `unlocked`, and a refused write (503) leaves both as they were.
  const [queued] = await o
    .actions()
    .submit([{ key: spec.id, decisionId: id, type: spec.type, target: row.user_id, spec }], {
      companion: {
        specs: eventEntries ?? [],
        write: async (tx, nowMs) => {
          won = await LockoutStore.within(tx).beginUnlockHere(row, operator.name, reason, nowMs);
        },
      },
    });
  if (queued === 'refused')
    throw new RiskgateError(
      ErrorCode.OUTBOX_UNAVAILABLE,
      'The outbox did not take the unlock; try again shortly.',
    );
  // Another admin's unlock won the race (both submitted the same action id): its record stands,
  // told once. Deferred: the record changes when the outbox writes the unlock.
  if (won && eventEntries === undefined && !(await emitCommitted(o.events, ended))) {
    // The unlock committed: its event (id `lockout.ended:<id>`, stable) was retried, then counted lost.
    o.onEventLost?.();
    o.log({ level: 'error', msg: 'lockout.ended lost: not queued after retries', lockoutId: id });
  }
  return lockoutView((await fromDatabase(o.store.get(id)))!);
}

/**
 * An operator's unlock: `status: enabled`, ordered with the user's other actions (after the
 * lock-out it undoes, when that is still pending). One per lock-out (its id).
 */
function operatorUnlockSpec(lockoutId: string, userId: string): ActionSpec {
  return {
    id: `${actionId(lockoutId, 'unlock_user', userId)}${OPERATOR_UNLOCK_SUFFIX}`,
    decisionId: lockoutId,
    type: 'unlock_user',
    target: userId,
    orderingKey: userId,
    call: { method: 'updateUser', userId, update: { status: 'enabled' } },
  };
}

function lockoutNotFound(id: string): RiskgateError {
  return new RiskgateError(ErrorCode.NOT_FOUND, `No lock-out with id ${JSON.stringify(id.slice(0, 200))}.`);
}

/** `work`, its failure the 503 `RG_ERR_DATABASE_UNAVAILABLE` (src/store/store-unavailable.ts). */
const fromDatabase = <T>(work: Promise<T>) =>
  storeAnswer(work, ErrorCode.DATABASE_UNAVAILABLE, 'The database');
