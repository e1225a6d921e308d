import { z } from 'zod';
import { storableText } from '../text/storable-text.ts';

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
  note: storableText()
    .max(1000, 'must be at most 1000 characters')
    .optional()
    .describe('Why, for the record (tab and line breaks pass; other control characters are refused).'),
});
export type FeedbackRequest = z.infer<typeof feedbackRequestSchema>;

const labelEventSchema = z.object({
  label: z.enum(['fraud', 'legit']),
  labelledBy: z
    .string()
    .describe('The id of the key that gave the label (`key-` and 12 hex digits), never the key.'),
  at: z.iso.datetime().describe('When riskgate recorded it (RFC 3339).'),
});

export const feedbackResponseSchema = z.object({
  decisionId: z.uuid(),
  label: z.enum(['fraud', 'legit']),
  recordedAt: z.iso.datetime().describe('When riskgate recorded it (RFC 3339).'),
  labelledBy: z.string().describe('The id of the key that sent this label, never the key.'),
  history: z
    .array(labelEventSchema)
    .describe("The decision's labels as this riskgate remembers them, oldest first: the last is current."),
});
