import { z } from 'zod';
import {
  AUDITED_CHANGE,
  type CodeNotes,
  declareRoute,
  jsonBodyProblems,
  notFoundNote,
  QUERY_RULE_NOTE,
} from '../edge/route-declaration.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import { unlockRequestSchema } from '../lockouts/lockout-routes.ts';
import {
  assignSchema,
  dispositionSchema,
  lockOutSchema,
  MAX_REVIEW_BODY_BYTES,
  noteSchema,
  openCaseSchema,
  reviewQuerySchema,
} from './review-api.ts';
import type { ReviewOperations } from './review-operations.ts';

/**
 * The review queue's operator endpoints (docs/review-queue.md): `GET /review/cases` (a view:
 * open, claimed, closed, mine, overdue), `POST /review/claim-next`, `GET /review/cases/{id}`,
 * `POST /review/cases` (by hand), `POST /review/cases/{id}/disposition`,
 * `POST /review/cases/{id}/notes`, `.../release`, `.../assign`, `.../lockout` and `.../unlock`.
 * Reads take any operator; a change an analyst (a lock-out or unlock an admin, as
 * `POST /lockouts/{id}/unlock`; another analyst's case an admin).
 */

const casePathSchema = z.object({ id: z.uuid().describe('The case’s id.') });

const REVIEW_DATABASE: CodeNotes = {
  [ErrorCode.DATABASE_UNAVAILABLE]:
    'The review queue’s database (RISKGATE_DATABASE) did not answer (down, refused or too slow), or holds a row riskgate cannot read: never an empty queue.',
};
const REVIEW_CHANGE_NOTE =
  'An analyst’s. Written to the audit trail before it is made (refused, 503, when it cannot be), then to the control database.';
const bodyOf = <S extends z.ZodType>(component: string, schema: S) => ({
  schema: { component, schema },
  maxBytes: MAX_REVIEW_BODY_BYTES,
});
const BODY_PROBLEMS = jsonBodyProblems(MAX_REVIEW_BODY_BYTES);
const NO_CASE = notFoundNote('No review case of this id.');

export const REVIEW_CASES_ROUTE = declareRoute({
  method: 'get',
  path: '/review/cases',
  surface: 'operator',
  operationId: 'listReviewCases',
  summary: 'Review cases by view (open, claimed, closed, mine, overdue), due first, and the queue’s depth',
  query: reviewQuerySchema,
  responses: {
    200: { description: 'The view’s cases and the queue’s depth and age.', schema: 'ReviewCases' },
  },
  problems: { ...REVIEW_DATABASE, [ErrorCode.INVALID_INPUT]: QUERY_RULE_NOTE },
});

export const OPEN_REVIEW_CASE_ROUTE = declareRoute({
  method: 'post',
  path: '/review/cases',
  surface: 'operator',
  operationId: 'openReviewCase',
  summary: 'Send a stored decision to review by hand',
  description: `${REVIEW_CHANGE_NOTE} A decision has at most one case: one it has already is answered 200 as it is.`,
  body: bodyOf('OpenReviewCase', openCaseSchema),
  responses: {
    201: { description: 'The case, opened.', schema: 'ReviewCase' },
    200: {
      description: 'The decision’s case, opened before (by its policy, the sample or an operator).',
      schema: 'ReviewCase',
    },
  },
  problems: {
    ...REVIEW_DATABASE,
    ...AUDITED_CHANGE,
    ...BODY_PROBLEMS,
    [ErrorCode.INVALID_INPUT]: 'A `decisionId` that is not a UUID, an empty note; `field` names it.',
    [ErrorCode.NOT_FOUND]: notFoundNote('The decision store has no such decision.'),
  },
});

export const CLAIM_NEXT_ROUTE = declareRoute({
  method: 'post',
  path: '/review/claim-next',
  surface: 'operator',
  operationId: 'claimNextReviewCase',
  summary: 'Claim the open case due first (two analysts never get the same case)',
  description: `${REVIEW_CHANGE_NOTE} On PostgreSQL the candidate is locked FOR UPDATE SKIP LOCKED (a concurrent claim takes the next case); on SQLite the claim is one write transaction. No body.`,
  responses: {
    200: {
      description: 'The case claimed for you, or `claimed: null` when none is open.',
      schema: 'ReviewClaim',
    },
  },
  problems: { ...REVIEW_DATABASE, ...AUDITED_CHANGE },
});

export const REVIEW_CASE_ROUTE = declareRoute({
  method: 'get',
  path: '/review/cases/{id}',
  surface: 'operator',
  operationId: 'getReviewCase',
  summary: 'One review case with its notes',
  params: casePathSchema,
  responses: { 200: { description: 'The case and its notes, oldest first.', schema: 'ReviewCaseDetail' } },
  problems: {
    ...REVIEW_DATABASE,
    [ErrorCode.INVALID_INPUT]: 'An id that is not a UUID.',
    [ErrorCode.NOT_FOUND]: NO_CASE,
  },
});

export const DISPOSITION_ROUTE = declareRoute({
  method: 'post',
  path: '/review/cases/{id}/disposition',
  surface: 'operator',
  operationId: 'disposeReviewCase',
  summary:
    'Close a case: fraud or legit becomes the decision’s label (as /feedback); unsure closes without one',
  description: `${REVIEW_CHANGE_NOTE} The label is recorded first (the decision log's \`feedback\` line the rule report counts, read back before the answer), then the case closed; an open case is claimed by who closes it.`,
  params: casePathSchema,
  body: bodyOf('ReviewDisposition', dispositionSchema),
  responses: { 200: { description: 'The case, closed.', schema: 'ReviewCase' } },
  problems: {
    ...REVIEW_DATABASE,
    ...AUDITED_CHANGE,
    ...BODY_PROBLEMS,
    [ErrorCode.INVALID_INPUT]:
      'A disposition other than fraud, legit or unsure, an id not a UUID; `field` names it.',
    [ErrorCode.NOT_FOUND]: NO_CASE,
    [ErrorCode.CONFLICT]: 'The case is closed already: `detail` says how and by whom.',
    [ErrorCode.DECISION_LOG_UNAVAILABLE]:
      'RISKGATE_DECISION_LOG is off: the label would be lost, so nothing is done.',
  },
});

export const REVIEW_NOTE_ROUTE = declareRoute({
  method: 'post',
  path: '/review/cases/{id}/notes',
  surface: 'operator',
  operationId: 'addReviewNote',
  summary: 'Add a note to a case',
  description: REVIEW_CHANGE_NOTE,
  params: casePathSchema,
  body: bodyOf('ReviewNote', noteSchema),
  responses: { 201: { description: 'The case with its notes.', schema: 'ReviewCaseDetail' } },
  problems: {
    ...REVIEW_DATABASE,
    ...AUDITED_CHANGE,
    ...BODY_PROBLEMS,
    [ErrorCode.INVALID_INPUT]: 'An empty or over-long `text`; `field` names it.',
    [ErrorCode.NOT_FOUND]: NO_CASE,
  },
});

export const REVIEW_UNLOCK_ROUTE = declareRoute({
  method: 'post',
  path: '/review/cases/{id}/unlock',
  surface: 'operator',
  operationId: 'unlockFromReviewCase',
  summary: 'Unlock the user the case’s decision locked out (an admin; as POST /lockouts/{id}/unlock)',
  description:
    'The lock-outs’ own unlock of the lock-out the case’s decision drove (its record is keyed by the decision id): audited, queued in the outbox, 202.',
  params: casePathSchema,
  body: bodyOf('ReviewUnlock', unlockRequestSchema),
  responses: {
    202: { description: 'The lock-out, unlocked (its Admin API call queued).', schema: 'Lockout' },
  },
  problems: {
    ...REVIEW_DATABASE,
    ...AUDITED_CHANGE,
    ...BODY_PROBLEMS,
    [ErrorCode.INVALID_INPUT]: 'A missing or blank `reason`; `field` names it.',
    [ErrorCode.NOT_FOUND]: notFoundNote('No review case of this id, or its decision drove no lock-out.'),
    [ErrorCode.CONFLICT]: 'The lock-out had ended already: nothing done.',
    [ErrorCode.OUTBOX_UNAVAILABLE]: 'The outbox did not take the unlock durably in time: nothing done.',
  },
});

export const REVIEW_LOCKOUT_ROUTE = declareRoute({
  method: 'post',
  path: '/review/cases/{id}/lockout',
  surface: 'operator',
  operationId: 'lockOutFromReviewCase',
  summary: 'Lock out the user of the case’s decision (an admin; through the outbox)',
  description:
    'Audited first (refused, 503, when the trail cannot take it), then the Admin API `status: locked_out` queued in the outbox with its lock-out record (keyed by the case’s decision id, rule `operator`, permanent until an unlock) and `lockout.created`, in one append: 202, the record `queued` (`GET /lockouts/{id}` shows it `locked` once made).',
  params: casePathSchema,
  body: bodyOf('ReviewLockout', lockOutSchema),
  responses: {
    202: { description: 'The lock-out, queued (its Admin API call follows).', schema: 'Lockout' },
  },
  problems: {
    ...REVIEW_DATABASE,
    ...AUDITED_CHANGE,
    ...BODY_PROBLEMS,
    [ErrorCode.INVALID_INPUT]: 'A missing or blank `reason`; `field` names it.',
    [ErrorCode.NOT_FOUND]: NO_CASE,
    [ErrorCode.CONFLICT]:
      'The case’s decision names no user, or has a lock-out already (in force or ended): nothing done.',
    [ErrorCode.OUTBOX_UNAVAILABLE]: 'The outbox did not take the lock-out: nothing done.',
  },
});

export const REVIEW_RELEASE_ROUTE = declareRoute({
  method: 'post',
  path: '/review/cases/{id}/release',
  surface: 'operator',
  operationId: 'releaseReviewCase',
  summary: 'Give a claimed case back to the queue (its assignee, or an admin)',
  description: `${REVIEW_CHANGE_NOTE} The case is open again, nobody's, next for claim-next by its due time. One conditional write: a release racing a disposition or another change finds the case changed (409). No body.`,
  params: casePathSchema,
  responses: { 200: { description: 'The case, open again.', schema: 'ReviewCase' } },
  problems: {
    ...REVIEW_DATABASE,
    ...AUDITED_CHANGE,
    [ErrorCode.INVALID_INPUT]: 'An id that is not a UUID.',
    [ErrorCode.NOT_FOUND]: NO_CASE,
    [ErrorCode.FORBIDDEN]: 'Another analyst holds the case and you are not an admin.',
    [ErrorCode.CONFLICT]: 'The case is not claimed (open, closed, or changed meanwhile): nothing done.',
  },
});

export const REVIEW_ASSIGN_ROUTE = declareRoute({
  method: 'post',
  path: '/review/cases/{id}/assign',
  surface: 'operator',
  operationId: 'assignReviewCase',
  summary: 'Hand a case to another analyst (an open case or your own; any case for an admin)',
  description: `${REVIEW_CHANGE_NOTE} The case is claimed for \`assignee\` (its \`mine\` view shows it). Handed to who holds it already, it is answered as it is, nothing recorded.`,
  params: casePathSchema,
  body: bodyOf('ReviewAssign', assignSchema),
  responses: { 200: { description: 'The case, claimed for the assignee.', schema: 'ReviewCase' } },
  problems: {
    ...REVIEW_DATABASE,
    ...AUDITED_CHANGE,
    ...BODY_PROBLEMS,
    [ErrorCode.INVALID_INPUT]: 'An `assignee` that is not an operator name; `field` names it.',
    [ErrorCode.NOT_FOUND]: NO_CASE,
    [ErrorCode.FORBIDDEN]: 'Another analyst holds the case and you are not an admin.',
    [ErrorCode.CONFLICT]: 'The case is closed, or changed meanwhile: nothing done.',
  },
});

export const REVIEW_ROUTES = [
  REVIEW_CASES_ROUTE,
  OPEN_REVIEW_CASE_ROUTE,
  CLAIM_NEXT_ROUTE,
  REVIEW_CASE_ROUTE,
  DISPOSITION_ROUTE,
  REVIEW_NOTE_ROUTE,
  REVIEW_UNLOCK_ROUTE,
  REVIEW_LOCKOUT_ROUTE,
  REVIEW_RELEASE_ROUTE,
  REVIEW_ASSIGN_ROUTE,
] as const;

export function reviewRoutes(operations: ReviewOperations): RouteMount {
  return {
    surface: 'operator',
    routes: REVIEW_ROUTES,
    mount(app, edge) {
      const analyst = [edge.operatorAuth, edge.requireRole('analyst')];
      const admin = [edge.operatorAuth, edge.requireRole('admin')];
      const viewer = edge.requireRole('viewer');
      REVIEW_CASES_ROUTE.mount(app, edge.operatorAuth, viewer, async (c) => {
        const { view, limit } = REVIEW_CASES_ROUTE.queryOf(c);
        return c.json(await operations.list(c, view, limit));
      });
      OPEN_REVIEW_CASE_ROUTE.mount(app, ...analyst, async (c) => {
        const input = await OPEN_REVIEW_CASE_ROUTE.bodyOf(c);
        const { opened, reviewCase } = await operations.open(c, edge, input);
        return c.json(reviewCase, opened ? 201 : 200);
      });
      CLAIM_NEXT_ROUTE.serve(app, analyst, 200, async (c) => ({
        claimed: await operations.claimNext(c, edge),
      }));
      REVIEW_CASE_ROUTE.mount(app, edge.operatorAuth, viewer, async (c) =>
        c.json(await operations.get(REVIEW_CASE_ROUTE.pathOf(c).id)),
      );
      DISPOSITION_ROUTE.serve(app, analyst, 200, (c, { id }, input) =>
        operations.dispose(c, edge, id, input),
      );
      REVIEW_NOTE_ROUTE.serve(app, analyst, 201, (c, { id }, { text }) => operations.note(c, edge, id, text));
      REVIEW_UNLOCK_ROUTE.serve(app, admin, 202, (c, { id }, { reason }) =>
        operations.unlock(c, edge, id, reason),
      );
      REVIEW_LOCKOUT_ROUTE.serve(app, admin, 202, (c, { id }, { reason }) =>
        operations.lockOut(c, edge, id, reason),
      );
      REVIEW_RELEASE_ROUTE.serve(app, analyst, 200, (c, { id }) => operations.release(c, edge, id));
      REVIEW_ASSIGN_ROUTE.serve(app, analyst, 200, (c, { id }, { assignee }) =>
        operations.assign(c, edge, id, assignee),
      );
    },
  };
}
