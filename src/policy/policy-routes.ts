import { z } from 'zod';
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
      app.post('/policies/reload', edge.operatorAuth, edge.requireRole('admin'), async (c) => {
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
