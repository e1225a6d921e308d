import type { Context, MiddlewareHandler } from 'hono';
import { z } from 'zod';
import type { ActionDispatcher, CompanionTx } from '../actions/action-dispatcher.ts';
import { type ActionSpec, actionId, planActions } from '../actions/admin-actions.ts';
import { MAX_REASON_LENGTH } from '../audit/change-reason.ts';
import { DATABASE_ROUTE, declareRoute, notFoundNote, QUERY_RULE_NOTE } from '../edge/route-declaration.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { emitCommitted } from '../events/emit-committed.ts';
import type { EventSink } from '../events/riskgate-event.ts';
import type { RouteEdge, RouteMount } from '../lifecycle/component.ts';
import type { OutboxTables } from '../outbox/outbox-tables.ts';
import type { PolicyAction } from '../policy/policy-types.ts';
import { problemResponse, toProblem } from '../problem/problem-details.ts';
import { storeAnswer } from '../store/store-unavailable.ts';
import { storableLine, storableText } from '../text/storable-text.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import {
  LOCKOUT_STATUSES,
  type LockoutSink,
  type LockoutView,
  OPERATOR_UNLOCK_SUFFIX,
} from './lockout-record.ts';
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
const lockoutPathSchema = z.object({
  id: storableLine().min(1).max(512).describe('The lock-out’s id (its decision’s).'),
});

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
    .max(MAX_REASON_LENGTH)
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
  /** The lock-out records' writes in an outbox append (an operator's lock-out: `lockOut`). */
  records?: Pick<LockoutSink, 'companion'> | undefined;
  /** Wall clock of an operator's lock-out. Default {@link systemClock}. */
  clock?: Clock | undefined;
}

/** What an operator's lock-out (from a review case) is of: the case's decision and its user. */
export interface OperatorLockout {
  decisionId: string;
  userId: string;
  accountId?: string | undefined;
  /** Why (kept in the audit trail and on the record). */
  reason: string;
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
   * (durable, retried), recorded, and `lockout.ended` queued (or emitted once that committed). The
   * Admin call is the outbox's, after: the audit outcome reads `queued`. A lock-out that ended
   * (before or during the unlock) is refused 409 `RG_ERR_CONFLICT`, nothing done; an outbox that
   * did not take it durably in time (refused, or only held in this process) is a 503
   * `RG_ERR_OUTBOX_UNAVAILABLE`, nothing done (a held write that lands later changes nothing).
   */
  unlock(c: Context, edge: RouteEdge, id: string, reason: string): Promise<LockoutView>;
  /**
   * Locks a decision's user out as the operator of `c` (a review case's lock-out, permanent until
   * an unlock): audited first (503, nothing done, when the trail cannot take it), then the Admin
   * API `status: locked_out` queued in the outbox with its record and `lockout.created`, in one
   * append (the decisions' own path): together or not at all. One lock-out per decision (its
   * record's id): a decision that has one, in force or ended, is refused 409 `RG_ERR_CONFLICT`,
   * nothing done. An outbox that refused is a 503 `RG_ERR_OUTBOX_UNAVAILABLE`, nothing done; one
   * that holds the append in this process (the database slow) keeps it as it does a decision's.
   */
  lockOut(c: Context, edge: RouteEdge, target: OperatorLockout): Promise<LockoutView>;
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
    lockOut: (c, edge, target) => lockOut(c, edge, o, target),
  };
}

/** The `rule` of an operator's lock-out record (a lock-out no rule asked for). */
export const OPERATOR_LOCKOUT_RULE = 'operator';

async function lockOut(
  c: Context,
  edge: RouteEdge,
  o: LockoutRoutesOptions,
  t: OperatorLockout,
): Promise<LockoutView> {
  const { decisionId, userId } = t;
  const existing = await fromDatabase(o.store.get(decisionId));
  const entry = await edge.recordChange(c, {
    action: 'lockout.lock',
    target: decisionId,
    detail: { userId, reason: t.reason },
  });
  if (existing !== undefined) throw decisionLockedBefore(existing);
  if (o.records === undefined)
    throw new RiskgateError(ErrorCode.OUTBOX_UNAVAILABLE, 'The lock-out records are not running here.');
  const nowMs = (o.clock ?? systemClock).nowMs();
  const action: PolicyAction = { type: 'lock_out_user', source: OPERATOR_LOCKOUT_RULE };
  const plans = planActions([action], { decisionId, userId, deviceId: undefined, nowMs });
  const records = o.records.companion([
    {
      decisionId,
      userId,
      accountId: t.accountId,
      rule: OPERATOR_LOCKOUT_RULE,
      createdMs: nowMs,
      status: 'queued',
      reason: `${entry.actor}: ${t.reason}`.slice(0, 500),
    },
  ]);
  const results = await o.actions().submit(
    plans.flatMap((p) => p.jobs),
    { companion: records },
  );
  if (results.some((r) => r === 'refused'))
    throw new RiskgateError(
      ErrorCode.OUTBOX_UNAVAILABLE,
      'The outbox did not take the lock-out; nothing changed. Try again shortly.',
    );
  edge.changeOutcome(c, { status: 'queued' });
  const row = await fromDatabase(o.store.get(decisionId));
  // Held in this process (the database slow): the outbox's promise, its record written with it.
  return row === undefined
    ? {
        id: decisionId,
        userId,
        ...(t.accountId !== undefined && { accountId: t.accountId }),
        decisionId,
        rule: OPERATOR_LOCKOUT_RULE,
        createdAt: new Date(nowMs).toISOString(),
        status: 'queued',
        escalated: false,
      }
    : lockoutView(row);
}

function decisionLockedBefore(row: { id: string; status: string }): RiskgateError {
  return new RiskgateError(
    ErrorCode.CONFLICT,
    `The decision ${JSON.stringify(row.id.slice(0, 200))} has a lock-out already (${row.status}); nothing was done.`,
  );
}

const lockoutNotFoundNote = notFoundNote('No lock-out with this id.');

export const LOCKOUTS_ROUTE = declareRoute({
  method: 'get',
  path: '/lockouts',
  surface: 'operator',
  operationId: 'listLockouts',
  summary: 'The lock-outs riskgate drove or withheld, newest first',
  query: lockoutsQuerySchema,
  responses: { 200: { description: 'A page of lock-outs.', schema: 'Lockouts' } },
  problems: { [ErrorCode.INVALID_INPUT]: QUERY_RULE_NOTE, ...DATABASE_ROUTE },
});

export const LOCKOUT_ROUTE = declareRoute({
  method: 'get',
  path: '/lockouts/{id}',
  surface: 'operator',
  operationId: 'getLockout',
  summary: 'One lock-out',
  params: lockoutPathSchema,
  responses: { 200: { description: 'The lock-out.', schema: 'Lockout' } },
  problems: { [ErrorCode.NOT_FOUND]: lockoutNotFoundNote, ...DATABASE_ROUTE },
});

/** The most an unlock's body may weigh, bytes. */
const MAX_UNLOCK_BODY_BYTES = 4096;

export const UNLOCK_ROUTE = declareRoute({
  method: 'post',
  path: '/lockouts/{id}/unlock',
  surface: 'operator',
  operationId: 'unlockLockout',
  summary: 'Unlock the user of a lock-out (Admin API status enabled, through the outbox)',
  description:
    'Written to the audit trail first (refused when it cannot be), then, in one database transaction, queued in the outbox (durable, retried over its horizon) and recorded: this lock-out and the user’s others still in force become `unlocked`, and `lockout.ended` is queued (emitted once that transaction committed). The Admin API call is the outbox’s, after the answer: 202, `unlockStatus` `queued` (later `done`, or `failed` once dead-lettered), and the audit entry’s outcome reads `queued`. A lock-out that had ended (unlocked by another admin, its end come), before or during the unlock, is refused 409, nothing done, the audit outcome `refused`. An outbox that did not take the unlock durably in time is a 503 with `Retry-After`, nothing done, the audit outcome `failed`: an unlock held in this process only (the database did not answer in time) is withdrawn, so if its write lands later it changes nothing.',
  params: lockoutPathSchema,
  body: {
    schema: { component: 'UnlockRequest', schema: unlockRequestSchema },
    maxBytes: MAX_UNLOCK_BODY_BYTES,
  },
  responses: {
    202: {
      description:
        'Queued: the lock-out, `unlocked`, with `unlockStatus` `queued` (the Admin API call follows through the outbox; `GET /lockouts/{id}` shows it `done`).',
      schema: 'Lockout',
    },
  },
  problems: {
    [ErrorCode.INVALID_INPUT]: 'Invalid JSON or a missing or blank `reason`; `field` names it.',
    [ErrorCode.PAYLOAD_TOO_LARGE]: `A body over ${MAX_UNLOCK_BODY_BYTES} bytes.`,
    [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'A body that is not JSON.',
    [ErrorCode.NOT_FOUND]: lockoutNotFoundNote,
    [ErrorCode.CONFLICT]:
      'The lock-out had ended (another admin unlocked it, or its end came), before or during this unlock: nothing done; `detail` says how it ended.',
    [ErrorCode.AUDIT_UNAVAILABLE]:
      'The audit trail did not take the unlock (or none is configured): nothing changed.',
    [ErrorCode.OUTBOX_UNAVAILABLE]:
      'The outbox’s database (RISKGATE_DATABASE) did not take the unlock durably in time (down, refused, too slow): nothing changed; try again after `Retry-After`.',
    ...DATABASE_ROUTE,
  },
  retryAfterOn: [503],
});

/**
 * `GET /lockouts`, `GET /lockouts/{id}` (operators) and `POST /lockouts/{id}/unlock` (an admin):
 * an unlock is written to the audit trail first (refused 503 when it cannot be), then, in one
 * transaction, queued in the outbox as an Admin API `status: enabled` (durable, retried, never
 * lost), recorded, and its `lockout.ended` event queued: answered 202 (promised, the Admin call
 * follows), 409 when the lock-out had ended, 503 with `Retry-After` when the outbox did not take it.
 */
export function lockoutRoutes(o: LockoutRoutesOptions, operations = lockoutOperations(o)): RouteMount {
  return {
    surface: 'operator',
    routes: [LOCKOUTS_ROUTE, LOCKOUT_ROUTE, UNLOCK_ROUTE],
    mount(app, edge) {
      const viewer: MiddlewareHandler = edge.operatorAuth;
      LOCKOUTS_ROUTE.mount(app, viewer, async (c) =>
        c.json(await operations.list(LOCKOUTS_ROUTE.queryOf(c))),
      );
      LOCKOUT_ROUTE.mount(app, viewer, async (c) => c.json(await operations.get(LOCKOUT_ROUTE.pathOf(c).id)));
      UNLOCK_ROUTE.mount(app, edge.operatorAuth, edge.requireRole('admin'), async (c) => {
        const { id } = UNLOCK_ROUTE.pathOf(c);
        const { reason } = await UNLOCK_ROUTE.bodyOf(c);
        try {
          // 202: queued in the outbox (durable, retried); the Admin API call is made after.
          return c.json(await operations.unlock(c, edge, id, reason), 202);
        } catch (error) {
          // Nothing changed and a later try may work (the outbox, the audit trail, the database):
          // the usual problem, with when to try again.
          const problem = toProblem(error);
          if (problem.status !== 503) throw error;
          return problemResponse(problem, { 'retry-after': String(UNLOCK_RETRY_AFTER_S) });
        }
      });
    },
  };
}

/** When an unlock answered 503 (nothing changed) is worth another try, seconds (`Retry-After`). */
export const UNLOCK_RETRY_AFTER_S = 5;

async function unlock(
  c: Context,
  edge: RouteEdge,
  o: LockoutRoutesOptions,
  id: string,
  reason: string,
): Promise<LockoutView> {
  const row = await fromDatabase(o.store.get(id));
  if (row === undefined) throw lockoutNotFound(id);
  // Written to the audit trail first: refused (503) and not made when it cannot be.
  const entry = await edge.recordChange(c, {
    action: 'lockout.unlock',
    target: id,
    detail: { userId: row.user_id, reason },
  });
  // Ended already (an operator unlocked it, its end came): nothing to do, refused with who and why.
  if (row.status === 'unlocked' || row.status === 'expired') throw lockoutAlreadyEnded(row);
  const operator = { name: entry.actor };
  const spec = operatorUnlockSpec(id, row.user_id);
  const ended = lockoutEvent('lockout.ended', id, row.user_id, undefined, operator.name);
  // Its event's deliveries join the transaction when the sink writes to the outbox.
  const eventEntries = o.events.wants('lockout.ended') ? o.events.entries?.(ended) : [];
  const unlockIds = [spec.id, ...(eventEntries ?? []).map((e) => e.id)];
  let won = false;
  // Answered failed before a held (deferred) write landed: when it lands, nothing is made.
  let abandoned = false;
  // The record change and the unlock's entry are one commit: a delivered unlock always finds its
  // record `unlocked`, and a refused write (503) leaves both as they were.
  const [queued] = await o
    .actions()
    .submit([{ key: spec.id, decisionId: id, type: spec.type, target: row.user_id, spec }], {
      companion: {
        specs: eventEntries ?? [],
        write: async (tx, nowMs) => {
          const store = LockoutStore.within(tx);
          if (!abandoned) won = await store.beginUnlockHere(row, operator.name, reason, nowMs);
          // Answered failed already, or lost to its end or to an unlock of another of the user's
          // lock-outs: the entries are this append's own, never to be made. Not when another unlock
          // of this lock-out began: the entries (same ids) are that one's.
          if (!won && ((await store.get(id))?.unlock_status ?? null) === null)
            await dropEntries(tx, unlockIds, abandoned ? UNLOCK_ANSWERED_FAILED : UNLOCK_LOST_RACE, nowMs);
        },
        // Only once the unlock's transaction committed: its `lockout.ended` goes out then, once.
        committed: () => {
          if (won && abandoned)
            // The held write was already past its record change when the answer gave up on it.
            o.log({ level: 'error', msg: 'unlock answered 503 committed late: it stands', lockoutId: id });
          if (!won || eventEntries !== undefined) return;
          void emitCommitted(o.events, ended).then((ok) => {
            if (ok) return;
            // Its id (`lockout.ended:<id>`) is stable: retried, then counted lost.
            o.onEventLost?.();
            o.log({ level: 'error', msg: 'lockout.ended lost: not queued after retries', lockoutId: id });
          });
        },
      },
    });
  if (queued === 'refused')
    throw new RiskgateError(
      ErrorCode.OUTBOX_UNAVAILABLE,
      'The outbox did not take the unlock; nothing changed. Try again shortly.',
    );
  if (queued === 'deferred') {
    // Held in this process only (the database did not answer in time): a crash would lose it, so
    // it is not promised. It is withdrawn: if the held write lands later, it changes nothing.
    abandoned = true;
    throw new RiskgateError(
      ErrorCode.OUTBOX_UNAVAILABLE,
      'The database did not take the unlock in time; nothing changed. Try again shortly.',
    );
  }
  // Another admin's unlock won the race (both submitted the same action id): theirs stands.
  if (!won) {
    const now = await fromDatabase(o.store.get(id));
    throw lockoutAlreadyEnded(now ?? row);
  }
  // Promised, not yet made: the Admin API call is the outbox's (durable, retried).
  edge.changeOutcome(c, { status: 'queued' });
  return lockoutView((await fromDatabase(o.store.get(id)))!);
}

/**
 * An unlock's own entries, written by its append, that must never be attempted: dropped in the
 * same transaction (the record stays as it was). Over the memory outbox the entries are not in the
 * database and this changes nothing.
 */
async function dropEntries(
  tx: CompanionTx,
  ids: readonly string[],
  reason: string,
  nowMs: number,
): Promise<void> {
  await tx
    .withTables<OutboxTables>()
    .updateTable('outbox_entry')
    .set({ status: 'dropped', reason, updated_at: nowMs })
    .where('id', 'in', [...ids])
    .where('status', '=', 'pending')
    .execute();
}

/** Why an unlock's entries written after its answer said it failed are dropped. */
export const UNLOCK_ANSWERED_FAILED = 'unlock_answered_failed';
/** Why an unlock's entries are dropped when the lock-out ended before its transaction. */
export const UNLOCK_LOST_RACE = 'unlock_lost_race';

function lockoutAlreadyEnded(row: { id: string; status: string; ended_by: string | null }): RiskgateError {
  const by =
    row.ended_by === null ? '' : ` by ${row.ended_by === 'schedule' ? 'its schedule' : row.ended_by}`;
  return new RiskgateError(
    ErrorCode.CONFLICT,
    `The lock-out ${JSON.stringify(row.id.slice(0, 200))} has ended already (${row.status}${by}); nothing was done.`,
  );
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
