/**
 * How the login's first factor (the password) went, as the login backend says: `not_checked` when
 * it asks riskgate before or instead of checking it. A lock-out waits for `passed` (policies/README.md,
 * "A lock-out is never a weapon").
 */
export const FIRST_FACTOR_OUTCOMES = ['passed', 'failed', 'not_checked'] as const;
export type FirstFactor = (typeof FIRST_FACTOR_OUTCOMES)[number];

/** The /decide request as the policy sees it (`request` in CEL). */
export interface PolicyRequest {
  accountId: string;
  userId?: string | undefined;
  deviceId?: string | undefined;
  platform?: 'browser' | 'mobile' | undefined;
  unitId?: string | undefined;
  verificationStatus?: string | undefined;
  interactionId?: string | undefined;
  sdkVersionId?: string | undefined;
  ip?: string | undefined;
  userAgent?: string | undefined;
  /** Omitted: the backend did not say (a lock-out treats it as not passed). */
  firstFactor?: FirstFactor | undefined;
  /** Free attributes from the login backend (strings, numbers, booleans). */
  context: Record<string, string | number | boolean>;
}
