import { z } from 'zod';
import {
  accountIdSchema,
  interactionIdSchema,
  sdkVersionIdSchema,
  serviceIdSchema,
  unitIdSchema,
  verificationStatusSchema,
} from '../../signals/identifiers.ts';
import { seedUserSchema } from '../admin/admin-seed-schema.ts';
import { faultRuleSchema } from '../faults/fault-rule.ts';
import { observationPayloadShape } from '../signals/observation.ts';

const ago = z.number().nonnegative().optional();
const KNOWN_KEYS = new Set(['name', 'description', 'users', 'observations', 'faults']);

/**
 * One seeded observation: the Collection shape, with a time relative to the sandbox's start
 * (`daysAgo + hoursAgo + minutesAgo + secondsAgo`, all default 0) so a scenario never ages, and the
 * serviceId defaulting to the sandbox's.
 */
export const scenarioObservationSchema = z.strictObject({
  serviceId: serviceIdSchema.optional(),
  accountId: accountIdSchema,
  unitId: unitIdSchema,
  verificationStatus: verificationStatusSchema,
  interactionId: interactionIdSchema,
  sdkVersionId: sdkVersionIdSchema.optional(),
  daysAgo: ago,
  hoursAgo: ago,
  minutesAgo: ago,
  secondsAgo: ago,
  ...observationPayloadShape,
});
export type ScenarioObservation = z.infer<typeof scenarioObservationSchema>;

/**
 * A sandbox scenario file (YAML): users and devices for the Admin API, observations for the Trust
 * Signals API, faults to inject. Times are relative to the sandbox's start so a scenario never ages.
 */
export const scenarioSchema = z
  .looseObject({
    name: z.string().default('unnamed'),
    description: z.string().optional(),
    users: z.array(seedUserSchema).default([]),
    observations: z.array(scenarioObservationSchema).default([]),
    /** Faults active from the start (and restored by `POST /sandbox/reset`). */
    faults: z.array(faultRuleSchema).default([]),
  })
  // Unknown top-level keys are typos, except `x-...` keys (YAML anchor fixtures).
  .superRefine((s, ctx) => {
    for (const key of Object.keys(s)) {
      if (!KNOWN_KEYS.has(key) && !key.startsWith('x-')) {
        ctx.addIssue({ code: 'custom', path: [key], message: 'unknown key (fixtures must start with x-)' });
      }
    }
  });
export type Scenario = z.infer<typeof scenarioSchema>;
/** A scenario as written (defaults not yet applied), e.g. an object literal in a test. */
export type ScenarioInput = z.input<typeof scenarioSchema>;

/** Milliseconds before the sandbox start that an observation's `*Ago` fields add up to. */
export function offsetMsOf(o: ScenarioObservation): number {
  return (
    (o.daysAgo ?? 0) * 86_400_000 +
    (o.hoursAgo ?? 0) * 3_600_000 +
    (o.minutesAgo ?? 0) * 60_000 +
    (o.secondsAgo ?? 0) * 1000
  );
}
