import { z } from 'zod';
import { adminDeviceSchema, adminUserSchema, type FACTORS, userStatusSchema } from './admin-schemas.ts';

/**
 * Response bodies of the Admin API calls riskgate makes (docs/vendor-api.md#admin-endpoints).
 * Resource shapes (user, device) live in admin-schemas.ts; these are the envelopes around them.
 */

/** GET /info. */
export const adminInfoSchema = z.object({
  name: z.string(),
  trial: z.boolean(),
  description: z.string().optional(),
  expires_at: z.number().optional(),
  accounts_migration_callback_url: z.string().optional(),
  session_timeout: z.number().optional(),
});
export type AdminInfo = z.infer<typeof adminInfoSchema>;

/** GET /users/{id}/devices. */
export const userDevicesSchema = z.object({
  count: z.number().int().nonnegative(),
  devices: z.array(adminDeviceSchema),
});
export type UserDevices = z.infer<typeof userDevicesSchema>;

/** GET /users. */
export const userPageSchema = z.object({
  users: z.array(adminUserSchema),
  count: z.number().int().nonnegative(),
  total: z.number().int().nonnegative(),
  limit: z.number().int().nonnegative(),
  offset: z.number().int().nonnegative(),
});
export type UserPage = z.infer<typeof userPageSchema>;

/** PUT /users/{id} 200: only the attributes that were updated. */
export const updatedUserSchema = z.object({
  allowed_factors: z.array(z.string()).optional(),
  status: userStatusSchema.optional(),
  username: z.string().optional(),
  display_name: z.string().optional(),
  max_attempts: z.number().optional(),
});
export type UpdatedUser = z.infer<typeof updatedUserSchema>;

/** DELETE /devices/{id} 200. */
export const deletedDeviceSchema = z.object({
  result: z.enum(['success', 'success_2fa_disabled']),
  archived_at: z.number().optional(),
});

/** POST /users/{id}/one_time_code 200. */
export const oneTimeCodeSchema = z.object({ one_time_code: z.string().min(1), expiration: z.number() });
export type OneTimeCode = z.infer<typeof oneTimeCodeSchema>;

/** Statuses `PUT /users/{id}` accepts. */
export const SETTABLE_USER_STATUSES = ['enabled', 'bypass', 'locked_out', 'disabled'] as const;
export type SettableUserStatus = (typeof SETTABLE_USER_STATUSES)[number];
export type Factor = (typeof FACTORS)[number];
