import { type NewBrowserResponse, SIGNAL_TYPES } from '../../signals/signal-schemas.ts';
import {
  BROWSER_PROFILE_FIELDS,
  type FingerprintField,
  FULL_FINGERPRINT_FIELDS,
  formatObservationTime,
  type Observation,
} from './observation.ts';

export const MATCH_SCOPES = ['browser_profile', 'full_fingerprint'] as const;
export type MatchScope = (typeof MATCH_SCOPES)[number];

export interface NewBrowserInput {
  /** The subject side's observations in the window, oldest first. */
  subject: readonly Observation[];
  /**
   * The baseline side's observations in the window, oldest first; `undefined` when the request had
   * no baselineAccountId, in which case the subject's own earlier observations are the baseline.
   */
  baseline: readonly Observation[] | undefined;
  matchScope: MatchScope;
  /** Baseline fingerprints must be strictly older than this (now − cooldownSeconds), ms. */
  cooldownCutoffMs: number;
}

/**
 * New browser (docs/vendor-api.md#signal-endpoints): the subject's latest complete fingerprint
 * (every field of the match scope present) against baseline fingerprints older than the cooldown
 * cutoff. known = at least one baseline fingerprint equal on every field of the scope. When unknown
 * and the baseline had candidates, mismatchedFields lists the fields that differ from the closest one
 * (fewest differing fields; ties: the most recent). A baseline field that is missing counts as
 * different.
 */
export function computeNewBrowser(input: NewBrowserInput): NewBrowserResponse {
  const signalType = SIGNAL_TYPES.newBrowser;
  const fields: readonly FingerprintField[] =
    input.matchScope === 'full_fingerprint' ? FULL_FINGERPRINT_FIELDS : BROWSER_PROFILE_FIELDS;
  const { subject } = input;
  if (subject.length > 0 && subject.every((o) => o.platform !== 'browser')) {
    return { signalType, success: false, reason: 'unsupported_platform' };
  }
  let latest: Observation | undefined;
  for (let i = subject.length - 1; i >= 0; i--) {
    const o = subject[i]!;
    if (o.platform === 'browser' && o.browser && fields.every((f) => o.browser![f] !== undefined)) {
      latest = o;
      break;
    }
  }
  if (!latest) return { signalType, success: false, reason: 'insufficient_observations' };

  const pool = input.baseline ?? subject.filter((o) => o.timeMs < latest.timeMs);
  let closest: { o: Observation; diff: FingerprintField[] } | undefined;
  let known = false;
  for (let i = pool.length - 1; i >= 0; i--) {
    const o = pool[i]!;
    if (o === latest || !o.browser || o.platform !== 'browser' || o.timeMs >= input.cooldownCutoffMs)
      continue;
    const diff = fields.filter((f) => o.browser![f] !== latest.browser![f]);
    if (diff.length === 0) {
      known = true;
      break;
    }
    if (!closest || diff.length < closest.diff.length) closest = { o, diff };
  }
  return {
    signalType,
    success: true,
    result: { known },
    ...(!known && closest && { mismatchedFields: closest.diff }),
    unitId: latest.unitId,
    verificationStatus: latest.verificationStatus,
    interactionId: latest.interactionId,
    observationTime: formatObservationTime(latest.timeMs),
  };
}
