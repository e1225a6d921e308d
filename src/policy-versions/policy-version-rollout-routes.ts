import type { Context, Hono } from 'hono';
import { z } from 'zod';
import { AUDITED_CHANGE, type CodeNotes, declareRoute } from '../edge/route-declaration.ts';
import { ErrorCode, InputError, RiskgateError } from '../errors/riskgate-error.ts';
import type { RouteEdge } from '../lifecycle/component.ts';
import { storeAnswer } from '../store/store-unavailable.ts';
import type { PolicyVersionStore } from './policy-version-store.ts';

/**
 * Staged and scheduled activation over the API (docs/policy-versions.md, "Staged and scheduled
 * activation over the API"): an approved version staged in shadow or to a percentage of accounts
 * (each account's bucket is stable, `rolloutBucket` in policy-version-sync.ts), or scheduled to be
 * activated at a time; each undone by its own call. An admin's, audited before it is made like
 * every step; the store refuses what the state does not allow (409).
 */

export const stagePolicyVersionSchema = z
  .object({
    percent: z
      .number()
      .gt(0)
      .lt(100)
      .multipleOf(0.01)
      .optional()
      .describe('The share of accounts served the version, above 0 and below 100 (0.01 steps).'),
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

const DATABASE: CodeNotes = {
  [ErrorCode.DATABASE_UNAVAILABLE]:
    'The policy versions database (RISKGATE_DATABASE) did not answer: down, refused or too slow.',
};
const NOTE =
  'An admin’s. Written to the audit trail before it is made (refused, 503, when it cannot be); every replica follows within about RISKGATE_POLICY_VERSION_POLL_MS.';
const idParams = z.object({ id: z.string().describe('The version’s id.') });
const BODY_PROBLEMS: CodeNotes = {
  [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'A body that is not JSON.',
  [ErrorCode.PAYLOAD_TOO_LARGE]: 'Body too large.',
};

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

const fromStore = <T>(work: Promise<T>) =>
  storeAnswer(work, ErrorCode.DATABASE_UNAVAILABLE, 'The policy versions database');

/** Mounts the rollout routes; `operatorOf` names the admin for the schedule. */
export function mountRolloutRoutes(
  app: Hono,
  edge: RouteEdge,
  store: PolicyVersionStore,
  operatorOf: (c: Context) => string,
): void {
  const admin = edge.requireRole('admin');
  const exists = async (id: string) => {
    const version = await fromStore(store.get(id));
    if (version === undefined) throw new RiskgateError(ErrorCode.NOT_FOUND, `No policy version ${id}.`);
    return version;
  };
  STAGE_POLICY_VERSION_ROUTE.mount(app, edge.operatorAuth, admin, async (c) => {
    const target = await exists(STAGE_POLICY_VERSION_ROUTE.pathOf(c).id);
    const body = await STAGE_POLICY_VERSION_ROUTE.bodyOf(c);
    const rollout =
      body.percent === undefined
        ? ({ stage: 'shadow' } as const)
        : { stage: 'percent' as const, percent: body.percent };
    await edge.recordChange(c, {
      action: 'policy.stage',
      target: target.id,
      detail: { ...rollout, revision: target.revision },
    });
    const staged = await fromStore(store.stage(target.id, rollout));
    return c.json({ versionId: staged.version.id, stage: staged.stage, percent: staged.basisPoints / 100 });
  });
  UNSTAGE_POLICY_VERSION_ROUTE.mount(app, edge.operatorAuth, admin, async (c) => {
    await edge.recordChange(c, { action: 'policy.unstage', target: 'staged', detail: {} });
    await fromStore(store.unstage());
    return c.body(null, 204);
  });
  SCHEDULE_POLICY_VERSION_ROUTE.mount(app, edge.operatorAuth, admin, async (c) => {
    const target = await exists(SCHEDULE_POLICY_VERSION_ROUTE.pathOf(c).id);
    const { at } = await SCHEDULE_POLICY_VERSION_ROUTE.bodyOf(c);
    const atMs = Date.parse(at);
    await edge.recordChange(c, {
      action: 'policy.schedule',
      target: target.id,
      detail: { at, revision: target.revision },
    });
    try {
      const scheduled = await fromStore(store.schedule(target.id, atMs, operatorOf(c)));
      return c.json({
        versionId: scheduled.versionId,
        at: new Date(scheduled.atMs).toISOString(),
        by: scheduled.by,
      });
    } catch (e) {
      if (e instanceof RiskgateError && e.code === ErrorCode.INVALID_INPUT && !(e instanceof InputError))
        throw new InputError(e.message, [{ field: 'at', message: 'must be in the future' }]);
      throw e;
    }
  });
  UNSCHEDULE_POLICY_VERSION_ROUTE.mount(app, edge.operatorAuth, admin, async (c) => {
    await edge.recordChange(c, { action: 'policy.unschedule', target: 'scheduled', detail: {} });
    await fromStore(store.unschedule());
    return c.body(null, 204);
  });
}
