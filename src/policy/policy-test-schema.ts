import { z } from 'zod';
import { adminDeviceSchema, adminUserSchema } from '../admin/admin-schemas.ts';
import { HISTORY_FEATURE_NAMES } from '../features/history-features.ts';
import { FIRST_FACTOR_OUTCOMES } from '../policy-input/policy-request.ts';
import {
  activeCallResponseSchema,
  geolocationResponseSchema,
  geovelocityResponseSchema,
  historicalProximityResponseSchema,
  latestProximityResponseSchema,
  newBrowserResponseSchema,
  remoteAccessToolResponseSchema,
} from '../signals/signal-schemas.ts';
import { POLICY_API_VERSION, verdictSchema } from './policy-schema.ts';
import type { PolicySignalName } from './policy-types.ts';

/**
 * A policy test suite (`kind: PolicyTest`, `*.test.yaml` beside the policy). Signal results are
 * written exactly as the vendor returns them (the envelope of docs/vendor-api.md#signal-envelope;
 * `signalType` is filled in) or as `{unavailable: <reason>}`; the user and devices as Admin API records,
 * partial, over sensible defaults. `policies/policy-test.schema.json` is generated from this.
 */

const unavailableSchema = z
  .object({ unavailable: z.string().min(1).describe('Why: timeout, not_applicable, RG_ERR_…') })
  .strict();

/** The response schema of each signal, keyed by riskgate's signal name. */
export const SIGNAL_RESPONSE_SCHEMAS = {
  remoteAccessTool: remoteAccessToolResponseSchema,
  newBrowser: newBrowserResponseSchema,
  latestProximity: latestProximityResponseSchema,
  historicalProximity: historicalProximityResponseSchema,
  geovelocity: geovelocityResponseSchema,
  activeCall: activeCallResponseSchema,
  geolocation: geolocationResponseSchema,
} as const satisfies Record<PolicySignalName, z.ZodType>;

function givenSignal<S extends z.ZodObject>(schema: S) {
  return z.union([unavailableSchema, schema.extend({ signalType: z.string().optional() })]).nullable();
}

const givenSignalsSchema = z
  .object({
    remoteAccessTool: givenSignal(remoteAccessToolResponseSchema),
    newBrowser: givenSignal(newBrowserResponseSchema),
    latestProximity: givenSignal(latestProximityResponseSchema),
    historicalProximity: givenSignal(historicalProximityResponseSchema),
    geovelocity: givenSignal(geovelocityResponseSchema),
    activeCall: givenSignal(activeCallResponseSchema),
    geolocation: givenSignal(geolocationResponseSchema),
  })
  .partial()
  .strict()
  .describe('Signal results as the vendor returns them, or {unavailable: reason}; null drops a default.');

const givenRequestSchema = z
  .object({
    accountId: z.string(),
    userId: z.string(),
    deviceId: z.string(),
    platform: z.enum(['browser', 'mobile']),
    unitId: z.string(),
    verificationStatus: z.string(),
    interactionId: z.string(),
    sdkVersionId: z.string(),
    ip: z.string(),
    userAgent: z.string(),
    firstFactor: z.enum(FIRST_FACTOR_OUTCOMES),
    context: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
  })
  .partial()
  .strict();

const givenSchema = z
  .object({
    now: z.iso.datetime({ offset: true }).optional().describe("Evaluation time; default the suite's `now`."),
    request: givenRequestSchema.optional(),
    signals: givenSignalsSchema.optional(),
    user: z.union([unavailableSchema, adminUserSchema.partial().strict()]).optional(),
    devices: z.union([unavailableSchema, z.array(adminDeviceSchema.partial().strict())]).optional(),
    velocity: z
      .union([unavailableSchema, z.record(z.string(), z.number().min(0))])
      .optional()
      .describe("Counter values by name (`velocity.<name>`); the policy's counters not given read 0."),
    history: z
      .union([
        unavailableSchema,
        z
          .object(Object.fromEntries(HISTORY_FEATURE_NAMES.map((n) => [n, z.number().min(0)])))
          .partial()
          .strict(),
      ])
      .optional()
      .describe('History features (`history.<feature>`); those not given read 0 (lagSeconds 120).'),
    lists: z
      .union([unavailableSchema, z.record(z.string(), z.array(z.string()))])
      .optional()
      .describe(
        "The runtime lists' entries by name (`lists.<name>`): addresses and CIDRs of an `ip` list, ids of the others; lists not given are empty.",
      ),
  })
  .strict();
export type GivenInput = z.infer<typeof givenSchema>;

const expectSchema = z
  .object({
    verdict: verdictSchema.optional(),
    score: z.number().optional(),
    matchedRules: z.array(z.string()).optional().describe('Exactly these rules match (any order).'),
    skippedRules: z.array(z.string()).optional().describe('Exactly these rules are skipped (any order).'),
    actions: z.array(z.string()).optional().describe('Exactly these actions, by name (any order).'),
    suppressedActions: z
      .array(z.string())
      .optional()
      .describe('Exactly these actions asked for but not taken, by name (any order).'),
    decidedBy: z.enum(['override', 'verdict', 'score', 'outage', 'degraded']).optional(),
    outageRule: z
      .string()
      .nullable()
      .optional()
      .describe('The outage rule that decided what unavailability amounted to; null: none matched.'),
  })
  .strict();
export type ExpectedDecision = z.infer<typeof expectSchema>;

export const policyTestFileSchema = z
  .object({
    apiVersion: z.literal(POLICY_API_VERSION),
    kind: z.literal('PolicyTest'),
    policy: z.string().min(1).describe('The policy file, relative to this file.'),
    now: z.iso.datetime({ offset: true }).describe('Default evaluation time of every case.'),
    defaults: givenSchema.omit({ now: true }).optional().describe("Merged under every case's `given`."),
    cases: z
      .array(
        z
          .object({
            name: z.string().min(1),
            given: givenSchema,
            expect: expectSchema,
          })
          .strict(),
      )
      .min(1),
  })
  .strict();
export type PolicyTestFile = z.infer<typeof policyTestFileSchema>;
