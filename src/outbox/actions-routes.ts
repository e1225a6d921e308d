import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import type { OutboxEntry, OutboxStore } from './outbox-store.ts';
import { actionsQuerySchema, fromOutboxStore, outboxEntryView } from './outbox-view.ts';

function actionNotFound(id: string, state: string): RiskgateError {
  return new RiskgateError(
    ErrorCode.NOT_FOUND,
    `No ${state} action with id ${JSON.stringify(id.slice(0, 200))}.`,
  );
}

/** What an operator's retry or drop needs: the outbox's store and what to tell the outbox. */
export interface OutboxControls {
  store: OutboxStore;
  /** Told when an operator drops an action: its final `action` line. */
  onDropped: (entry: OutboxEntry) => void;
  /** Told when an operator retries a dead action (the outbox delivers it now). */
  onRetried: () => void;
}

/** An operator's retry of a dead (or dropped) action: it goes out again now. 404 when none such. */
export async function retryAction(o: OutboxControls, id: string): Promise<OutboxEntry> {
  if (!(await fromOutboxStore(o.store.retry(id, Date.now())))) throw actionNotFound(id, 'dead or dropped');
  o.onRetried();
  return (await fromOutboxStore(o.store.get(id)))!;
}

/** An operator's drop of a pending or dead action: never delivered. 404 when none such. */
export async function dropAction(o: OutboxControls, id: string): Promise<OutboxEntry> {
  if (!(await fromOutboxStore(o.store.drop(id, 'dropped_by_operator', Date.now()))))
    throw actionNotFound(id, 'pending or dead');
  const entry = (await fromOutboxStore(o.store.get(id)))!;
  o.onDropped(entry);
  return entry;
}

/**
 * `GET /actions` (the outbox's actions and counts), `POST /actions/{id}/retry` (a dead action goes
 * out again) and `DELETE /actions/{id}` (a pending or dead action is dropped): operator endpoints.
 */
export function actionsRoutes(o: OutboxControls): RouteMount {
  const { store } = o;
  return {
    surface: 'operator',
    mount(app, edge) {
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
      app.post('/actions/:id/retry', edge.operatorAuth, async (c) => {
        return c.json(outboxEntryView(await retryAction(o, c.req.param('id'))));
      });
      app.delete('/actions/:id', edge.operatorAuth, async (c) => {
        return c.json(outboxEntryView(await dropAction(o, c.req.param('id'))));
      });
    },
  };
}
