import { z } from 'zod';

/**
 * `POST /feedback`: an analyst's (or a login backend's) label of one decision, kept in the decision
 * log as a `feedback` line; `riskgate replay --labels` scores each rule's precision and recall
 * against these labels.
 */

/** Largest feedback body accepted, bytes. */
export const MAX_FEEDBACK_BODY_BYTES = 4 * 1024;

export const feedbackRequestSchema = z.strictObject({
  decisionId: z.uuid().describe('The `decisionId` of a /decide answer.'),
  label: z.enum(['fraud', 'legit']).describe('What the login turned out to be.'),
  note: z.string().max(1000, 'must be at most 1000 characters').optional().describe('Why, for the record.'),
});
export type FeedbackRequest = z.infer<typeof feedbackRequestSchema>;

export const feedbackResponseSchema = z.object({
  decisionId: z.uuid(),
  label: z.enum(['fraud', 'legit']),
  recordedAt: z.iso.datetime().describe('When riskgate recorded it (RFC 3339).'),
});
