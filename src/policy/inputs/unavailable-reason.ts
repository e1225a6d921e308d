/**
 * Why an input a policy reads has no value, and what each reason counts towards: the one place
 * these reasons are named. Everything that asks "is this degraded", "is this an outage", "does
 * `onUnavailable` apply" asks here.
 */

/** Another platform's signal (a browser-only signal on a mobile login): never counted. */
export const NOT_APPLICABLE = 'not_applicable';
/**
 * The request lacked the identifiers the input needs (no userId, no interactionId, no baseline):
 * the caller's gap, not the vendor's. Its `onUnavailable` applies and the answer says degraded, so
 * leaving a field out never switches a protective input off; it is no outage and no state of
 * riskgate's (the degraded rule's floor does not apply).
 */
export const MISSING_IDENTIFIERS = 'missing_identifiers';
/**
 * The deployment does not provide the input (history without the Log API, velocity without a
 * feature store, lists without a database): a choice, not a failure, so neither degraded nor an
 * outage (its `onUnavailable` still applies). riskgate warns about it once at start-up.
 */
export const NOT_CONFIGURED = 'not_configured';
/**
 * An input the policy reads that the decision service did not pass at all: only a replay of a log
 * that did not record it (which the replay lists as uncertain) or a test leaves one out.
 */
export const MISSING = 'missing';

/** Why an input is unavailable: one of the above, or what its fetch ran into (src/decide/gather.ts). */
export type UnavailableReason =
  | typeof NOT_APPLICABLE
  | typeof MISSING_IDENTIFIERS
  | typeof NOT_CONFIGURED
  | typeof MISSING
  | 'timeout'
  | 'deadline'
  | 'circuit_open'
  | `RG_ERR_${string}`;

/** What one reason counts towards. */
export interface ReasonWeight {
  /** The input's `onUnavailable` applies (else it is ignored). */
  treated: boolean;
  /** Counts towards the policy's `outage` section. */
  outage: boolean;
  /** riskgate's own state: `explanation.degraded.inputs`, the degraded rule's floor. */
  degradesEvaluation: boolean;
  /** The answer's `degraded` flag. */
  degradesAnswer: boolean;
}

const FAILURE: ReasonWeight = { treated: true, outage: true, degradesEvaluation: true, degradesAnswer: true };

const WEIGHTS: Readonly<Record<string, ReasonWeight>> = {
  [NOT_APPLICABLE]: { treated: false, outage: false, degradesEvaluation: false, degradesAnswer: false },
  [MISSING_IDENTIFIERS]: { treated: true, outage: false, degradesEvaluation: false, degradesAnswer: true },
  [NOT_CONFIGURED]: { treated: true, outage: false, degradesEvaluation: false, degradesAnswer: false },
  [MISSING]: { treated: true, outage: true, degradesEvaluation: false, degradesAnswer: false },
};

/** What `reason` counts towards; any reason not named above is a failure to gather the input. */
export function reasonWeight(reason: string): ReasonWeight {
  return WEIGHTS[reason] ?? FAILURE;
}
