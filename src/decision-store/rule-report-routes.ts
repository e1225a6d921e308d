import { z } from 'zod';
import { declareRoute } from '../edge/route-declaration.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import { storeAnswer } from '../store/store-unavailable.ts';
import type { RuleReport, RuleReportReader } from './rule-report.ts';

/**
 * `GET /rules/report` (operators): each rule's quality on live traffic, from the decision store
 * (src/decision-store/rule-report-query.ts), for the console's Rules page and for scripts.
 */
export const RULE_REPORT_ROUTE = declareRoute({
  method: 'get',
  path: '/rules/report',
  surface: 'operator',
  operationId: 'ruleReport',
  summary: 'Each rule’s quality on live traffic, from the decision store',
  description:
    'For the active and the shadow revision: decisions and each rule’s fires over 1 h, 24 h and 7 d, an hourly series, precision and recall against the current labels, the rules that never fired, and the active × shadow verdict agreement.',
  responses: {
    200: { description: 'The report, its windows ending at `generatedAt`.', schema: 'RuleReport' },
  },
  problems: {
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
        c.json(await fromDecisionStore(reader.report())),
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
});

type Fits<Produced extends Schema, Schema> = Produced;
/** Renaming or retyping a field of the report without its schema breaks the build here. */
export type RuleReportFitsItsSchema = Fits<RuleReport, z.output<typeof ruleReportSchema>>;
