import type { Context } from 'hono';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import type { OutboxEntry, OutboxStatus, OutboxStore } from './outbox-store.ts';
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
 * retry and drop need the admin role and are audited before they are made.
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
      /**
       * A change is audited before it is made (a change that cannot be audited is refused): an id
       * the change cannot apply to is a 404 first, so the trail holds no change that was never
       * possible. (Another operator changing the entry in between leaves an entry for a change
       * that then answered 404.)
       */
      const auditFirst = async (
        c: Context,
        action: 'action.retry' | 'action.drop',
        id: string,
        from: readonly OutboxStatus[],
        state: string,
      ): Promise<void> => {
        const entry = await fromOutboxStore(store.get(id));
        if (entry === undefined || !from.includes(entry.status)) throw actionNotFound(id, state);
        await edge.recordChange(c, {
          action,
          target: id,
          detail: { type: entry.spec.type, status: entry.status },
        });
      };
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
        await auditFirst(c, 'action.retry', id, ['dead', 'dropped'], 'dead or dropped');
        if (!(await fromOutboxStore(store.retry(id, Date.now()))))
          throw actionNotFound(id, 'dead or dropped');
        o.onRetried();
        return c.json(outboxEntryView((await fromOutboxStore(store.get(id)))!));
      });
      app.delete('/actions/:id', edge.operatorAuth, edge.requireRole('admin'), async (c) => {
        const id = c.req.param('id');
        await auditFirst(c, 'action.drop', id, ['pending', 'dead'], 'pending or dead');
        if (!(await fromOutboxStore(store.drop(id, 'dropped_by_operator', Date.now()))))
          throw actionNotFound(id, 'pending or dead');
        const entry = (await fromOutboxStore(store.get(id)))!;
        o.onDropped(entry);
        return c.json(outboxEntryView(entry));
      });
    },
  };
}
