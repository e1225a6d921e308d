import { z } from 'zod';
import { seedUserSchema } from '../admin/admin-seed-schema.ts';

/**
 * A sandbox scenario file (YAML): users and devices for the Admin API, observations for the Trust
 * Signals API, faults to inject. Times are relative to the sandbox's start so a scenario never ages.
 */
export const scenarioSchema = z.object({
  name: z.string().default('unnamed'),
  users: z.array(seedUserSchema).default([]),
  // Extended by the signals work: observations, faults, admin-dashboard events.
});
export type Scenario = z.infer<typeof scenarioSchema>;
