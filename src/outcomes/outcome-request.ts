import { z } from 'zod';

/**
 * `POST /decisions/{decisionId}/outcome`: what became of a login after riskgate's answer, as its
 * login backend learnt it: the step-up's result (after a `challenge`), or a later account event.
 * Kept in the decision log as an `outcome` line and in the decision store with the decision; some
 * outcomes become labels (src/outcomes/outcome-labels.ts, docs/labels.md).
 */

/** Largest outcome body accepted, bytes. */
export const MAX_OUTCOME_BODY_BYTES = 1024;

export const STEP_UP_RESULTS = ['passed', 'failed', 'abandoned'] as const;
export const ACCOUNT_EVENTS = ['password_reset', 'account_recovered', 'user_reported_fraud'] as const;

const at = z.iso
  .datetime({ offset: true })
  .optional()
  .describe('When it happened (RFC 3339); default when riskgate received it.');

export const outcomeRequestSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('step_up').describe('The step-up (second factor) the challenge asked for.'),
    result: z.enum(STEP_UP_RESULTS).describe('How the user did at it.'),
    at,
  }),
  z.strictObject({
    type: z.literal('account_event').describe('Something that happened to the account later.'),
    event: z.enum(ACCOUNT_EVENTS).describe('What happened.'),
    at,
  }),
]);
export type OutcomeRequest = z.infer<typeof outcomeRequestSchema>;

/** An outcome's kind and value as stored (`decision_outcome.type`, `.value`). */
export type OutcomeType = OutcomeRequest['type'];

/** The value of an outcome: the step-up's result, or the account event. */
export function outcomeValue(o: OutcomeRequest): string {
  return o.type === 'step_up' ? o.result : o.event;
}

export const outcomeResponseSchema = z.object({
  decisionId: z.uuid(),
  type: z.enum(['step_up', 'account_event']),
  value: z.string().describe('The step-up result or the account event, as sent.'),
  at: z.iso.datetime().describe('When it happened (RFC 3339), as sent or when received.'),
  recordedAt: z.iso.datetime().describe('When riskgate recorded it (RFC 3339).'),
  reportedBy: z.string().describe('The id of the key that reported it, never the key.'),
});
export type OutcomeResponse = z.infer<typeof outcomeResponseSchema>;
