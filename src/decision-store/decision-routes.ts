import { z } from 'zod';
import { declareRoute, notFoundNote, OPERATOR_KEY } from '../edge/route-declaration.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import { storeAnswer } from '../store/store-unavailable.ts';
import { storableLine } from '../text/storable-text.ts';
import { parseRfc3339, rfc3339Schema } from '../timing/rfc3339.ts';
import type { DecisionFilter, DecisionReader } from './decision-query.ts';
import { DEFAULT_PAGE_LIMIT, decodeCursor, MAX_PAGE_LIMIT } from './decision-reader.ts';

/**
 * `GET /decisions` (filtered, newest first, paged by cursor; counts by verdict with `counts=true`)
 * and `GET /decisions/{decisionId}` (one decision whole, with its labels and actions): operator
 * endpoints over the decision store.
 */

const flag = z.enum(['true', 'false']).transform((v) => v === 'true');
// A filter goes to the database as is: PostgreSQL refuses U+0000 (a 400 here, not a 503).
const id = storableLine().trim().min(1).max(200);

/** The query of GET /decisions. */
export const decisionsQuerySchema = z.strictObject({
  from: rfc3339Schema.optional().describe('Decisions at or after (RFC 3339).'),
  to: rfc3339Schema.optional().describe('Decisions before (RFC 3339).'),
  verdict: z.enum(['allow', 'challenge', 'deny']).optional(),
  rule: id.optional().describe('A rule id the active policy matched.'),
  accountId: id.optional(),
  userId: id.optional(),
  ip: id.optional(),
  unitId: id.optional(),
  degraded: flag.optional(),
  label: z.enum(['fraud', 'legit', 'none']).optional().describe('The current label; `none`: unlabelled.'),
  shadowDisagrees: flag
    .optional()
    .describe(
      'true: the shadow policy’s verdict differs from the active one; false: a shadow ran and agreed.',
    ),
  cursor: z
    .string()
    .max(300)
    .refine((c) => decodeCursor(c) !== undefined, 'must be a nextCursor of an earlier page')
    .optional()
    .describe('A previous page’s `nextCursor`: the older decisions after it.'),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_PAGE_LIMIT)
    .default(DEFAULT_PAGE_LIMIT)
    .describe(`Most decisions in the page (default ${DEFAULT_PAGE_LIMIT}).`),
  counts: flag.optional().describe('true: also `counts`, by verdict, over the whole filter (cursor aside).'),
});

/** The filter of a checked query. */
export function filterOf(q: z.output<typeof decisionsQuerySchema>): DecisionFilter {
  const { from, to, counts: _counts, ...rest } = q;
  const filter: DecisionFilter = {};
  for (const [key, value] of Object.entries(rest))
    if (value !== undefined) Object.assign(filter, { [key]: value });
  if (from !== undefined) filter.fromMs = parseRfc3339(from)!;
  if (to !== undefined) filter.toMs = parseRfc3339(to)!;
  return filter;
}

/** `work`, its failure the 503 `RG_ERR_DECISION_STORE_UNAVAILABLE` (src/store/store-unavailable.ts). */
const fromStore = <T>(work: Promise<T>) =>
  storeAnswer(work, ErrorCode.DECISION_STORE_UNAVAILABLE, 'The decision store');

/** Answered on both routes while RISKGATE_DECISION_STORE=off. */
const storeOff = () =>
  new RiskgateError(
    ErrorCode.NOT_FOUND,
    'The decision store is off (RISKGATE_DECISION_STORE=off): no decisions are kept.',
  );

const DECISION_STORE_ROUTE = {
  [ErrorCode.DECISION_STORE_UNAVAILABLE]:
    'The decision store (SQLite, PostgreSQL) did not answer: down, refused or too slow. Decisions go on meanwhile.',
};
const STORE_OFF = 'With RISKGATE_DECISION_STORE=off there is no decision store: 404.';

export const DECISIONS_ROUTE = declareRoute({
  method: 'get',
  path: '/decisions',
  surface: 'operator',
  operationId: 'listDecisions',
  summary: 'Decisions from the decision store, filtered, newest first',
  description: `Paged by cursor: each page's \`nextCursor\` gives the older ones. ${STORE_OFF}`,
  query: decisionsQuerySchema,
  responses: {
    200: {
      description: 'A page of decisions (and counts by verdict with `counts=true`).',
      schema: 'DecisionPage',
    },
  },
  problems: {
    [ErrorCode.INVALID_INPUT]: 'A query parameter breaking its rule (or unknown); `field` names it.',
    ...DECISION_STORE_ROUTE,
    [ErrorCode.NOT_FOUND]: `${OPERATOR_KEY[ErrorCode.NOT_FOUND]} ${STORE_OFF}`,
  },
});

export const DECISION_ROUTE = declareRoute({
  method: 'get',
  path: '/decisions/{decisionId}',
  surface: 'operator',
  operationId: 'getDecision',
  summary: 'One decision whole: its logged line, labels and actions',
  params: z.object({ decisionId: z.string().describe('The decision’s id.') }),
  responses: { 200: { description: 'The decision.', schema: 'StoredDecision' } },
  problems: {
    ...DECISION_STORE_ROUTE,
    [ErrorCode.NOT_FOUND]: `${notFoundNote('No such decision in the store (never made, past retention, not written yet).')} ${STORE_OFF}`,
  },
});

/** The routes over `reader`; `off`: the store is off, both answer 404 saying so. */
export function decisionRoutes(reader: DecisionReader, options: { off?: boolean } = {}): RouteMount {
  return {
    surface: 'operator',
    routes: [DECISIONS_ROUTE, DECISION_ROUTE],
    mount(app, edge) {
      if (options.off) {
        DECISIONS_ROUTE.mount(app, edge.operatorAuth, () => {
          throw storeOff();
        });
        DECISION_ROUTE.mount(app, edge.operatorAuth, () => {
          throw storeOff();
        });
        return;
      }
      DECISIONS_ROUTE.mount(app, edge.operatorAuth, async (c) => {
        const query = DECISIONS_ROUTE.queryOf(c);
        const filter = filterOf(query);
        const [page, counts] = await fromStore(
          Promise.all([reader.list(filter), query.counts ? reader.countByVerdict(filter) : undefined]),
        );
        return c.json({ ...page, ...(counts !== undefined && { counts }) });
      });
      DECISION_ROUTE.mount(app, edge.operatorAuth, async (c) => {
        const { decisionId } = DECISION_ROUTE.pathOf(c);
        const decision = decisionId.length > 200 ? undefined : await fromStore(reader.get(decisionId));
        if (decision === undefined) {
          throw new RiskgateError(
            ErrorCode.NOT_FOUND,
            `No decision ${JSON.stringify(decisionId.slice(0, 200))} in the decision store.`,
          );
        }
        return c.json(decision);
      });
    },
  };
}
