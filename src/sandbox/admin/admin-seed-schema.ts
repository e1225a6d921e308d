import { z } from 'zod';
import { DEVICE_TYPES } from '../../admin/admin-schemas.ts';

/**
 * The `users` part of a sandbox scenario file: Admin users with their devices. Identifiers may be
 * pinned so docs and tests can name them; otherwise the sandbox generates them.
 */
export const seedDeviceSchema = z.object({
  device_id: z.string().optional(),
  type: z.enum(DEVICE_TYPES),
  display_name: z.string().optional(),
  enrolled: z.boolean().default(true),
  version: z.string().optional(),
  version_supported: z.boolean().optional(),
  number: z.string().optional(),
  device_integrity: z.string().optional(),
  account_recovery_flow_binding_enabled: z.boolean().optional(),
  /** Enrolled this many days before the sandbox started. Default 30. */
  enrolled_days_ago: z.number().nonnegative().default(30),
});

export const seedUserSchema = z.object({
  username: z.string(),
  user_id: z.string().optional(),
  display_name: z.string().optional(),
  status: z.enum(['enabled', 'bypass', 'locked_out', 'disabled']).optional(),
  allowed_factors: z.array(z.string()).optional(),
  failed_attempts: z.number().int().nonnegative().default(0),
  max_attempts: z.number().int().min(5).max(40).optional(),
  devices: z.array(seedDeviceSchema).default([]),
});

export type SeedUser = z.infer<typeof seedUserSchema>;
export type SeedDevice = z.infer<typeof seedDeviceSchema>;
