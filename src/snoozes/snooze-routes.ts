import { randomUUID } from 'node:crypto';
import type { Context } from 'hono';
import { z } from 'zod';
import { operatorNameOf } from '../edge/caller-auth.ts';
import {
  AUDITED_CHANGE,
  declareRoute,
  jsonBodyProblems,
  OPERATOR_KEY,
  QUERY_RULE_NOTE,
  storeUnavailableNote,
} from '../edge/route-declaration.ts';
import { ErrorCode, InputError, RiskgateError } from '../errors/riskgate-error.ts';
import type { LifecycleLog, RouteEdge, RouteMount } from '../lifecycle/component.ts';
import { normaliseListValue } from '../lists/list-values.ts';
import { storeAnswer } from '../store/store-unavailable.ts';
import { closestName } from '../text/name-suggestion.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import {
  type CreateSnooze,
  createSnoozeSchema,
  endSnoozeBodySchema,
  endSnoozeQuerySchema,
  MAX_SNOOZE_BODY_BYTES,
  type SnoozeView,
  type snoozeListSchema,
  snoozeQuerySchema,
} from './snooze-api.ts';
import type { Snooze, SnoozeStore } from './snooze-store.ts';
import type { SnoozeSync } from './snooze-sync.ts';

/**
 * The operator endpoints of rule snoozes: `GET /snoozes` (by rule, by entity), `POST /snoozes`,
 * `DELETE /snoozes/{id}` (end early). Reads take any operator; a snooze or its end an analyst (the
 * one who reviews the login, as with a label). A change is written to the audit trail first
 * (`edge.recordChange`: refused, 503, when it cannot be, and nothing changes), then to the
 * database; every replica's snapshot has it within 2 s (the lists' poll), this one's before the
 * answer.
 */

export interface SnoozeRoutesDeps {
  store: SnoozeStore;
  sync: SnoozeSync;
  /** The active policy's rule ids: a snooze of any other is refused. */
  ruleIds: () => readonly string[];
  /** Longest snooze, days (RISKGATE_MAX_SNOOZE_DAYS). */
  maxDays: number;
  log: LifecycleLog;
  /** Snoozes are dated and end on its wall time. Default {@link systemClock}. */
  clock?: Clock | undefined;
}

const DAY_MS = 86_400_000;

/** The snoozes' store, as its 503 and the routes' notes name it. */
const SNOOZES_STORE = 'The snoozes database';

const fromSnoozeStore = <T>(work: Promise<T>) =>
  storeAnswer(work, ErrorCode.DATABASE_UNAVAILABLE, SNOOZES_STORE);

export function snoozeView(s: Snooze): SnoozeView {
  const view: SnoozeView = {
    id: s.id,
    ruleId: s.ruleId,
    entity: s.entity,
    value: s.value,
    author: s.author,
    reason: s.reason,
    createdAt: new Date(s.createdMs).toISOString(),
    until: new Date(s.untilMs).toISOString(),
  };
  if (s.endedMs !== null) {
    view.ended = { at: new Date(s.endedMs).toISOString(), by: s.endedBy ?? '', reason: s.endReason ?? '' };
  }
  return view;
}

/** The snoozes' reads and changes, as the endpoints and the console share them. */
export interface SnoozeOperations {
  /** The time snoozes are dated and end on (the service's clock), epoch ms: a form's `until` from it. */
  nowMs(): number;
  /** Active snoozes (by rule, by entity), and this process's snapshot's age. */
  list(query: Partial<z.output<typeof snoozeQuerySchema>>): Promise<z.output<typeof snoozeListSchema>>;
  /**
   * Snoozes a rule for an entity as the operator of `c`: checked (400 naming the field: an unknown
   * rule, a value not of its entity, an `until` past or too far), audited first, written.
   */
  create(c: Context, edge: RouteEdge, input: CreateSnooze): Promise<SnoozeView>;
  /** Ends an active snooze early as the operator of `c`, audited first; 404 when there is none. */
  end(c: Context, edge: RouteEdge, id: string, reason: string): Promise<SnoozeView>;
}

export function snoozeOperations(deps: SnoozeRoutesDeps): SnoozeOperations {
  const clock = deps.clock ?? systemClock;
  const now = () => clock.nowMs();
  const caughtUp = () => deps.sync.refresh().catch(() => {}); // the poll catches up; the change is committed
  return {
    nowMs: now,
    async list(query) {
      let value = query.value;
      if (value !== undefined && query.entity !== undefined) {
        const checked = normaliseListValue(query.entity, value);
        if (!checked.ok)
          throw new InputError(`value ${checked.message}`, [{ field: 'value', message: checked.message }]);
        value = checked.value;
      }
      const items = await fromSnoozeStore(
        deps.store.active({
          nowMs: now(),
          ruleId: query.ruleId,
          entity: query.entity,
          value,
          limit: query.limit ?? 100,
        }),
      );
      const ageMs = deps.sync.ageMs();
      return {
        items: items.map(snoozeView),
        snapshot: { ageMs: Number.isFinite(ageMs) ? ageMs : -1, stale: !deps.sync.read(now()).ok },
      };
    },
    async create(c, edge, input) {
      const ids = deps.ruleIds();
      if (!ids.includes(input.ruleId)) {
        const near = closestName(input.ruleId, ids);
        const message = `is not a rule of the active policy${near === undefined ? '' : ` (did you mean ${near}?)`}`;
        throw new InputError(`ruleId ${message}`, [{ field: 'ruleId', message }]);
      }
      const checked = normaliseListValue(input.entity, input.value);
      if (!checked.ok) {
        throw new InputError(`value ${checked.message}`, [{ field: 'value', message: checked.message }]);
      }
      const createdMs = now();
      const untilMs = Date.parse(input.until);
      if (!(untilMs > createdMs)) {
        throw new InputError('until must be in the future', [
          { field: 'until', message: 'must be in the future' },
        ]);
      }
      if (untilMs - createdMs > deps.maxDays * DAY_MS) {
        const message = `must be at most ${deps.maxDays} days away (RISKGATE_MAX_SNOOZE_DAYS)`;
        throw new InputError(`until ${message}`, [{ field: 'until', message }]);
      }
      const snooze: Snooze = {
        id: randomUUID(),
        ruleId: input.ruleId,
        entity: input.entity,
        value: checked.value,
        author: operatorNameOf(c),
        reason: input.reason,
        createdMs,
        untilMs,
        endedMs: null,
        endedBy: null,
        endReason: null,
      };
      const view = snoozeView(snooze);
      await edge.recordChange(c, {
        action: 'snooze.create',
        target: snooze.id,
        detail: {
          ruleId: view.ruleId,
          entity: view.entity,
          value: view.value,
          until: view.until,
          reason: view.reason,
        },
      });
      await fromSnoozeStore(deps.store.add(snooze));
      await caughtUp();
      return view;
    },
    async end(c, edge, id, reason) {
      const existing = await fromSnoozeStore(deps.store.get(id));
      const nowMs = now();
      if (existing === undefined || existing.endedMs !== null || existing.untilMs <= nowMs) {
        throw new RiskgateError(ErrorCode.NOT_FOUND, `No active snooze ${JSON.stringify(id.slice(0, 64))}.`);
      }
      await edge.recordChange(c, {
        action: 'snooze.end',
        target: id,
        detail: { ruleId: existing.ruleId, entity: existing.entity, value: existing.value, reason },
      });
      const ended = await fromSnoozeStore(deps.store.end(id, nowMs, operatorNameOf(c), reason));
      if (ended === undefined) {
        throw new RiskgateError(ErrorCode.NOT_FOUND, `No active snooze ${JSON.stringify(id.slice(0, 64))}.`);
      }
      await caughtUp();
      return snoozeView(ended);
    },
  };
}

const SNOOZE_DATABASE = storeUnavailableNote(SNOOZES_STORE);
const SNOOZE_CHANGE_NOTE =
  'An analyst’s. Written to the audit trail before it is made (refused, 503, when it cannot be), then to the database; every replica’s decisions see it within 2 s.';

export const SNOOZES_ROUTE = declareRoute({
  method: 'get',
  path: '/snoozes',
  surface: 'operator',
  operationId: 'listSnoozes',
  summary: 'Active rule snoozes, by rule or by entity, the ones ending soonest first',
  query: snoozeQuerySchema,
  responses: {
    200: { description: 'The active snoozes; how current this process’s snapshot is.', schema: 'Snoozes' },
  },
  problems: { ...SNOOZE_DATABASE, [ErrorCode.INVALID_INPUT]: QUERY_RULE_NOTE },
});

export const CREATE_SNOOZE_ROUTE = declareRoute({
  method: 'post',
  path: '/snoozes',
  surface: 'operator',
  operationId: 'createSnooze',
  summary: 'Snooze one rule for one account, user, unit or IP/CIDR until a time',
  description: `${SNOOZE_CHANGE_NOTE} Decisions then treat the rule as not matched for that entity, and say so in \`explanation.snoozed\`.`,
  body: {
    schema: { component: 'CreateSnooze', schema: createSnoozeSchema },
    maxBytes: MAX_SNOOZE_BODY_BYTES,
  },
  responses: {
    201: { description: 'The snooze as kept (an `ip` snooze as its network).', schema: 'Snooze' },
  },
  problems: {
    ...SNOOZE_DATABASE,
    ...AUDITED_CHANGE,
    [ErrorCode.INVALID_INPUT]:
      'A rule the active policy does not have, a value not of its entity, an `until` past or beyond RISKGATE_MAX_SNOOZE_DAYS, a missing reason; `field` names it.',
    ...jsonBodyProblems(MAX_SNOOZE_BODY_BYTES),
  },
});

export const END_SNOOZE_ROUTE = declareRoute({
  method: 'delete',
  path: '/snoozes/{id}',
  surface: 'operator',
  operationId: 'endSnooze',
  summary: 'End a snooze early, with a reason (the rule is back for its entity)',
  description: `${SNOOZE_CHANGE_NOTE} The reason comes as the \`reason\` query parameter or a JSON body; the snooze stays, ended, for the record.`,
  params: z.object({ id: z.string().describe('The snooze’s id.') }),
  query: endSnoozeQuerySchema,
  body: {
    schema: { component: 'EndSnooze', schema: endSnoozeBodySchema },
    required: false,
    maxBytes: MAX_SNOOZE_BODY_BYTES,
  },
  responses: { 200: { description: 'The snooze, ended.', schema: 'Snooze' } },
  problems: {
    ...SNOOZE_DATABASE,
    ...AUDITED_CHANGE,
    [ErrorCode.NOT_FOUND]: `No active snooze of this id. ${OPERATOR_KEY[ErrorCode.NOT_FOUND]}`,
    [ErrorCode.INVALID_INPUT]: 'A missing or empty reason; `field` names it.',
    [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_SNOOZE_BODY_BYTES} bytes.`,
  },
});

export function snoozeRoutes(deps: SnoozeRoutesDeps, operations = snoozeOperations(deps)): RouteMount {
  return {
    surface: 'operator',
    routes: [SNOOZES_ROUTE, CREATE_SNOOZE_ROUTE, END_SNOOZE_ROUTE],
    mount(app, edge) {
      const analyst = edge.requireRole('analyst');
      const viewer = edge.requireRole('viewer');
      SNOOZES_ROUTE.mount(app, edge.operatorAuth, viewer, async (c) =>
        c.json(await operations.list(SNOOZES_ROUTE.queryOf(c))),
      );
      CREATE_SNOOZE_ROUTE.mount(app, edge.operatorAuth, analyst, async (c) => {
        const body = await CREATE_SNOOZE_ROUTE.bodyOf(c);
        return c.json(await operations.create(c, edge, body), 201);
      });
      END_SNOOZE_ROUTE.mount(app, edge.operatorAuth, analyst, async (c) => {
        const reason = await endReason(c);
        return c.json(await operations.end(c, edge, END_SNOOZE_ROUTE.pathOf(c).id, reason));
      });
    },
  };
}

/** An end's reason: the `reason` query parameter or a JSON body's (400 when neither has one). */
async function endReason(c: Context): Promise<string> {
  const query = END_SNOOZE_ROUTE.queryOf(c);
  const hasBody =
    (c.req.header('content-length') ?? '0') !== '0' || c.req.header('transfer-encoding') !== undefined;
  const reason = hasBody ? (await END_SNOOZE_ROUTE.bodyOf(c)).reason : query.reason;
  if (reason === undefined) {
    throw new InputError('reason is required (the `reason` query parameter or a JSON body)', [
      { field: 'reason', message: 'is required' },
    ]);
  }
  return reason;
}
