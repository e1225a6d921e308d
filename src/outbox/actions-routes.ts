import type { Context } from 'hono';
import { z } from 'zod';
import {
  AUDITED_CHANGE,
  declareRoute,
  notFoundNote,
  OPERATOR_KEY,
  QUERY_RULE_NOTE,
} from '../edge/route-declaration.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import { storableLine } from '../text/storable-text.ts';
import type { OutboxEntry, OutboxStatus, OutboxStore } from './outbox-store.ts';
import { actionsQuerySchema, fromOutboxStore, outboxEntryView } from './outbox-view.ts';

function actionNotFound(id: string, state: string): RiskgateError {
  return new RiskgateError(
    ErrorCode.NOT_FOUND,
    `No ${state} action with id ${JSON.stringify(id.slice(0, 200))}.`,
  );
}

/** An action id in a path: it goes to the store as is, so what a database refuses is a 400 here. */
const actionPathSchema = z.object({
  id: storableLine()
    .min(1)
    .max(600)
    .describe('The action’s id (`<decisionId>:<type>:<target>`), URL-encoded.'),
});

const OUTBOX_ROUTE = {
  [ErrorCode.OUTBOX_UNAVAILABLE]:
    'The outbox’s database (RISKGATE_DATABASE) did not answer: down, refused or too slow.',
};
const NO_OUTBOX = 'With RISKGATE_OUTBOX=memory there is no outbox: 404.';
/** The 404 of a route steering one action: no such action, another method, or no outbox here. */
const unknownAction = (state: string) => `${notFoundNote(`No ${state} action with this id.`)} ${NO_OUTBOX}`;

export const ACTIONS_ROUTE = declareRoute({
  method: 'get',
  path: '/actions',
  surface: 'operator',
  operationId: 'listActions',
  summary: 'The outbox: counts and the newest actions',
  description: NO_OUTBOX,
  query: actionsQuerySchema,
  responses: {
    200: {
      description: 'Pending and dead counts, the oldest pending age, the newest entries.',
      schema: 'Actions',
    },
  },
  problems: {
    [ErrorCode.INVALID_INPUT]: QUERY_RULE_NOTE,
    ...OUTBOX_ROUTE,
    [ErrorCode.NOT_FOUND]: `${OPERATOR_KEY[ErrorCode.NOT_FOUND]} ${NO_OUTBOX}`,
  },
});

export const RETRY_ACTION_ROUTE = declareRoute({
  method: 'post',
  path: '/actions/{id}/retry',
  surface: 'operator',
  operationId: 'retryAction',
  summary: 'Deliver a dead (or dropped) action again, now (the admin role; audited)',
  description: NO_OUTBOX,
  params: actionPathSchema,
  responses: { 200: { description: 'The action, pending again.', schema: 'OutboxEntry' } },
  problems: { ...OUTBOX_ROUTE, ...AUDITED_CHANGE, [ErrorCode.NOT_FOUND]: unknownAction('dead or dropped') },
});

export const DROP_ACTION_ROUTE = declareRoute({
  method: 'delete',
  path: '/actions/{id}',
  surface: 'operator',
  operationId: 'dropAction',
  summary: 'Drop a pending or dead action: it is never delivered (the admin role; audited)',
  description: `Its final \`action\` line goes to the decision log. ${NO_OUTBOX}`,
  params: actionPathSchema,
  responses: { 200: { description: 'The action, dropped.', schema: 'OutboxEntry' } },
  problems: { ...OUTBOX_ROUTE, ...AUDITED_CHANGE, [ErrorCode.NOT_FOUND]: unknownAction('pending or dead') },
});

/** What an operator's retry or drop needs: the outbox's store and what to tell the outbox. */
export interface OutboxControls {
  store: OutboxStore;
  /** Told when an operator drops an action: its final `action` line. */
  onDropped: (entry: OutboxEntry) => void;
  /** Told when an operator retries a dead action (the outbox delivers it now). */
  onRetried: () => void;
}

/**
 * An operator's retry (a dead or dropped action goes out again now) or drop (a pending or dead one
 * is never delivered), `GET /actions`' and the console's. A change is audited before it is made
 * (`audit` rejects when it cannot be, and the change is not made): an id the change cannot apply
 * to is a 404 first, so the trail holds no change that was never possible. (Another operator
 * changing the entry in between leaves an entry for a change that then answered 404.)
 */
export async function changeAction(
  o: OutboxControls,
  change: 'retry' | 'drop',
  id: string,
  audit: (entry: OutboxEntry) => Promise<unknown>,
): Promise<OutboxEntry> {
  const [from, state] =
    change === 'retry'
      ? [['dead', 'dropped'] as const, 'dead or dropped']
      : [['pending', 'dead'] as const, 'pending or dead'];
  const entry = await fromOutboxStore(o.store.get(id));
  if (entry === undefined || !(from as readonly OutboxStatus[]).includes(entry.status)) {
    throw actionNotFound(id, state);
  }
  await audit(entry);
  const now = Date.now();
  const done = await fromOutboxStore(
    change === 'retry' ? o.store.retry(id, now) : o.store.drop(id, 'dropped_by_operator', now),
  );
  if (!done) throw actionNotFound(id, state);
  const after = (await fromOutboxStore(o.store.get(id)))!;
  if (change === 'retry') o.onRetried();
  else o.onDropped(after);
  return after;
}

/**
 * `GET /actions` (the outbox's actions and counts), `POST /actions/{id}/retry` (a dead action goes
 * out again) and `DELETE /actions/{id}` (a pending or dead action is dropped): operator endpoints;
 * retry and drop need the admin role and are audited before they are made.
 */
export function actionsRoutes(o: OutboxControls): RouteMount {
  const { store } = o;
  return {
    surface: 'operator',
    routes: [ACTIONS_ROUTE, RETRY_ACTION_ROUTE, DROP_ACTION_ROUTE],
    mount(app, edge) {
      const audited =
        (c: Context, action: 'action.retry' | 'action.drop', id: string) => (entry: OutboxEntry) =>
          edge.recordChange(c, {
            action,
            target: id,
            detail: { type: entry.spec.type, status: entry.status },
          });
      ACTIONS_ROUTE.mount(app, edge.operatorAuth, async (c) => {
        const query = ACTIONS_ROUTE.queryOf(c);
        const [entries, stats] = await fromOutboxStore(
          Promise.all([store.list({ status: query.status, limit: query.limit }), store.stats(Date.now())]),
        );
        return c.json({ ...stats, actions: entries.map(outboxEntryView) });
      });
      RETRY_ACTION_ROUTE.mount(app, edge.operatorAuth, edge.requireRole('admin'), async (c) => {
        const { id } = RETRY_ACTION_ROUTE.pathOf(c);
        return c.json(outboxEntryView(await changeAction(o, 'retry', id, audited(c, 'action.retry', id))));
      });
      DROP_ACTION_ROUTE.mount(app, edge.operatorAuth, edge.requireRole('admin'), async (c) => {
        const { id } = DROP_ACTION_ROUTE.pathOf(c);
        return c.json(outboxEntryView(await changeAction(o, 'drop', id, audited(c, 'action.drop', id))));
      });
    },
  };
}
