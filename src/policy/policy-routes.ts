import { z } from 'zod';
import { AUDITED_CHANGE, declareRoute } from '../edge/route-declaration.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import type { ReloadOutcome } from './policy-store.ts';
import type { RuleStats } from './rule-stats.ts';

/** `POST /policies/reload`'s answer. */
export const policyReloadSchema = z.object({
  ok: z.boolean().describe('Whether the files loaded; false: the last good policy stays live.'),
  changed: z.boolean().describe('Whether the revision moved.'),
  revision: z.string().describe('The live revision after the reload.'),
  error: z
    .string()
    .optional()
    .describe('Why the files were refused (also in `GET /policies` as `lastError`).'),
});

export const POLICIES_ROUTE = declareRoute({
  method: 'get',
  path: '/policies',
  surface: 'operator',
  operationId: 'policies',
  summary: 'The active policy (and the shadow one)',
  responses: {
    200: {
      description: 'Name, revision, when loaded, its files, reload counts, warnings, the last refused edit.',
      schema: 'Policies',
    },
  },
});

export const POLICY_RELOAD_ROUTE = declareRoute({
  method: 'post',
  path: '/policies/reload',
  surface: 'operator',
  operationId: 'reloadPolicy',
  summary: 'Load the policy files now (the admin role; audited)',
  description:
    'The watcher reloads on its own; this is for a change it cannot see. Recorded in the audit trail before the reload.',
  responses: {
    200: {
      description:
        'The outcome: the new revision, or why the files were refused (the last good policy stays live).',
      schema: 'PolicyReload',
    },
  },
  problems: AUDITED_CHANGE,
});

export const POLICY_STATS_ROUTE = declareRoute({
  method: 'get',
  path: '/policies/stats',
  surface: 'operator',
  operationId: 'policyStats',
  summary: 'Rule hit counts on live traffic, per revision',
  responses: {
    200: {
      description: 'Since start, the last few revisions of the active and the shadow policy.',
      schema: 'RuleStats',
    },
  },
});

/**
 * `GET /policies` (the active policy's revision, path and reload errors, and the shadow's),
 * `GET /policies/stats` (rule hit counts): operator endpoints; `POST /policies/reload` (load the
 * files now rather than on the watcher's next look): the admin role, audited before it is made.
 */
export function policyRoutes(o: {
  policies: { status(): { name: string }; reload(): Promise<ReloadOutcome> };
  shadowStatus?: (() => object) | undefined;
  ruleStats?: RuleStats | undefined;
}): RouteMount {
  return {
    surface: 'operator',
    routes: [POLICIES_ROUTE, POLICY_RELOAD_ROUTE, POLICY_STATS_ROUTE],
    mount(app, edge) {
      POLICIES_ROUTE.mount(app, edge.operatorAuth, (c) =>
        c.json({
          ...o.policies.status(),
          ...(o.shadowStatus !== undefined && { shadow: o.shadowStatus() }),
        }),
      );
      POLICY_STATS_ROUTE.mount(app, edge.operatorAuth, (c) =>
        c.json({ revisions: o.ruleStats?.snapshot() ?? [] }),
      );
      POLICY_RELOAD_ROUTE.mount(app, edge.operatorAuth, edge.requireRole('admin'), async (c) => {
        await edge.recordChange(c, { action: 'policy.reload', target: o.policies.status().name });
        const outcome = await o.policies.reload();
        // Answered 200 either way: the audit trail must not call a failed reload done.
        if (!outcome.ok) edge.changeOutcome(c, { status: 'failed', code: ErrorCode.INVALID_POLICY });
        return c.json(
          outcome.ok
            ? { ok: true, changed: outcome.changed, revision: outcome.revision }
            : { ok: false, changed: false, revision: outcome.revision, error: outcome.error.message },
        );
      });
    },
  };
}
