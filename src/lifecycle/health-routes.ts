import type { RouteMount } from './component.ts';

/**
 * `GET /healthz` and `GET /readyz`, open on every surface. Liveness: the process answers; the
 * vendor's state is detail, never a reason to restart. Readiness: this process can answer /decide
 * (every component's checks: a policy is loaded, not shutting down, ...). The vendor is not a
 * check: every replica shares it, and failing them all at once would turn a degraded service
 * (outage mode, onUnavailable) into no service.
 */
export function healthRoutes(o: {
  health: () => Record<string, unknown>;
  readiness: () => { ready: boolean; checks: Record<string, boolean> };
}): RouteMount {
  return {
    surface: 'every',
    mount(app) {
      app.get('/healthz', (c) => c.json({ status: 'ok', ...o.health() }));
      app.get('/readyz', (c) => {
        const { ready, checks } = o.readiness();
        return c.json({ ready, checks }, ready ? 200 : 503);
      });
    },
  };
}
