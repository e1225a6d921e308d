import { z } from 'zod';
import { changeReason } from '../audit/change-reason.ts';
import { MAX_LIST_VALUE_LENGTH } from '../lists/list-values.ts';
import { SNOOZE_ENTITIES } from '../policy-input/rule-snooze.ts';
import { storableLine } from '../text/storable-text.ts';

/**
 * The snooze endpoints' requests and answers (src/snoozes/snooze-routes.ts), as zod: they validate
 * what arrives and describe what leaves in the OpenAPI document.
 */

/** Largest body of a snooze's creation or end, bytes. */
export const MAX_SNOOZE_BODY_BYTES = 4096;
/** Longest rule id a snooze names, characters (a policy's ids are far shorter). */
const MAX_RULE_ID_LENGTH = 200;

const reasonSchema = changeReason().describe('Why: shown with the snooze and in the audit trail.');

const entitySchema = z
  .enum(SNOOZE_ENTITIES)
  .describe(
    "What the snooze is for: the login's `accountId`, `userId`, `unitId`, or its `ip` (an address or a CIDR).",
  );

const ruleIdSchema = storableLine()
  .min(1, 'must not be empty')
  .max(MAX_RULE_ID_LENGTH)
  .describe('A rule of the active policy (its `id`).');

export const createSnoozeSchema = z
  .object({
    ruleId: ruleIdSchema,
    entity: entitySchema,
    value: storableLine()
      .max(MAX_LIST_VALUE_LENGTH)
      .describe('The id, or for `ip` an address or CIDR (kept as its network).'),
    until: z.iso
      .datetime({ offset: true })
      .describe(
        'When the rule comes back for this entity (RFC 3339; in the future, at most RISKGATE_MAX_SNOOZE_DAYS away).',
      ),
    reason: reasonSchema,
  })
  .strict();
export type CreateSnooze = z.infer<typeof createSnoozeSchema>;

export const endSnoozeBodySchema = z.object({ reason: reasonSchema }).strict();
export const endSnoozeQuerySchema = z.object({ reason: reasonSchema.optional() });

export const snoozeQuerySchema = z.object({
  ruleId: ruleIdSchema.optional(),
  entity: entitySchema.optional(),
  value: storableLine()
    .max(MAX_LIST_VALUE_LENGTH)
    .optional()
    .describe('With `entity`: its id, address or CIDR.'),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(100)
    .describe('Most snoozes (1-1000, default 100).'),
});

const timestamp = z.iso.datetime().describe('RFC 3339, UTC.');

export const snoozeSchema = z.object({
  id: z.string().describe('`DELETE /snoozes/{id}` ends it early.'),
  ruleId: z.string(),
  entity: z.enum(SNOOZE_ENTITIES),
  value: z.string().describe('Canonical: an `ip` snooze holds a network (CIDR).'),
  author: z.string().describe("The operator's name (or key id) who made it."),
  reason: z.string(),
  createdAt: timestamp,
  until: timestamp,
  ended: z
    .object({ at: timestamp, by: z.string(), reason: z.string() })
    .optional()
    .describe('Present once it was ended early.'),
});
export type SnoozeView = z.infer<typeof snoozeSchema>;

export const snoozeListSchema = z.object({
  items: z.array(snoozeSchema).describe('Active snoozes, the ones ending soonest first.'),
  snapshot: z.object({
    ageMs: z.number().describe("How long ago this process's in-memory snoozes were last confirmed current."),
    stale: z
      .boolean()
      .describe(
        'Past the bound (10 s): decisions evaluate every rule as if nothing were snoozed, and say so.',
      ),
  }),
});
