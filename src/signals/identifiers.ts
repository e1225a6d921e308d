import { z } from 'zod';

/**
 * Identifier rules of the Trust Signals API (docs/vendor-api.md#identifiers).
 * Shared by the client (which refuses invalid parameters before any network call), the sandbox
 * (which answers 400) and the /decide request schema (which names the bad field).
 */
export const ACCOUNT_ID_PATTERN = /^[A-Za-z0-9-]{1,50}$/;
export const UNIT_ID_PATTERN = /^[A-Za-z0-9-]+$/;
export const INTERACTION_ID_PATTERN = /^[A-Za-z0-9-]+$/;
export const SDK_VERSION_ID_PATTERN = /^[A-Za-z0-9.\-/]+$/;
export const UUID_PATTERN = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

export const MAX_UNIT_ID_LENGTH = 1000;
export const MAX_INTERACTION_ID_LENGTH = 1000;
export const MAX_SDK_VERSION_ID_LENGTH = 50;
/** The longest observation window any signal accepts. */
export const MAX_WINDOW_MS = 31 * 24 * 3600 * 1000;
/** Batch remote-access-tool size limits. */
export const MIN_BATCH_ITEMS = 1;
export const MAX_BATCH_ITEMS = 100;
/** Default `cooldownSeconds` of new-browser. */
export const DEFAULT_COOLDOWN_SECONDS = 3600;

export const VERIFICATION_STATUSES = ['verified', 'unverified', 'fraud'] as const;
export type VerificationStatus = (typeof VERIFICATION_STATUSES)[number];

export const serviceIdSchema = z.string().regex(UUID_PATTERN, 'must be a UUID');
export const accountIdSchema = z
  .string()
  .regex(ACCOUNT_ID_PATTERN, 'must be 1 to 50 characters of A-Z, a-z, 0-9 and -');
export const unitIdSchema = z
  .string()
  .max(MAX_UNIT_ID_LENGTH, `must be at most ${MAX_UNIT_ID_LENGTH} characters`)
  .regex(UNIT_ID_PATTERN, 'must contain only A-Z, a-z, 0-9 and -');
export const interactionIdSchema = z
  .string()
  .max(MAX_INTERACTION_ID_LENGTH, `must be at most ${MAX_INTERACTION_ID_LENGTH} characters`)
  .regex(INTERACTION_ID_PATTERN, 'must contain only A-Z, a-z, 0-9 and -');
export const sdkVersionIdSchema = z
  .string()
  .max(MAX_SDK_VERSION_ID_LENGTH, `must be at most ${MAX_SDK_VERSION_ID_LENGTH} characters`)
  .regex(SDK_VERSION_ID_PATTERN, 'must contain only A-Z, a-z, 0-9 and . - /');
export const verificationStatusSchema = z.enum(VERIFICATION_STATUSES);

/** The identifiers of one side (a unit's observations); optional ones must come in order. */
export interface UnitSelector {
  unitId?: string | undefined;
  verificationStatus?: VerificationStatus | undefined;
  interactionId?: string | undefined;
  sdkVersionId?: string | undefined;
}

/**
 * The ordering rule: verificationStatus requires unitId; interactionId requires verificationStatus.
 * Returns the name of the first identifier that breaks it (without prefix), or undefined.
 */
export function findOrderingViolation(sel: UnitSelector): 'verificationStatus' | 'interactionId' | undefined {
  if (sel.verificationStatus !== undefined && sel.unitId === undefined) return 'verificationStatus';
  if (sel.interactionId !== undefined && sel.verificationStatus === undefined) return 'interactionId';
  return undefined;
}
