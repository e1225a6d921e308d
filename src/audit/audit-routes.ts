import { z } from 'zod';
import type { RiskgateDatabase } from '../database/database.ts';
import { declareRoute, QUERY_RULE_NOTE } from '../edge/route-declaration.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { Component, MetricsRegistry, RouteMount } from '../lifecycle/component.ts';
import { AUDIT_ACTIONS, AUDIT_OUTCOMES, type AuditTrail } from '../operators/audit-trail.ts';
import { OPERATOR_ROLES } from '../operators/operator.ts';
import { storableLine } from '../text/storable-text.ts';
import type { Clock } from '../timing/clock.ts';
import { AUDIT_ID, AUDIT_PAGE_DEFAULT, AUDIT_PAGE_MAX, databaseAuditTrail } from './database-audit-trail.ts';

/** `GET /audit`'s query. */
export const auditQuerySchema = z.object({
  actor: storableLine().min(1).max(200).optional().describe('Only this operator’s entries (their name).'),
  action: z.enum(AUDIT_ACTIONS).optional().describe('Only this kind of change.'),
  target: storableLine()
    .min(1)
    .max(500)
    .optional()
    .describe('Only changes to this (a decisionId, an action id, ...).'),
  cursor: z
    .string()
    .regex(AUDIT_ID, 'must be a nextCursor from a previous page')
    .optional()
    .describe('The previous page’s `nextCursor`: the entries before it.'),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(AUDIT_PAGE_MAX)
    .default(AUDIT_PAGE_DEFAULT)
    .describe(`Most entries (default ${AUDIT_PAGE_DEFAULT}, at most ${AUDIT_PAGE_MAX}).`),
});

export const auditEntrySchema = z.object({
  id: z.string().describe('Unique; sorts by time.'),
  at: z.iso.datetime().describe('When, RFC 3339 with milliseconds.'),
  actor: z.string().describe('The operator’s name.'),
  role: z.enum(OPERATOR_ROLES),
  keyId: z.string().describe('The operator key’s id, or `sso` (a trusted proxy’s identity): never a key.'),
  action: z.enum(AUDIT_ACTIONS),
  target: z.string().describe('What it was done to: a decisionId, an action id, a policy name.'),
  from: z.string().describe('The client’s address (behind a trusted proxy, the one it saw).'),
  detail: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('A label and note, a reason: never a secret.'),
  outcome: z
    .union([
      z.object({
        status: z.enum(AUDIT_OUTCOMES),
        code: z.string().optional().describe('The `RG_ERR_*` code of a failure or refusal.'),
        at: z.iso.datetime().describe('When the outcome was written.'),
      }),
      z.object({ status: z.literal('unknown') }),
    ])
    .describe(
      'What became of the change: `done`, `failed` (riskgate could not make it) or `refused` (not possible, e.g. gone meanwhile), with its code; `unknown` when no outcome was recorded (still in progress, or the process stopped in between): the entry is the intent, not proof the change was made.',
    ),
});

export const auditPageSchema = z.object({
  entries: z.array(auditEntrySchema).describe('Newest first.'),
  nextCursor: z
    .string()
    .optional()
    .describe('Pass as `cursor` for the next (older) page; absent on the last.'),
});

/** A failure of the audit trail's database, as the 503 it is answered with. */
export function auditUnavailable(message: string, cause?: unknown): RiskgateError {
  return new RiskgateError(ErrorCode.AUDIT_UNAVAILABLE, message, { cause });
}

export const AUDIT_ROUTE = declareRoute({
  method: 'get',
  path: '/audit',
  surface: 'operator',
  operationId: 'listAudit',
  summary: 'The audit trail: every change operators made, newest first',
  description:
    'Who (name, role, key id or `sso`), what, to what, when and from where; filtered by actor, action or target, paged with `cursor`.',
  query: auditQuerySchema,
  responses: { 200: { description: 'A page of entries, newest first.', schema: 'AuditPage' } },
  problems: {
    [ErrorCode.INVALID_INPUT]: QUERY_RULE_NOTE,
    [ErrorCode.AUDIT_UNAVAILABLE]: 'The audit trail’s database did not answer.',
  },
});

/** `GET /audit`: the audit trail, newest first, filtered and paged (operator surface, any role). */
export function auditRoutes(audit: AuditTrail): RouteMount {
  return {
    surface: 'operator',
    routes: [AUDIT_ROUTE],
    mount(app, edge) {
      AUDIT_ROUTE.mount(app, edge.operatorAuth, edge.requireRole('viewer'), async (c) => {
        const page = await audit.list(AUDIT_ROUTE.queryOf(c)).catch((error: unknown) => {
          throw auditUnavailable('The audit trail’s database did not answer.', error);
        });
        return c.json(page);
      });
    },
  };
}

/**
 * The audit trail as a component, over the database (after it in the start order): its handle is
 * what the routes record changes in (src/audit/record-change.ts); mounts `GET /audit`. Counts the
 * outcomes it could not write (`riskgate_audit_outcomes_lost_total`: those entries read unknown).
 */
export function auditComponent(o: {
  database: RiskgateDatabase;
  /** An audit trail instead of the database's (tests). */
  given?: AuditTrail | undefined;
  /** The service's clock. Default {@link systemClock}. */
  clock?: Clock | undefined;
}): Component<AuditTrail, MetricsRegistry> {
  return {
    name: 'audit trail',
    start() {
      const trail = o.given ?? databaseAuditTrail(o.database, { clock: o.clock });
      let outcomesLost = 0;
      const audit: AuditTrail = {
        record: (entry) => trail.record(entry),
        list: (filter) => trail.list(filter),
        settle: (id, outcome) =>
          trail.settle(id, outcome).catch((error: unknown) => {
            outcomesLost++;
            throw error;
          }),
      };
      return {
        handle: audit,
        routes: [auditRoutes(audit)],
        observe: (metrics) =>
          metrics.observeCounter(
            'riskgate_audit_outcomes_lost',
            'Audited changes whose outcome could not be written (each also logged): their entries read unknown',
            () => outcomesLost,
          ),
      };
    },
  };
}
