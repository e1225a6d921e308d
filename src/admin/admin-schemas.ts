import { z } from 'zod';

/**
 * Admin API resource shapes (docs/vendor-api.md#admin-resources). Used by the Admin client
 * to parse answers, by the policy engine for CEL types, and by the sandbox's tests.
 */

export const USER_STATUSES = ['enabled', 'bypass', 'locked_out', 'disabled', 'archived'] as const;
export const userStatusSchema = z.enum(USER_STATUSES);
export type UserStatus = z.infer<typeof userStatusSchema>;

export const FACTORS = [
  'approve',
  'mobile_auth',
  'mobile_totp',
  'passcode',
  'qr_code',
  'sms',
  'hwtoken_hotp',
] as const;

export const adminUserSchema = z.object({
  user_id: z.string(),
  username: z.string(),
  display_name: z.string().optional(),
  allowed_factors: z.array(z.string()),
  failed_attempts: z.number(),
  max_attempts: z.number(),
  service_defined_username: z.boolean(),
  status: userStatusSchema,
  created_at: z.number(),
  updated_at: z.number(),
  archived_at: z.number().optional(),
  last_active_at: z.string().optional(),
});
export type AdminUser = z.infer<typeof adminUserSchema>;

export const DEVICE_TYPES = ['android', 'ios', 'hwtoken', 'sms'] as const;
export const adminDeviceSchema = z.object({
  device_id: z.string(),
  user_id: z.string(),
  capabilities: z.array(z.string()),
  display_name: z.string(),
  enrolled: z.boolean(),
  enrolled_at: z.number().optional(),
  created_at: z.number(),
  updated_at: z.number(),
  archived_at: z.number().optional(),
  type: z.enum(DEVICE_TYPES),
  version: z.string().optional(),
  version_supported: z.boolean().optional(),
  number: z.string().optional(),
  sms_activation_code: z.string().optional(),
  sms_code_expires_at: z.number().optional(),
  account_recovery_flow_binding_enabled: z.boolean().optional(),
  device_integrity: z.string().optional(),
  device_integrity_updated_at: z.number().optional(),
  migrated_from_device_id: z.string().optional(),
  migrated_to_device_id: z.string().optional(),
  migrated_at: z.number().optional(),
});
export type AdminDevice = z.infer<typeof adminDeviceSchema>;

/** Error envelope of the Admin and Log APIs. */
export const vendorErrorBodySchema = z.object({
  error: z.literal(true),
  code: z.number().int(),
  message: z.string(),
  detail: z.string().optional(),
});
export type VendorErrorBody = z.infer<typeof vendorErrorBodySchema>;
