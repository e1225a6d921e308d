import type { RouteMount } from '../lifecycle/component.ts';
import type { RuleStats } from './rule-stats.ts';

/**
 * `GET /policies` (the active policy's revision, path and reload errors, and the shadow's) and
 * `GET /policies/stats` (rule hit counts): operator endpoints.
 */
export function policyRoutes(o: {
  policies: { status(): object };
  shadowStatus?: (() => object) | undefined;
  ruleStats?: RuleStats | undefined;
}): RouteMount {
  return {
    surface: 'operator',
    mount(app, edge) {
      app.get('/policies', edge.operatorAuth, (c) =>
        c.json({
          ...o.policies.status(),
          ...(o.shadowStatus !== undefined && { shadow: o.shadowStatus() }),
        }),
      );
      app.get('/policies/stats', edge.operatorAuth, (c) =>
        c.json({ revisions: o.ruleStats?.snapshot() ?? [] }),
      );
    },
  };
}
