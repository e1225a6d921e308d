import type { FailureReason } from '../../signals/signal-schemas.ts';
import type { SignalThresholds } from '../sandbox-config.ts';
import { formatObservationTime, type Observation } from './observation.ts';
import { matchesFilter, type UnitFilter } from './observation-store.ts';

export const BASELINE_SCOPES = ['interaction_anchored', 'full_history'] as const;
export type BaselineScope = (typeof BASELINE_SCOPES)[number];

/** One scoring's outcome, before it is wrapped as a GET envelope or a batch item. */
export interface RatOutcome {
  success: boolean;
  reason?: FailureReason;
  result?: { anomaly: boolean; anomalyConfidence: number };
  observationTime?: string;
}

/** A browser session: one (unitId, interactionId), its input counts summed over its observations. */
interface Session {
  key: string;
  firstMs: number;
  lastMs: number;
  mouseEvents: number;
  keystrokeEvents: number;
  features: Partial<Record<FeatureName, number>>;
  browserName?: string | undefined;
  browserOs?: string | undefined;
}

type FeatureName = 'mouseIntervalMs' | 'mouseJumpRatio' | 'keyDwellMs';

/**
 * The timing features compared with the user's own baseline, each with the smallest standard
 * deviation assumed (a very regular user must not turn every small wobble into an anomaly).
 */
const FEATURES: readonly { name: FeatureName; minStd: number }[] = [
  { name: 'mouseIntervalMs', minStd: 3 },
  { name: 'mouseJumpRatio', minStd: 0.03 },
  { name: 'keyDwellMs', minStd: 10 },
];

/** Confidence at which `anomaly` is true. */
export const RAT_ANOMALY_CONFIDENCE = 0.5;

const DESKTOP_OS = /^(windows|mac|os x|linux|ubuntu|debian|fedora|chrome ?os|cros)/i;
const DESKTOP_BROWSER = /^(chrome|chromium|firefox|edge|safari|opera|brave|vivaldi)/i;

export interface RatScoringInput {
  /** The account's observations (any order of units), oldest first, already limited to the lookback. */
  account: readonly Observation[];
  filter: UnitFilter;
  baselineScope: BaselineScope;
  thresholds: SignalThresholds;
}

/**
 * Scores the session named by `filter` (exact unitId, verificationStatus, interactionId).
 *
 * Model (documented in docs/sandbox.md, "How the signals are computed"): prerequisites in the vendor's order (docs/vendor-api.md#remote-access-tool)
 * — a browser observation with a desktop OS and browser (else unsupported_platform), at least
 * `ratMinMouseEvents` and `ratMinKeystrokeEvents` in the session (else insufficient_observations), at least
 * `ratMinPriorSessions` other browser sessions of the account with both mouse and keystroke events
 * (else no_user_baseline; interaction_anchored counts only sessions that started before the scored
 * one). Score: for each timing feature present in the session and in at least two baseline sessions,
 * z = |x − mean| / max(std, minStd); S² = mean of z²; anomalyConfidence = 1 − exp(−S²/18), three
 * decimals; anomaly = confidence ≥ 0.5 (about 4.2 standard deviations). No comparable feature →
 * confidence 0.
 */
export function scoreRemoteAccessTool(input: RatScoringInput): RatOutcome {
  const { account, filter, thresholds } = input;
  const scored = account.filter((o) => matchesFilter(o, filter));
  if (scored.length === 0) return { success: false, reason: 'insufficient_observations' };
  const last = scored[scored.length - 1]!;
  const observationTime = formatObservationTime(last.timeMs);
  if (scored.some((o) => o.platform !== 'browser')) return { success: false, reason: 'unsupported_platform' };
  const session = summarize(scored, '');
  if (
    (session.browserOs !== undefined && !DESKTOP_OS.test(session.browserOs)) ||
    (session.browserName !== undefined && !DESKTOP_BROWSER.test(session.browserName))
  ) {
    return { success: false, reason: 'unsupported_platform' };
  }
  if (
    session.mouseEvents < thresholds.ratMinMouseEvents ||
    session.keystrokeEvents < thresholds.ratMinKeystrokeEvents
  ) {
    return { success: false, reason: 'insufficient_observations' };
  }

  const scoredKey = `${filter.unitId}\u0000${filter.interactionId}`;
  const groups = new Map<string, Observation[]>();
  for (const o of account) {
    if (o.platform !== 'browser' || !o.session) continue;
    const key = `${o.unitId}\u0000${o.interactionId}`;
    if (key === scoredKey) continue;
    let g = groups.get(key);
    if (!g) {
      g = [];
      groups.set(key, g);
    }
    g.push(o);
  }
  const baseline: Session[] = [];
  for (const [key, obs] of groups) {
    const s = summarize(obs, key);
    if (s.mouseEvents === 0 || s.keystrokeEvents === 0) continue;
    if (input.baselineScope === 'interaction_anchored' && s.firstMs >= session.firstMs) continue;
    baseline.push(s);
  }
  if (baseline.length < thresholds.ratMinPriorSessions) return { success: false, reason: 'no_user_baseline' };

  let sumZ2 = 0;
  let compared = 0;
  for (const { name, minStd } of FEATURES) {
    const x = session.features[name];
    if (x === undefined) continue;
    const values = baseline.flatMap((s) => (s.features[name] === undefined ? [] : [s.features[name]!]));
    if (values.length < 2) continue;
    const mean = values.reduce((a, b) => a + b, 0) / values.length;
    const std = Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / values.length);
    const z = Math.abs(x - mean) / Math.max(std, minStd);
    sumZ2 += z * z;
    compared++;
  }
  const confidence = compared === 0 ? 0 : Math.round((1 - Math.exp(-sumZ2 / compared / 18)) * 1000) / 1000;
  return {
    success: true,
    result: { anomaly: confidence >= RAT_ANOMALY_CONFIDENCE, anomalyConfidence: confidence },
    observationTime,
  };
}

function summarize(obs: readonly Observation[], key: string): Session {
  const s: Session = {
    key,
    firstMs: obs[0]!.timeMs,
    lastMs: obs[obs.length - 1]!.timeMs,
    mouseEvents: 0,
    keystrokeEvents: 0,
    features: {},
  };
  // Latest value wins for features and browser identity: walk oldest to newest, overwriting.
  for (const o of obs) {
    if (o.timeMs < s.firstMs) s.firstMs = o.timeMs;
    if (o.timeMs > s.lastMs) s.lastMs = o.timeMs;
    if (o.browser?.browser_name) s.browserName = o.browser.browser_name;
    if (o.browser?.browser_os) s.browserOs = o.browser.browser_os;
    const input = o.session;
    if (!input) continue;
    s.mouseEvents += input.mouseEvents;
    s.keystrokeEvents += input.keystrokeEvents;
    for (const { name } of FEATURES) if (input[name] !== undefined) s.features[name] = input[name];
  }
  return s;
}
