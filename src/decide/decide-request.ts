import { isIP } from 'node:net';
import { z } from 'zod';
import { FIRST_FACTOR_OUTCOMES } from '../policy-input/policy-request.ts';
import {
  accountIdSchema,
  findOrderingViolation,
  interactionIdSchema,
  sdkVersionIdSchema,
  unitIdSchema,
  verificationStatusSchema,
} from '../signals/identifiers.ts';

/**
 * The body of `POST /decide`. Identifiers follow the Trust Signals API's rules
 * (src/signals/identifiers.ts), so a bad one is the caller's 400 naming the field, never a vendor
 * 400 turned into a degraded decision. Unknown fields are refused: a misspelt `unitID` silently
 * ignored would quietly skip signals.
 */

/** Largest accepted body, bytes. Two sides of 1000-character identifiers plus context fit easily. */
export const MAX_DECIDE_BODY_BYTES = 16 * 1024;
export const MAX_CONTEXT_ENTRIES = 32;
export const MAX_CONTEXT_STRING_LENGTH = 512;

/** Admin API ids travel in URL paths; the unreserved URL characters are all they need. */
const adminIdSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(100, 'must be at most 100 characters')
  .regex(/^[A-Za-z0-9._~-]+$/, 'must contain only A-Z, a-z, 0-9 and . _ ~ -');

function checkOrdering(
  side: { unitId?: string; verificationStatus?: string; interactionId?: string },
  ctx: z.RefinementCtx,
): void {
  const bad = findOrderingViolation({
    unitId: side.unitId,
    verificationStatus: side.verificationStatus as never,
    interactionId: side.interactionId,
  });
  if (bad !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: [bad],
      message: bad === 'verificationStatus' ? 'requires unitId' : 'requires verificationStatus (and unitId)',
    });
  }
}

export const baselineSchema = z
  .strictObject({
    accountId: accountIdSchema
      .optional()
      .describe('Owner of the baseline side when it is another account; omit for the same account.'),
    unitId: unitIdSchema.optional(),
    verificationStatus: verificationStatusSchema.optional(),
    interactionId: interactionIdSchema.optional(),
    sdkVersionId: sdkVersionIdSchema.optional(),
  })
  .superRefine(checkOrdering)
  .describe('The side to compare against for proximity, e.g. the user’s enrolled phone.');

const contextValueSchema = z.union(
  [
    z.string().max(MAX_CONTEXT_STRING_LENGTH, `must be at most ${MAX_CONTEXT_STRING_LENGTH} characters`),
    z.number(),
    z.boolean(),
  ],
  {
    // JSON.parse reads a number beyond the double range (1e400) as Infinity.
    error: (issue) =>
      typeof issue.input === 'number'
        ? 'must be a finite number (this one is beyond the double-precision range)'
        : 'must be a string, number or boolean',
  },
);

/** How the login's first factor went (`firstFactor`), as the login backend reports it. */
export const firstFactorSchema = z.enum(FIRST_FACTOR_OUTCOMES);

export const decideRequestSchema = z
  .strictObject({
    accountId: accountIdSchema.describe('The Trust Signals accountId of the user logging in.'),
    userId: adminIdSchema.optional().describe('Admin API user id, for user features and actions.'),
    deviceId: adminIdSchema.optional().describe('Admin API device id, for device actions.'),
    platform: z.enum(['browser', 'mobile']).optional(),
    unitId: unitIdSchema.optional().describe('Unit of the current login.'),
    verificationStatus: verificationStatusSchema.optional(),
    interactionId: interactionIdSchema.optional().describe('The current login interaction.'),
    sdkVersionId: sdkVersionIdSchema.optional(),
    baseline: baselineSchema.optional(),
    ip: z
      .string()
      .max(45)
      .refine((s) => isIP(s) !== 0, 'must be an IPv4 or IPv6 address')
      .optional(),
    userAgent: z.string().max(1024, 'must be at most 1024 characters').optional(),
    firstFactor: firstFactorSchema
      .optional()
      .describe(
        'How the first factor (the password) of this login went, as the login backend saw it: ' +
          '`passed`, `failed`, or `not_checked` (riskgate was asked before or instead of checking it). ' +
          'A `lock_out_user` action runs only when it is `passed` (unless the policy says ' +
          '`requireFirstFactor: false`): otherwise, or when omitted, the verdict stands and the lock-out ' +
          'is skipped (`first_factor_not_passed`), so that nobody who merely knows a username can lock ' +
          'its owner out. `request.firstFactor` in CEL (`""` when omitted).',
      ),
    context: z
      .record(
        z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'keys must be identifiers (A-Z, a-z, 0-9, _)'),
        contextValueSchema,
      )
      .refine((o) => Object.keys(o).length <= MAX_CONTEXT_ENTRIES, `at most ${MAX_CONTEXT_ENTRIES} entries`)
      .optional()
      .describe('Free attributes for policies (`request.context.<key>` in CEL).'),
  })
  .superRefine(checkOrdering);

export type DecideRequest = z.infer<typeof decideRequestSchema>;
export type BaselineSelector = z.infer<typeof baselineSchema>;
