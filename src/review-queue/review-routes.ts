import type { Context } from 'hono';
import { z } from 'zod';
import type { RouteEdge, RouteMount } from '../lifecycle/component.ts';
import { unlockRequestSchema } from '../lockouts/lockout-routes.ts';
import {
  dispositionSchema,
  MAX_REVIEW_BODY_BYTES,
  noteSchema,
  openCaseSchema,
  reviewQuerySchema,
} from './review-api.ts';
import type { ReviewOperations } from './review-operations.ts';

/**
 * The review queue's operator endpoints: `GET /review/cases` (a view: open, claimed, closed,
 * mine, overdue), `POST /review/claim-next`, `GET /review/cases/{id}`, `POST /review/cases` (by
 * hand), `POST /review/cases/{id}/disposition`, `POST /review/cases/{id}/notes` and
 * `POST /review/cases/{id}/unlock`. Reads take any operator; a change an analyst (an unlock an
 * admin, as `POST /lockouts/{id}/unlock`).
 */

const casePathSchema = z.object({ id: z.uuid() });

/** The case id of `c`'s path (400 naming `id` when it is not one). */
function caseIdOf(c: Context, edge: Pick<RouteEdge, 'inputError'>): string {
  const path = casePathSchema.safeParse({ id: c.req.param('id') });
  if (!path.success) throw edge.inputError(path.error, 'The path');
  return path.data.id;
}

export function reviewRoutes(operations: ReviewOperations): RouteMount {
  return {
    surface: 'operator',
    mount(app, edge) {
      const analyst = edge.requireRole('analyst');
      const viewer = edge.requireRole('viewer');
      const body = edge.limitBody(MAX_REVIEW_BODY_BYTES);
      app.get('/review/cases', edge.operatorAuth, viewer, async (c) => {
        const query = reviewQuerySchema.safeParse(c.req.query());
        if (!query.success) throw edge.inputError(query.error, 'The query');
        return c.json(await operations.list(c, query.data.view, query.data.limit));
      });
      app.post('/review/cases', edge.operatorAuth, analyst, body, async (c) => {
        const input = await edge.readJsonBody(c, openCaseSchema);
        const { opened, reviewCase } = await operations.open(c, edge, input);
        return c.json(reviewCase, opened ? 201 : 200);
      });
      app.post('/review/claim-next', edge.operatorAuth, analyst, body, async (c) => {
        return c.json({ claimed: await operations.claimNext(c, edge) });
      });
      app.get('/review/cases/:id', edge.operatorAuth, viewer, async (c) => {
        return c.json(await operations.get(caseIdOf(c, edge)));
      });
      app.post('/review/cases/:id/disposition', edge.operatorAuth, analyst, body, async (c) => {
        const id = caseIdOf(c, edge);
        const input = await edge.readJsonBody(c, dispositionSchema);
        return c.json(await operations.dispose(c, edge, id, input));
      });
      app.post('/review/cases/:id/notes', edge.operatorAuth, analyst, body, async (c) => {
        const id = caseIdOf(c, edge);
        const { text } = await edge.readJsonBody(c, noteSchema);
        return c.json(await operations.note(c, edge, id, text), 201);
      });
      app.post('/review/cases/:id/unlock', edge.operatorAuth, edge.requireRole('admin'), body, async (c) => {
        const id = caseIdOf(c, edge);
        const { reason } = await edge.readJsonBody(c, unlockRequestSchema);
        return c.json(await operations.unlock(c, edge, id, reason), 202);
      });
    },
  };
}
