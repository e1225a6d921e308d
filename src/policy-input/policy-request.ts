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
  /** Free attributes from the login backend (strings, numbers, booleans). */
  context: Record<string, string | number | boolean>;
}
