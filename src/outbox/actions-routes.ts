import type { Context } from 'hono';
import { z } from 'zod';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { RouteEdge, RouteMount } from '../lifecycle/component.ts';
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
const actionPathSchema = z.object({ id: storableLine().min(1).max(600) });

function actionIdOf(c: Context, edge: RouteEdge): string {
  const path = actionPathSchema.safeParse({ id: c.req.param('id') });
  if (!path.success) throw edge.inputError(path.error, 'The path');
  return path.data.id;
}

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
    mount(app, edge) {
      const audited =
        (c: Context, action: 'action.retry' | 'action.drop', id: string) => (entry: OutboxEntry) =>
          edge.recordChange(c, {
            action,
            target: id,
            detail: { type: entry.spec.type, status: entry.status },
          });
      app.get('/actions', edge.operatorAuth, async (c) => {
        const query = actionsQuerySchema.safeParse(c.req.query());
        if (!query.success) throw edge.inputError(query.error, 'The query');
        const [entries, stats] = await fromOutboxStore(
          Promise.all([
            store.list({ status: query.data.status, limit: query.data.limit }),
            store.stats(Date.now()),
          ]),
        );
        return c.json({ ...stats, actions: entries.map(outboxEntryView) });
      });
      app.post('/actions/:id/retry', edge.operatorAuth, edge.requireRole('admin'), async (c) => {
        const id = actionIdOf(c, edge);
        return c.json(outboxEntryView(await changeAction(o, 'retry', id, audited(c, 'action.retry', id))));
      });
      app.delete('/actions/:id', edge.operatorAuth, edge.requireRole('admin'), async (c) => {
        const id = actionIdOf(c, edge);
        return c.json(outboxEntryView(await changeAction(o, 'drop', id, audited(c, 'action.drop', id))));
      });
    },
  };
}
