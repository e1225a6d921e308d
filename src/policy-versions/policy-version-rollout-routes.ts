import type { Hono } from 'hono';
import { z } from 'zod';
import {
  AUDITED_CHANGE,
  declareRoute,
  jsonBodyProblems,
  storeUnavailableNote,
} from '../edge/route-declaration.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { RouteEdge } from '../lifecycle/component.ts';
import { POLICY_VERSIONS_STORE, type PolicyVersionOperations } from './policy-version-operations.ts';
import type { RolloutRequest } from './policy-version-store.ts';

/**
 * Staged and scheduled activation over the API (docs/policy-versions.md, "Staged and scheduled
 * activation over the API"): an approved version staged in shadow or to a percentage of accounts
 * (each account's bucket is stable, `rolloutBucket` in policy-version-sync.ts), or scheduled to be
 * activated at a time; each undone by its own call. An admin's, made by `PolicyVersionOperations`
 * like every step (audited once, before it is made); the store refuses what the state does not
 * allow (409).
 */

/** A rollout's share of accounts, percent: above 0 and below 100, in 0.01 steps (basis points). */
export const ROLLOUT_PERCENT = z.number().gt(0).lt(100).multipleOf(0.01);

export const stagePolicyVersionSchema = z
  .object({
    percent: ROLLOUT_PERCENT.optional().describe(
      'The share of accounts served the version, above 0 and below 100 (0.01 steps).',
    ),
    shadow: z
      .literal(true)
      .optional()
      .describe('Evaluated beside the active version on every login, never served.'),
  })
  .strict()
  .superRefine((v, ctx) => {
    if ((v.percent === undefined) === (v.shadow === undefined))
      ctx.addIssue({ code: 'custom', path: ['percent'], message: 'give either percent or shadow: true' });
  });

export const schedulePolicyVersionSchema = z
  .object({ at: z.iso.datetime({ offset: true }).describe('When to activate it (RFC 3339, in the future).') })
  .strict();

export const policyRolloutSchema = z
  .object({
    versionId: z.string(),
    stage: z.enum(['shadow', 'percent']),
    percent: z.number().describe('The share of accounts served the staged version (0 in shadow).'),
  })
  .strict();

export const policyScheduleSchema = z
  .object({
    versionId: z.string(),
    at: z.string().describe('RFC 3339.'),
    by: z.string().describe('The admin in whose name it will be activated.'),
  })
  .strict();

const DATABASE = storeUnavailableNote(POLICY_VERSIONS_STORE);
const NOTE =
  'An admin’s. Written to the audit trail before it is made (refused, 503, when it cannot be); every replica follows within about RISKGATE_POLICY_VERSION_POLL_MS.';
const idParams = z.object({ id: z.string().describe('The version’s id.') });
const BODY_PROBLEMS = jsonBodyProblems();

export const STAGE_POLICY_VERSION_ROUTE = declareRoute({
  method: 'post',
  path: '/policy-versions/{id}/stage',
  surface: 'operator',
  operationId: 'stagePolicyVersion',
  summary: 'Roll an approved version out in shadow or to a percentage of accounts',
  description: `${NOTE} Moving the staged version to another stage is the same call; activating it ends the stage.`,
  params: idParams,
  body: { schema: { component: 'StagePolicyVersion', schema: stagePolicyVersionSchema }, maxBytes: 1024 },
  responses: { 200: { description: 'The rollout.', schema: 'PolicyRollout' } },
  problems: {
    ...DATABASE,
    ...AUDITED_CHANGE,
    ...BODY_PROBLEMS,
    [ErrorCode.NOT_FOUND]: 'No such version.',
    [ErrorCode.POLICY_VERSION_CONFLICT]: 'The version is not approved, or another version is staged.',
    [ErrorCode.INVALID_INPUT]: 'A percent outside (0, 100), or neither percent nor shadow; `field` names it.',
  },
});

export const UNSTAGE_POLICY_VERSION_ROUTE = declareRoute({
  method: 'post',
  path: '/policy-versions/unstage',
  surface: 'operator',
  operationId: 'unstagePolicyVersion',
  summary: 'End the rollout of the staged version (it stays approved)',
  description: NOTE,
  responses: { 204: { description: 'Ended.' } },
  problems: { ...DATABASE, ...AUDITED_CHANGE, [ErrorCode.POLICY_VERSION_CONFLICT]: 'No version is staged.' },
});

export const SCHEDULE_POLICY_VERSION_ROUTE = declareRoute({
  method: 'post',
  path: '/policy-versions/{id}/schedule',
  surface: 'operator',
  operationId: 'schedulePolicyVersion',
  summary: 'Activate an approved version at a time',
  description: `${NOTE} One schedule at a time: a new one replaces the previous. The first replica to poll after the time activates it, in the scheduling admin’s name.`,
  params: idParams,
  body: {
    schema: { component: 'SchedulePolicyVersion', schema: schedulePolicyVersionSchema },
    maxBytes: 1024,
  },
  responses: { 200: { description: 'The scheduled activation.', schema: 'PolicySchedule' } },
  problems: {
    ...DATABASE,
    ...AUDITED_CHANGE,
    ...BODY_PROBLEMS,
    [ErrorCode.NOT_FOUND]: 'No such version.',
    [ErrorCode.POLICY_VERSION_CONFLICT]: 'The version is not approved.',
    [ErrorCode.INVALID_INPUT]: 'A time that is not RFC 3339 or not in the future (`field`: at).',
  },
});

export const UNSCHEDULE_POLICY_VERSION_ROUTE = declareRoute({
  method: 'post',
  path: '/policy-versions/unschedule',
  surface: 'operator',
  operationId: 'unschedulePolicyVersion',
  summary: 'Cancel the scheduled activation',
  description: NOTE,
  responses: { 204: { description: 'Cancelled.' } },
  problems: {
    ...DATABASE,
    ...AUDITED_CHANGE,
    [ErrorCode.POLICY_VERSION_CONFLICT]: 'No activation is scheduled.',
  },
});

export const POLICY_ROLLOUT_ROUTES = [
  STAGE_POLICY_VERSION_ROUTE,
  UNSTAGE_POLICY_VERSION_ROUTE,
  SCHEDULE_POLICY_VERSION_ROUTE,
  UNSCHEDULE_POLICY_VERSION_ROUTE,
];

/** Mounts the rollout routes: each change made by `operations`, as the console's and the CLI's are. */
export function mountRolloutRoutes(app: Hono, edge: RouteEdge, operations: PolicyVersionOperations): void {
  const admin = [edge.operatorAuth, edge.requireRole('admin')];
  STAGE_POLICY_VERSION_ROUTE.serve(app, admin, 200, async (c, { id }, body) => {
    const rollout: RolloutRequest =
      body.percent === undefined ? { stage: 'shadow' } : { stage: 'percent', percent: body.percent };
    const staged = await operations.stage(c, edge, id, rollout);
    return { versionId: staged.version.id, stage: staged.stage, percent: staged.basisPoints / 100 };
  });
  UNSTAGE_POLICY_VERSION_ROUTE.serve(app, admin, 204, (c) => operations.unstage(c, edge));
  SCHEDULE_POLICY_VERSION_ROUTE.serve(app, admin, 200, async (c, { id }, { at }) => {
    const scheduled = await operations.schedule(c, edge, id, Date.parse(at));
    return { versionId: scheduled.versionId, at: new Date(scheduled.atMs).toISOString(), by: scheduled.by };
  });
  UNSCHEDULE_POLICY_VERSION_ROUTE.serve(app, admin, 204, (c) => operations.unschedule(c, edge));
}
