import { randomUUID } from 'node:crypto';
import type { Context } from 'hono';
import type { z } from 'zod';
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

const fromSnoozeStore = <T>(work: Promise<T>) =>
  storeAnswer(work, ErrorCode.DATABASE_UNAVAILABLE, 'The snoozes database');

function authorOf(c: Context): string {
  const principal = c.get('principal');
  return principal.operator?.name ?? principal.keyId;
}

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
        author: authorOf(c),
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
      const ended = await fromSnoozeStore(deps.store.end(id, nowMs, authorOf(c), reason));
      if (ended === undefined) {
        throw new RiskgateError(ErrorCode.NOT_FOUND, `No active snooze ${JSON.stringify(id.slice(0, 64))}.`);
      }
      await caughtUp();
      return snoozeView(ended);
    },
  };
}

export function snoozeRoutes(deps: SnoozeRoutesDeps, operations = snoozeOperations(deps)): RouteMount {
  return {
    surface: 'operator',
    mount(app, edge) {
      const analyst = edge.requireRole('analyst');
      const viewer = edge.requireRole('viewer');
      app.get('/snoozes', edge.operatorAuth, viewer, async (c) => {
        const query = snoozeQuerySchema.safeParse(c.req.query());
        if (!query.success) throw edge.inputError(query.error, 'The query');
        return c.json(await operations.list(query.data));
      });
      app.post('/snoozes', edge.operatorAuth, analyst, edge.limitBody(MAX_SNOOZE_BODY_BYTES), async (c) => {
        const body = await edge.readJsonBody(c, createSnoozeSchema);
        return c.json(await operations.create(c, edge, body), 201);
      });
      app.delete(
        '/snoozes/:id',
        edge.operatorAuth,
        analyst,
        edge.limitBody(MAX_SNOOZE_BODY_BYTES),
        async (c) => {
          const reason = await endReason(c, edge);
          return c.json(await operations.end(c, edge, c.req.param('id') ?? '', reason));
        },
      );
    },
  };
}

/** An end's reason: the `reason` query parameter or a JSON body's (400 when neither has one). */
async function endReason(c: Context, edge: RouteEdge): Promise<string> {
  const query = endSnoozeQuerySchema.safeParse(c.req.query());
  if (!query.success) throw edge.inputError(query.error, 'The query');
  const hasBody =
    (c.req.header('content-length') ?? '0') !== '0' || c.req.header('transfer-encoding') !== undefined;
  const reason = hasBody ? (await edge.readJsonBody(c, endSnoozeBodySchema)).reason : query.data.reason;
  if (reason === undefined) {
    throw new InputError('reason is required (the `reason` query parameter or a JSON body)', [
      { field: 'reason', message: 'is required' },
    ]);
  }
  return reason;
}
