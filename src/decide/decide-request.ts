import { isIP } from 'node:net';
import { z } from 'zod';
import { FIRST_FACTOR_OUTCOMES } from '../policy-input/policy-request.ts';
import {
  ACCOUNT_ID_PATTERN,
  accountIdSchema,
  findOrderingViolation,
  INTERACTION_ID_PATTERN,
  interactionIdSchema,
  MAX_INTERACTION_ID_LENGTH,
  MAX_SDK_VERSION_ID_LENGTH,
  MAX_UNIT_ID_LENGTH,
  SDK_VERSION_ID_PATTERN,
  sdkVersionIdSchema,
  UNIT_ID_PATTERN,
  unitIdSchema,
  VERIFICATION_STATUSES,
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
const CONTEXT_KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** Admin API ids travel in URL paths; the unreserved URL characters are all they need. */
const ADMIN_ID_PATTERN = /^[A-Za-z0-9._~-]+$/;
const MAX_ADMIN_ID_LENGTH = 100;
const MAX_IP_LENGTH = 45;
const MAX_USER_AGENT_LENGTH = 1024;
const PLATFORMS = ['browser', 'mobile'] as const;

const adminIdSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(MAX_ADMIN_ID_LENGTH, `must be at most ${MAX_ADMIN_ID_LENGTH} characters`)
  .regex(ADMIN_ID_PATTERN, 'must contain only A-Z, a-z, 0-9 and . _ ~ -');

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
    platform: z.enum(PLATFORMS).optional(),
    unitId: unitIdSchema.optional().describe('Unit of the current login.'),
    verificationStatus: verificationStatusSchema.optional(),
    interactionId: interactionIdSchema.optional().describe('The current login interaction.'),
    sdkVersionId: sdkVersionIdSchema.optional(),
    baseline: baselineSchema.optional(),
    ip: z
      .string()
      .max(MAX_IP_LENGTH)
      .refine((s) => isIP(s) !== 0, 'must be an IPv4 or IPv6 address')
      .optional(),
    userAgent: z
      .string()
      .max(MAX_USER_AGENT_LENGTH, `must be at most ${MAX_USER_AGENT_LENGTH} characters`)
      .optional(),
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
        z.string().regex(CONTEXT_KEY_PATTERN, 'keys must be identifiers (A-Z, a-z, 0-9, _)'),
        contextValueSchema,
      )
      .refine((o) => Object.keys(o).length <= MAX_CONTEXT_ENTRIES, `at most ${MAX_CONTEXT_ENTRIES} entries`)
      .optional()
      .describe('Free attributes for policies (`request.context.<key>` in CEL).'),
  })
  .superRefine(checkOrdering);

export type DecideRequest = z.infer<typeof decideRequestSchema>;
export type BaselineSelector = z.infer<typeof baselineSchema>;

/**
 * What `decideRequestSchema` makes of `json` (a `JSON.parse` result) when it certainly accepts it,
 * checked without zod; undefined when not certain: zod then decides, and words the 400 naming the
 * field. The same rules (the constants above and src/signals/identifiers.ts), and the same value
 * zod returns: a fresh object, members in the schema's order, `context` in the body's. Issue 32: a
 * bench body costs ~4 µs in zod in a loop of its own (~1 µs here), and several times that on the
 * shipped server's main thread, where zod's shared `_zod.run` is megamorphic (bench/RESULTS.md).
 * test/decide-request-accept.test.ts holds it to zod's answers.
 */
export function acceptDecideRequest(json: unknown): DecideRequest | undefined {
  return acceptObject(json, DECIDE_MEMBERS) as DecideRequest | undefined;
}

/** Not accepted: zod decides. */
const NO: unique symbol = Symbol('no');
type Accept = (value: unknown) => unknown;

const isPlainRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype;

const patterned =
  (pattern: RegExp, max: number, min = 0): Accept =>
  (v) =>
    typeof v === 'string' && v.length <= max && v.length >= min && pattern.test(v) ? v : NO;
const oneOf = (values: readonly string[]): Accept => {
  const set = new Set<unknown>(values);
  return (v) => (set.has(v) ? v : NO);
};

/** `members` in the schema's order, each with its check; `required` names the one not optional. */
interface Members {
  order: readonly string[];
  accept: Readonly<Record<string, Accept>>;
  required?: string;
}

function members<S extends z.ZodObject>(
  schema: S,
  accept: Record<keyof S['shape'], Accept>,
  required?: keyof S['shape'] & string,
): Members {
  return { order: Object.keys(schema.shape), accept, ...(required === undefined ? {} : { required }) };
}

/** A strict object of `m`'s members, then the schema's ordering rule (`checkOrdering`). */
function acceptObject(json: unknown, m: Members): Record<string, unknown> | undefined {
  if (!isPlainRecord(json)) return undefined;
  const out: Record<string, unknown> = {};
  let present = 0;
  for (const key of m.order) {
    const v = json[key];
    if (v === undefined) {
      if (key === m.required) return undefined;
      continue;
    }
    const checked = m.accept[key]!(v);
    if (checked === NO || checked === undefined) return undefined;
    out[key] = checked;
    present++;
  }
  // An unknown member (or one not of the object's own): zod's `unrecognized_keys`.
  if (Object.keys(json).length !== present) return undefined;
  if (findOrderingViolation(out) !== undefined) return undefined;
  return out;
}

const acceptUnitId = patterned(UNIT_ID_PATTERN, MAX_UNIT_ID_LENGTH);
const acceptVerificationStatus = oneOf(VERIFICATION_STATUSES);
const acceptInteractionId = patterned(INTERACTION_ID_PATTERN, MAX_INTERACTION_ID_LENGTH);
const acceptSdkVersionId = patterned(SDK_VERSION_ID_PATTERN, MAX_SDK_VERSION_ID_LENGTH);
const acceptAccountId = patterned(ACCOUNT_ID_PATTERN, Number.POSITIVE_INFINITY);
const acceptAdminId = patterned(ADMIN_ID_PATTERN, MAX_ADMIN_ID_LENGTH, 1);

const BASELINE_MEMBERS = members(baselineSchema, {
  accountId: acceptAccountId,
  unitId: acceptUnitId,
  verificationStatus: acceptVerificationStatus,
  interactionId: acceptInteractionId,
  sdkVersionId: acceptSdkVersionId,
});

function acceptContext(v: unknown): unknown {
  if (!isPlainRecord(v)) return NO;
  const keys = Object.keys(v);
  if (keys.length > MAX_CONTEXT_ENTRIES) return NO;
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    // A `__proto__` member zod leaves out of its copy: declined, zod decides.
    if (key === '__proto__' || !CONTEXT_KEY_PATTERN.test(key)) return NO;
    const value = v[key];
    if (
      typeof value === 'string'
        ? value.length > MAX_CONTEXT_STRING_LENGTH
        : typeof value === 'number'
          ? !Number.isFinite(value)
          : typeof value !== 'boolean'
    )
      return NO;
    out[key] = value;
  }
  return out;
}

const DECIDE_MEMBERS = members(
  decideRequestSchema,
  {
    accountId: acceptAccountId,
    userId: acceptAdminId,
    deviceId: acceptAdminId,
    platform: oneOf(PLATFORMS),
    unitId: acceptUnitId,
    verificationStatus: acceptVerificationStatus,
    interactionId: acceptInteractionId,
    sdkVersionId: acceptSdkVersionId,
    baseline: (v) => acceptObject(v, BASELINE_MEMBERS) ?? NO,
    ip: (v) => (typeof v === 'string' && v.length <= MAX_IP_LENGTH && isIP(v) !== 0 ? v : NO),
    userAgent: (v) => (typeof v === 'string' && v.length <= MAX_USER_AGENT_LENGTH ? v : NO),
    firstFactor: oneOf(FIRST_FACTOR_OUTCOMES),
    context: acceptContext,
  },
  'accountId',
);
