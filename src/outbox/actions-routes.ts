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

/**
 * `GET /actions` (the outbox's actions and counts), `POST /actions/{id}/retry` (a dead action goes
 * out again) and `DELETE /actions/{id}` (a pending or dead action is dropped): operator endpoints;
 * retry and drop need the admin role.
 */
export function actionsRoutes(o: {
  store: OutboxStore;
  /** Told when an operator drops an action: its final `action` line. */
  onDropped: (entry: OutboxEntry) => void;
  /** Told when an operator retries a dead action (the outbox delivers it now). */
  onRetried: () => void;
}): RouteMount {
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
      app.post('/actions/:id/retry', edge.operatorAuth, edge.requireRole('admin'), async (c) => {
        const id = c.req.param('id');
        if (!(await fromOutboxStore(store.retry(id, Date.now()))))
          throw actionNotFound(id, 'dead or dropped');
        o.onRetried();
        return c.json(outboxEntryView((await fromOutboxStore(store.get(id)))!));
      });
      app.delete('/actions/:id', edge.operatorAuth, edge.requireRole('admin'), async (c) => {
        const id = c.req.param('id');
        if (!(await fromOutboxStore(store.drop(id, 'dropped_by_operator', Date.now()))))
          throw actionNotFound(id, 'pending or dead');
        const entry = (await fromOutboxStore(store.get(id)))!;
        o.onDropped(entry);
        return c.json(outboxEntryView(entry));
      });
    },
  };
}
