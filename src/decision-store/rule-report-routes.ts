import { z } from 'zod';
import { declareRoute, QUERY_RULE_NOTE } from '../edge/route-declaration.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import { storeAnswer } from '../store/store-unavailable.ts';
import { MAX_REPORTED_REVISIONS } from './rule-history-query.ts';
import type { RuleReport, RuleReportReader } from './rule-report.ts';

/**
 * `GET /rules/report` (operators): each rule's quality on live traffic, from the decision store
 * (src/decision-store/rule-report-query.ts), for the console's Rules page and for scripts.
 */
/** The query of GET /rules/report: the history's scope. */
export const ruleReportQuerySchema = z.strictObject({
  revision: z
    .string()
    .regex(/^[\x21-\x7e]{1,128}$/, 'a revision: 1 to 128 printable characters')
    .optional()
    .describe(
      'One revision of the active policy’s name alone in `history` (an earlier one, say). Default: all.',
    ),
});

export const RULE_REPORT_ROUTE = declareRoute({
  method: 'get',
  path: '/rules/report',
  surface: 'operator',
  operationId: 'ruleReport',
  query: ruleReportQuerySchema,
  summary: 'Each rule’s quality on live traffic, from the decision store',
  description:
    'For the active and the shadow revision: decisions and each rule’s fires over 1 h, 24 h and 7 d, an hourly series, precision and recall against the current labels, the rules that never fired, and the active × shadow verdict agreement.',
  responses: {
    200: { description: 'The report, its windows ending at `generatedAt`.', schema: 'RuleReport' },
  },
  problems: {
    [ErrorCode.INVALID_INPUT]: QUERY_RULE_NOTE,
    [ErrorCode.DECISION_STORE_UNAVAILABLE]:
      'The decision store’s database (RISKGATE_DATABASE) did not answer: down, refused or too slow.',
  },
});

export function ruleReportRoutes(reader: RuleReportReader): RouteMount {
  return {
    surface: 'operator',
    routes: [RULE_REPORT_ROUTE],
    mount(app, edge) {
      RULE_REPORT_ROUTE.mount(app, edge.operatorAuth, async (c) =>
        c.json(await fromDecisionStore(reader.report(undefined, RULE_REPORT_ROUTE.queryOf(c)))),
      );
    },
  };
}

/** `work`, its failure the 503 `RG_ERR_DECISION_STORE_UNAVAILABLE` (src/store/store-unavailable.ts). */
const fromDecisionStore = <T>(work: Promise<T>) =>
  storeAnswer(work, ErrorCode.DECISION_STORE_UNAVAILABLE, 'The decision store');

const count = z.number().int().min(0);
const share = z.number().min(0).max(1);
const windows = <S extends z.ZodType>(schema: S) =>
  z
    .object({ h1: schema, h24: schema, d7: schema })
    .describe('The last hour, 24 hours and 7 days, ending now.');
const verdictCounts = z.object({ allow: count, challenge: count, deny: count });

const ruleQualitySchema = z.object({
  ruleId: z.string(),
  description: z.string().optional(),
  fires: windows(count).describe('Decisions of this revision the rule matched, per window.'),
  fireRate: windows(share).describe(
    '`fires` over the revision’s decisions in the same window (0 when none).',
  ),
  hourly: z.array(count).length(24).describe('Matches per hour over the last 24 h, oldest first.'),
  labelled: z
    .object({ truePositives: count, falsePositives: count, falseNegatives: count })
    .describe(
      'Over the last 7 d’s decisions with a current label: fired on fraud, fired on legit, missed fraud.',
    ),
  precision: share
    .optional()
    .describe('truePositives / (truePositives + falsePositives); absent with no labelled fire.'),
  recall: share
    .optional()
    .describe('truePositives / (truePositives + falseNegatives); absent with no fraud label.'),
  neverFired: z.boolean().describe('No match in the last 7 d.'),
});

const revisionReportSchema = z.object({
  policy: z.enum(['active', 'shadow']),
  name: z.string(),
  revision: z.string(),
  decisions: windows(count).describe('The revision’s decisions per window.'),
  rules: z
    .array(ruleQualitySchema)
    .describe(
      'Every rule of the revision in file order (those that never fired too), then `$internal-error` if it fired.',
    ),
});

const revisionMarkerSchema = z.object({
  revision: z.string(),
  firstDecisionAt: z.iso
    .datetime()
    .describe('Its first stored decision: when it became active, as far as the store knows.'),
  lastDecisionAt: z.iso.datetime().describe('Its last stored decision.'),
  decisions: windows(count).describe('Its decisions per window.'),
  current: z.boolean().describe('The active policy’s current revision.'),
  version: z
    .object({ id: z.string(), author: z.string(), message: z.string(), state: z.string() })
    .optional()
    .describe('The policy version carrying this revision, when one does.'),
});

const ruleAcrossRevisionsSchema = ruleQualitySchema.extend({
  status: z
    .enum(['current', 'removed'])
    .describe('`current`: a rule of the active revision; `removed`: only earlier revisions had it.'),
  byRevision: z
    .array(
      z.object({
        revision: z.string(),
        fires: count.describe('Its fires under that revision over 7 d.'),
        truePositives: count,
        falsePositives: count,
        falseNegatives: count,
        precision: share.optional(),
      }),
    )
    .describe('Its counts per revision in which it was a rule, in the order of `history.revisions`.'),
});

const ruleHistorySchema = z
  .object({
    name: z.string().describe('The active policy’s name.'),
    scope: z
      .enum(['all', 'revision'])
      .describe('`all`: every revision of the name that decided in 7 d; `revision`: the one asked for.'),
    revisions: z
      .array(revisionMarkerSchema)
      .describe(`The revisions reported, oldest first (at most ${MAX_REPORTED_REVISIONS}).`),
    omittedRevisions: count.describe('Revisions of the window left out past the bound.'),
    rules: z
      .array(ruleAcrossRevisionsSchema)
      .describe(
        'Each rule id as one series summed over the revisions: the active revision’s rules first, then those only earlier revisions had (`removed`).',
      ),
  })
  .describe('Each rule by id across the active policy’s revisions: an edit keeps its fires and labels.');

export const ruleReportSchema = z.object({
  generatedAt: z.iso.datetime().describe('The report’s `now` (RFC 3339, UTC): every window ends there.'),
  active: revisionReportSchema,
  shadow: revisionReportSchema.optional().describe('The shadow policy’s revision, while one is loaded.'),
  agreement: z
    .object({ allow: verdictCounts, challenge: verdictCounts, deny: verdictCounts })
    .optional()
    .describe(
      'agreement[active verdict][shadow verdict]: the last 7 d’s decisions of both current revisions. Absent with no shadow.',
    ),
  history: ruleHistorySchema,
});

type Fits<Produced extends Schema, Schema> = Produced;
/** Renaming or retyping a field of the report without its schema breaks the build here. */
export type RuleReportFitsItsSchema = Fits<RuleReport, z.output<typeof ruleReportSchema>>;
