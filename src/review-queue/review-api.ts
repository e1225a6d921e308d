import { z } from 'zod';
import { MAX_REASON_LENGTH } from '../audit/change-reason.ts';
import { OPERATOR_NAME } from '../operators/operator-keys.ts';
import { storableText } from '../text/storable-text.ts';
import { DISPOSITIONS, REVIEW_REASONS, REVIEW_STATUSES } from './review-store.ts';

/**
 * The review queue endpoints' requests and answers (src/review-queue/review-routes.ts), as zod:
 * they validate what arrives and describe what leaves in the OpenAPI document.
 */

/** Largest body of a review request (a note is at most 2000 characters), bytes. */
export const MAX_REVIEW_BODY_BYTES = 8192;
/** Longest note, characters. */
export const MAX_NOTE_LENGTH = 2000;

/** The queue's views: `mine` is the caller's claimed cases, `overdue` any not closed past its due time. */
export const REVIEW_VIEWS = ['open', 'claimed', 'closed', 'mine', 'overdue'] as const;
export type ReviewView = (typeof REVIEW_VIEWS)[number];

const noteText = storableText()
  .trim()
  .min(1, 'must not be empty')
  .max(MAX_NOTE_LENGTH)
  .describe('Free text, kept with the case and shown on its page.');

export const reviewQuerySchema = z.object({
  view: z.enum(REVIEW_VIEWS).default('open').describe('Which cases (default open).'),
  limit: z.coerce.number().int().min(1).max(500).default(100).describe('Most cases (1-500, default 100).'),
});

export const openCaseSchema = z
  .object({
    decisionId: z.uuid().describe('The decision to review (its id from /decide).'),
    note: noteText.optional(),
  })
  .strict();
export type OpenCase = z.infer<typeof openCaseSchema>;

export const dispositionSchema = z
  .object({
    disposition: z
      .enum(DISPOSITIONS)
      .describe(
        "`fraud` and `legit` become the decision's label (as /feedback); `unsure` closes without one.",
      ),
    note: noteText.optional(),
  })
  .strict();
export type DispositionInput = z.infer<typeof dispositionSchema>;

export const noteSchema = z.object({ text: noteText }).strict();

export const assignSchema = z
  .object({
    assignee: z
      .string()
      .regex(OPERATOR_NAME, 'must be an operator name: 1-64 letters, digits, ".", "_", "-" or "@"')
      .describe('The analyst who takes the case (an operator name, as the audit trail records them).'),
  })
  .strict();

export const lockOutSchema = z
  .object({
    reason: storableText()
      .trim()
      .min(1)
      .max(MAX_REASON_LENGTH)
      .describe('Why the user is locked out: kept on the lock-out record and in the audit trail.'),
  })
  .strict();

const timestamp = z.iso.datetime().describe('RFC 3339, UTC.');

export const reviewCaseSchema = z.object({
  id: z.string(),
  decisionId: z.string(),
  reason: z
    .enum(REVIEW_REASONS)
    .describe('Who opened it: the policy (`review: true`), the sample, an operator.'),
  detail: z.string().describe("Why: the rules or verdict that asked, or the operator's note."),
  verdict: z.string().describe("The decision's verdict."),
  userId: z.string().nullable(),
  status: z.enum(REVIEW_STATUSES),
  openedAt: timestamp,
  openedBy: z.string(),
  dueAt: timestamp.describe('Opened plus RISKGATE_REVIEW_SLA_HOURS.'),
  overdue: z.boolean(),
  assignee: z.string().nullable(),
  claimedAt: timestamp.nullable(),
  disposition: z.enum(DISPOSITIONS).nullable(),
  closedAt: timestamp.nullable(),
  closedBy: z.string().nullable(),
});
export type ReviewCaseView = z.infer<typeof reviewCaseSchema>;

export const reviewNoteSchema = z.object({
  id: z.string(),
  author: z.string(),
  at: timestamp,
  text: z.string(),
});
export type ReviewNoteView = z.infer<typeof reviewNoteSchema>;

export const reviewCaseDetailSchema = reviewCaseSchema.extend({ notes: z.array(reviewNoteSchema) });
export type ReviewCaseDetail = z.infer<typeof reviewCaseDetailSchema>;

export const reviewListSchema = z.object({
  items: z.array(reviewCaseSchema).describe("The view's cases, due first."),
  queue: z.object({
    open: z.number(),
    claimed: z.number(),
    overdue: z.number(),
    oldestOpenAgeSeconds: z.number().describe('Age of the oldest case not closed; 0 when none is.'),
  }),
});
export type ReviewList = z.infer<typeof reviewListSchema>;

export const claimNextSchema = z.object({
  claimed: reviewCaseSchema.nullable().describe('The case claimed for you, or null when the queue is empty.'),
});
