import type { Context } from 'hono';
import { matchedRoutes } from 'hono/route';

/** Key of a request that matched no handler. */
export const UNMATCHED_ROUTE = '(unmatched)';

/**
 * `<METHOD> <route pattern>` of the handler a request is routed to, e.g.
 * `GET /srv/admin/v1/users/:user_id`; the key of stats and fault rules. Middleware (registered with
 * `use`, method `ALL`) is skipped so the key names the endpoint, not a catch-all in front of it.
 */
export function routeKeyOf(c: Context): string {
  const routes = matchedRoutes(c);
  for (let i = routes.length - 1; i >= 0; i--) {
    const r = routes[i]!;
    if (r.method !== 'ALL') return `${c.req.method} ${r.path}`;
  }
  return `${c.req.method} ${UNMATCHED_ROUTE}`;
}
