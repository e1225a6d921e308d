import { z } from 'zod';
import { MAX_BACKTEST_WINDOW_HOURS } from '../config/settings.ts';
import {
  AUDITED_CHANGE,
  declareRoute,
  jsonBodyProblems,
  QUERY_RULE_NOTE,
  storeUnavailableNote,
} from '../edge/route-declaration.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import type { InputTable } from '../policy/inputs/input-row.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { EvidenceWindow } from './policy-version-evidence-store.ts';
import {
  POLICY_VERSION_STEP_ACTIONS,
  POLICY_VERSIONS_STORE,
  type PolicyVersionOperations,
  policyVersionOperations,
} from './policy-version-operations.ts';
import { mountRolloutRoutes, POLICY_ROLLOUT_ROUTES } from './policy-version-rollout-routes.ts';
import type { PolicyVersion, PolicyVersionStep, PolicyVersionStore } from './policy-version-store.ts';
import { POLICY_VERSION_STATES } from './policy-version-tables.ts';

/**
 * The operator API of the policy versions (docs/policy-versions.md): read by any operator; a draft
 * made, moved along the promotion flow or reverted by an admin. Each change is written to the audit
 * trail before it is made (`edge.recordChange`: refused, 503, when it cannot be). A version's
 * content is never changed: PUT, PATCH and DELETE answer 405. Approval by the version's author is
 * refused by the store (four eyes, RG_ERR_POLICY_SELF_APPROVAL); a step from the wrong state is a
 * 409 (RG_ERR_POLICY_VERSION_CONFLICT), as when another admin moved it first.
 */

/** Largest policy YAML a draft may carry, bytes (the shipped policy is ~10 KB). */
export const MAX_POLICY_VERSION_BODY_BYTES = 256 * 1024;

export const newPolicyVersionSchema = z
  .object({
    yaml: z
      .string()
      .min(1)
      .max(MAX_POLICY_VERSION_BODY_BYTES)
      .describe('The policy, as a YAML file holds it.'),
    message: z.string().min(1).max(500).describe('Why: shown beside the version, like a commit message.'),
  })
  .strict();

export const revertPolicyVersionSchema = z
  .object({ message: z.string().min(1).max(500).describe('Why the earlier version comes back.') })
  .strict();

/** Longest backtest window a proposal may ask for, hours (31 days). */
export const MAX_EVIDENCE_WINDOW_HOURS = MAX_BACKTEST_WINDOW_HOURS;
const HOUR_MS = 3_600_000;

export const proposePolicyVersionSchema = z
  .object({
    windowHours: z
      .number()
      .int()
      .min(1)
      .max(MAX_EVIDENCE_WINDOW_HOURS)
      .optional()
      .describe(
        'The backtest replays the stored decisions of the last this many hours. Default RISKGATE_BACKTEST_WINDOW_HOURS (24).',
      ),
    from: z.iso
      .datetime({ offset: true })
      .optional()
      .describe('The backtest window’s start (RFC 3339), with `to`.'),
    to: z.iso
      .datetime({ offset: true })
      .optional()
      .describe('The backtest window’s end (RFC 3339, exclusive).'),
  })
  .strict()
  .superRefine((v, ctx) => {
    if ((v.from === undefined) !== (v.to === undefined))
      ctx.addIssue({
        code: 'custom',
        path: [v.from === undefined ? 'from' : 'to'],
        message: 'give from and to together',
      });
    else if (v.from !== undefined && v.windowHours !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['windowHours'],
        message: 'give windowHours or from and to, not both',
      });
    else if (v.from !== undefined && v.to !== undefined) {
      const span = Date.parse(v.to) - Date.parse(v.from);
      if (!(span > 0 && span <= MAX_EVIDENCE_WINDOW_HOURS * HOUR_MS))
        ctx.addIssue({
          code: 'custom',
          path: ['to'],
          message: `must be after from, at most ${MAX_EVIDENCE_WINDOW_HOURS} hours`,
        });
    }
  });

/** The window a proposal's backtest replays; undefined: the default (RISKGATE_BACKTEST_WINDOW_HOURS). */
function evidenceWindow(
  body: z.output<typeof proposePolicyVersionSchema>,
  nowMs: number,
): EvidenceWindow | undefined {
  if (body.from !== undefined && body.to !== undefined)
    return { fromMs: Date.parse(body.from), toMs: Date.parse(body.to) };
  if (body.windowHours === undefined) return undefined;
  return { fromMs: nowMs - body.windowHours * HOUR_MS, toMs: nowMs };
}

export const policyVersionEvidenceSchema = z
  .object({
    state: z.enum(['pending', 'complete', 'failed']).describe('Computed after the proposal; written once.'),
    window: z
      .object({ from: z.string(), to: z.string() })
      .strict()
      .describe('The backtest window, RFC 3339.'),
    requestedBy: z.string(),
    requestedAt: z.string(),
    completedAt: z.string().optional(),
    evidence: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('check, tests, backtest (docs/policy-versions.md, "The evidence").'),
    error: z.string().optional().describe('Why no evidence was written (failed).'),
  })
  .strict();

export const policyVersionListQuerySchema = z
  .object({
    limit: z.coerce.number().int().min(1).max(200).default(50),
    before: z.string().min(1).max(64).optional().describe('A version id: the page before it.'),
  })
  .strict();

/** A version as the API shows it. */
export const policyVersionSchema = z
  .object({
    id: z.string().describe('Time-ordered id.'),
    name: z.string().describe("The policy's `name`."),
    revision: z.string().describe('The content hash every decision served by it reports.'),
    author: z.string().describe('The operator who made it.'),
    createdAt: z.string().describe('RFC 3339.'),
    message: z.string(),
    parentId: z.string().nullable().describe('The version active when it was made.'),
    restoresId: z.string().nullable().describe('A revert: the earlier version whose YAML it carries.'),
    state: z.enum(POLICY_VERSION_STATES),
    stateChangedAt: z.string().describe('RFC 3339.'),
    stateChangedBy: z.string(),
    yaml: z.string().optional().describe('The policy (a single version only).'),
    evidence: policyVersionEvidenceSchema
      .nullable()
      .optional()
      .describe('The evidence attached on proposal (a single version only); null before one.'),
  })
  .strict();

export const policyVersionListSchema = z
  .object({ versions: z.array(policyVersionSchema).describe('Newest first, without their YAML.') })
  .strict();

/** A version as the API shows it: times as RFC 3339, the YAML only when asked for one. */
export function policyVersionView(v: PolicyVersion, withYaml: boolean): z.output<typeof policyVersionSchema> {
  return {
    id: v.id,
    name: v.name,
    revision: v.revision,
    author: v.author,
    createdAt: new Date(v.createdMs).toISOString(),
    message: v.message,
    parentId: v.parentId,
    restoresId: v.restoresId,
    state: v.state,
    stateChangedAt: new Date(v.stateChangedMs).toISOString(),
    stateChangedBy: v.stateChangedBy,
    ...(withYaml && { yaml: v.yaml }),
  };
}

const VERSIONS_DATABASE = storeUnavailableNote(POLICY_VERSIONS_STORE);
const VERSION_STEP_NOTE =
  'An admin’s. Written to the audit trail before it is made (refused, 503, when it cannot be). A version’s content never changes (PUT, PATCH and DELETE answer 405); its state moves draft → proposed → approved → active (or rejected, withdrawn), docs/policy-versions.md.';
const versionIdParams = z.object({ id: z.string().describe('The version’s id.') });

export const POLICY_VERSIONS_ROUTE = declareRoute({
  method: 'get',
  path: '/policy-versions',
  surface: 'operator',
  operationId: 'listPolicyVersions',
  summary: 'The policy versions, newest first',
  query: policyVersionListQuerySchema,
  responses: { 200: { description: 'A page of versions (without their YAML).', schema: 'PolicyVersions' } },
  problems: { ...VERSIONS_DATABASE, [ErrorCode.INVALID_INPUT]: QUERY_RULE_NOTE },
});

export const CREATE_POLICY_VERSION_ROUTE = declareRoute({
  method: 'post',
  path: '/policy-versions',
  surface: 'operator',
  operationId: 'createPolicyVersion',
  summary: 'Make a draft from a policy YAML (it must compile)',
  description: VERSION_STEP_NOTE,
  body: {
    schema: { component: 'NewPolicyVersion', schema: newPolicyVersionSchema },
    // The YAML's own limit is the schema's; the rest is room for the message and the JSON around them.
    maxBytes: MAX_POLICY_VERSION_BODY_BYTES + 4096,
  },
  responses: { 201: { description: 'The draft as kept.', schema: 'PolicyVersion' } },
  problems: {
    ...VERSIONS_DATABASE,
    ...AUDITED_CHANGE,
    [ErrorCode.INVALID_INPUT]:
      'A policy that does not compile (`field`: yaml, the detail says where and why), or a missing message.',
    ...jsonBodyProblems(),
  },
});

export const POLICY_VERSION_ROUTE = declareRoute({
  method: 'get',
  path: '/policy-versions/{id}',
  surface: 'operator',
  operationId: 'getPolicyVersion',
  summary: 'One policy version, with its YAML',
  params: versionIdParams,
  responses: { 200: { description: 'The version.', schema: 'PolicyVersion' } },
  problems: { ...VERSIONS_DATABASE, [ErrorCode.NOT_FOUND]: 'No such version.' },
});

export const REVERT_POLICY_VERSION_ROUTE = declareRoute({
  method: 'post',
  path: '/policy-versions/{id}/revert',
  surface: 'operator',
  operationId: 'revertPolicyVersion',
  summary: 'Make a new version carrying an earlier one’s YAML (history is never rewritten)',
  description: VERSION_STEP_NOTE,
  params: versionIdParams,
  body: { schema: { component: 'RevertPolicyVersion', schema: revertPolicyVersionSchema }, maxBytes: 4096 },
  responses: { 201: { description: 'The new version.', schema: 'PolicyVersion' } },
  problems: {
    ...VERSIONS_DATABASE,
    ...AUDITED_CHANGE,
    [ErrorCode.NOT_FOUND]: 'No such version.',
    [ErrorCode.POLICY_VERSION_CONFLICT]: 'The version cannot be restored from its state.',
    [ErrorCode.INVALID_INPUT]: 'A missing message; `field` names it.',
    [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'A body that is not JSON.',
  },
});

/** `POST /policy-versions/{id}/{step}`, one declaration per step of the promotion flow. */
export const POLICY_VERSION_STEP_ROUTES = (
  Object.keys(POLICY_VERSION_STEP_ACTIONS) as PolicyVersionStep[]
).map(
  (step) =>
    [
      step,
      declareRoute({
        method: 'post',
        path: `/policy-versions/{id}/${step}`,
        surface: 'operator',
        operationId: `${step}PolicyVersion`,
        summary: `${step[0]!.toUpperCase()}${step.slice(1)} a policy version`,
        description: `${VERSION_STEP_NOTE}${step === 'approve' ? ' The author cannot approve their own version (four eyes).' : ''}${step === 'activate' ? ' Every replica serves it within about RISKGATE_POLICY_VERSION_POLL_MS.' : ''}`,
        params: versionIdParams,
        ...(step === 'propose' && {
          body: {
            schema: { component: 'ProposePolicyVersion', schema: proposePolicyVersionSchema },
            required: false,
            maxBytes: 1024,
          },
        }),
        responses: { 200: { description: 'The version after the step.', schema: 'PolicyVersion' } },
        problems: {
          ...VERSIONS_DATABASE,
          ...AUDITED_CHANGE,
          [ErrorCode.NOT_FOUND]: 'No such version.',
          [ErrorCode.POLICY_VERSION_CONFLICT]: 'The version is not in a state this step starts from.',
          ...(step === 'approve' && {
            [ErrorCode.POLICY_SELF_APPROVAL]: 'The approving admin is the version’s author.',
          }),
        },
      }),
    ] as const,
);

/** Every policy-version route, in the order the document lists them. */
export const POLICY_VERSION_ROUTES = [
  POLICY_VERSIONS_ROUTE,
  CREATE_POLICY_VERSION_ROUTE,
  POLICY_VERSION_ROUTE,
  ...POLICY_VERSION_STEP_ROUTES.map(([, route]) => route),
  REVERT_POLICY_VERSION_ROUTE,
  ...POLICY_ROLLOUT_ROUTES,
];

export function policyVersionRoutes(
  o: {
    store: PolicyVersionStore;
    /** The input table a draft is compiled against before it is kept. Default: the built-in one. */
    inputs?: InputTable | undefined;
    /** Where a default backtest window ends (wall time). Default {@link systemClock}. */
    clock?: Clock | undefined;
  },
  operations: PolicyVersionOperations = policyVersionOperations(o),
): RouteMount {
  return {
    surface: 'operator',
    routes: POLICY_VERSION_ROUTES,
    mount(app, edge) {
      const admin = edge.requireRole('admin');
      const viewer = edge.requireRole('viewer');
      POLICY_VERSIONS_ROUTE.mount(app, edge.operatorAuth, viewer, async (c) => {
        const query = POLICY_VERSIONS_ROUTE.queryOf(c);
        const versions = await operations.list(query.limit, query.before);
        return c.json({ versions: versions.map((v) => policyVersionView(v, false)) });
      });
      POLICY_VERSION_ROUTE.mount(app, edge.operatorAuth, viewer, async (c) => {
        const version = await operations.get(POLICY_VERSION_ROUTE.pathOf(c).id);
        const evidence = await operations.evidence(version.id);
        return c.json({ ...policyVersionView(version, true), evidence: evidence ?? null });
      });
      CREATE_POLICY_VERSION_ROUTE.serve(app, [edge.operatorAuth, admin], 201, async (c, _, body) =>
        policyVersionView(await operations.create(c, edge, body), true),
      );
      REVERT_POLICY_VERSION_ROUTE.serve(
        app,
        [edge.operatorAuth, admin],
        201,
        async (c, { id }, { message }) =>
          policyVersionView(await operations.revert(c, edge, id, message), false),
      );
      for (const [step, route] of POLICY_VERSION_STEP_ROUTES) {
        route.mount(app, edge.operatorAuth, admin, async (c) => {
          const { id } = route.pathOf(c);
          // A proposal's body is optional (the backtest window); read before anything is recorded.
          const window =
            step === 'propose'
              ? evidenceWindow(
                  c.req.header('content-type') === undefined ? {} : await route.bodyOf(c),
                  (o.clock ?? systemClock).nowMs(),
                )
              : undefined;
          return c.json(policyVersionView(await operations.step(c, edge, id, step, window), false));
        });
      }
      mountRolloutRoutes(app, edge, operations);
    },
  };
}
