import {
  type HistoricalProximityResponse,
  INGRESS_SUPPORTING_SIGNAL_TYPES,
  type LatestProximityResponse,
  SIGNAL_TYPES,
  SUPPORTING_SIGNAL_TYPES,
  type SupportingSignalType,
} from '../../signals/signal-schemas.ts';
import { haversineKm } from './great-circle.ts';
import { formatObservationTime, type Observation } from './observation.ts';

/**
 * Device proximity from supporting-signal overlaps between two observations.
 *
 * Model (documented in docs/sandbox.md, "How the signals are computed"): each supporting signal that both observations carry data for is
 * "evaluated". A matched signal of type t is evidence of co-location with weight w(t) × s, where
 * s = 1 − 0.5^matchCount for counted overlaps (one shared BLE device is weaker than three) and 1
 * otherwise; evidence combines as independent: P = 1 − Π(1 − w·s). An evaluated signal that did not
 * match halves its weight into a penalty: confidence = P × Π(1 − w/2). The result is in [0,1],
 * rounded to three decimals. Nothing evaluated → no match (null / insufficient_observations).
 */

interface SupportingSignal {
  type: SupportingSignalType;
  details: { matched: boolean; matchCount: number | null };
}

export interface ProximityMatch {
  proximityConfidence: number;
  supportingSignals: SupportingSignal[];
}

/** Evidence weight of a matched signal. Short-range radios weigh most, ingress geography least. */
export const SUPPORTING_SIGNAL_WEIGHTS: Record<SupportingSignalType, number> = {
  connectedBleDeviceOverlap: 0.85,
  wifiNetworkOverlap: 0.7,
  connectedWifiNetworkOverlap: 0.6,
  scannedBleDeviceOverlap: 0.6,
  nearbyDeviceOverlap: 0.6,
  locationOverlap: 0.6,
  connectedNetworkDeviceOverlap: 0.5,
  reportedIpOverlap: 0.35,
  ingressIpOverlap: 0.35,
  ingressIpCityOverlap: 0.15,
  ingressIpRegionOverlap: 0.08,
  ingressIpCountryOverlap: 0.04,
  ingressIpContinentOverlap: 0.02,
};

/** Two GPS fixes within this distance are "the same place". */
export const LOCATION_OVERLAP_KM = 0.2;

const INGRESS: ReadonlySet<SupportingSignalType> = new Set(INGRESS_SUPPORTING_SIGNAL_TYPES);
export const ALL_TYPES: readonly SupportingSignalType[] = SUPPORTING_SIGNAL_TYPES;
export const NON_INGRESS_TYPES = SUPPORTING_SIGNAL_TYPES.filter((t) => !INGRESS.has(t));
export const INGRESS_TYPES = SUPPORTING_SIGNAL_TYPES.filter((t) => INGRESS.has(t));

function countOverlap(a: string[] | undefined, b: string[] | undefined): number | undefined {
  if (!a?.length || !b?.length) return undefined;
  const set = new Set(a);
  let n = 0;
  for (const x of new Set(b)) if (set.has(x)) n++;
  return n;
}

function same<T>(a: T | undefined, b: T | undefined): boolean | undefined {
  return a === undefined || b === undefined ? undefined : a === b;
}

/** Evaluates one supporting signal; undefined when either side lacks the data. */
function evaluate(t: SupportingSignalType, a: Observation, b: Observation): SupportingSignal | undefined {
  let matched: boolean | undefined;
  let count: number | undefined;
  switch (t) {
    case 'reportedIpOverlap':
      matched = same(a.reportedIp, b.reportedIp);
      break;
    case 'wifiNetworkOverlap':
      count = countOverlap(a.wifiNetworks, b.wifiNetworks);
      break;
    case 'connectedWifiNetworkOverlap':
      matched = same(a.connectedWifi, b.connectedWifi);
      break;
    case 'connectedNetworkDeviceOverlap':
      count = countOverlap(a.connectedNetworkDevices, b.connectedNetworkDevices);
      break;
    case 'connectedBleDeviceOverlap':
      count = countOverlap(a.connectedBleDevices, b.connectedBleDevices);
      break;
    case 'scannedBleDeviceOverlap':
      count = countOverlap(a.scannedBleDevices, b.scannedBleDevices);
      break;
    case 'nearbyDeviceOverlap':
      count = countOverlap(a.nearbyDevices, b.nearbyDevices);
      break;
    case 'locationOverlap':
      matched = a.gps && b.gps ? haversineKm(a.gps, b.gps) <= LOCATION_OVERLAP_KM : undefined;
      break;
    case 'ingressIpOverlap':
      matched = same(a.ingress?.ip, b.ingress?.ip);
      break;
    case 'ingressIpCityOverlap':
      matched = same(a.ingress?.city, b.ingress?.city);
      break;
    case 'ingressIpRegionOverlap':
      matched = same(a.ingress?.region, b.ingress?.region);
      break;
    case 'ingressIpCountryOverlap':
      matched = same(a.ingress?.country, b.ingress?.country);
      break;
    case 'ingressIpContinentOverlap':
      matched = same(a.ingress?.continent, b.ingress?.continent);
      break;
  }
  if (count !== undefined) return { type: t, details: { matched: count > 0, matchCount: count } };
  if (matched === undefined) return undefined;
  return { type: t, details: { matched, matchCount: null } };
}

/** Compares two observations over `types`; undefined when no type could be evaluated. */
export function matchObservations(
  a: Observation,
  b: Observation,
  types: readonly SupportingSignalType[],
): ProximityMatch | undefined {
  const supportingSignals: SupportingSignal[] = [];
  let missP = 1;
  let penalty = 1;
  for (const t of types) {
    const s = evaluate(t, a, b);
    if (!s) continue;
    supportingSignals.push(s);
    const w = SUPPORTING_SIGNAL_WEIGHTS[t];
    if (s.details.matched) {
      const strength = s.details.matchCount === null ? 1 : 1 - 0.5 ** s.details.matchCount;
      missP *= 1 - w * strength;
    } else {
      penalty *= 1 - w / 2;
    }
  }
  if (supportingSignals.length === 0) return undefined;
  const confidence = (1 - missP) * penalty;
  return { proximityConfidence: Math.round(confidence * 1000) / 1000, supportingSignals };
}

/**
 * Latest proximity: the most recent observation of each side. Either side empty, or no supporting
 * signal both sides carry data for → insufficient_observations.
 */
export function computeLatestProximity(
  subject: readonly Observation[],
  baseline: readonly Observation[],
  types: readonly SupportingSignalType[],
): LatestProximityResponse {
  const signalType = SIGNAL_TYPES.latestProximity;
  const s = subject[subject.length - 1];
  const b = baseline[baseline.length - 1];
  if (!s || !b) return { signalType, success: false, reason: 'insufficient_observations' };
  const match = matchObservations(s, b, types);
  if (!match) return { signalType, success: false, reason: 'insufficient_observations' };
  return {
    signalType,
    success: true,
    result: match,
    observationTimesByUnit: {
      baselineUnitId: formatObservationTime(b.timeMs),
      subjectUnitId: formatObservationTime(s.timeMs),
    },
  };
}

/** Pairs beyond this many observations per side are not searched (the latest are kept). */
export const HISTORICAL_MAX_PER_SIDE = 250;

/**
 * Historical proximity: every (subject, baseline) pair in the window, best by confidence (ties: the
 * more recent pair). bestMatch uses only non-ingress signals, bestIngressMatch only ingress ones;
 * either is null when no pair could be evaluated for it. observationTimesByUnit names the pair of
 * bestMatch, or of bestIngressMatch when bestMatch is null. Either side empty →
 * insufficient_observations.
 */
export function computeHistoricalProximity(
  subject: readonly Observation[],
  baseline: readonly Observation[],
  types: readonly SupportingSignalType[],
): HistoricalProximityResponse {
  const signalType = SIGNAL_TYPES.historicalProximity;
  if (subject.length === 0 || baseline.length === 0) {
    return { signalType, success: false, reason: 'insufficient_observations' };
  }
  const nonIngress = types.filter((t) => !INGRESS.has(t));
  const ingress = types.filter((t) => INGRESS.has(t));
  const subj = subject.slice(-HISTORICAL_MAX_PER_SIDE);
  const base = baseline.slice(-HISTORICAL_MAX_PER_SIDE);
  type Best = { match: ProximityMatch; s: Observation; b: Observation; recency: number };
  let best: Best | undefined;
  let bestIngress: Best | undefined;
  const better = (cand: Best, cur: Best | undefined) =>
    !cur ||
    cand.match.proximityConfidence > cur.match.proximityConfidence ||
    (cand.match.proximityConfidence === cur.match.proximityConfidence && cand.recency > cur.recency);
  for (const s of subj) {
    for (const b of base) {
      if (s === b) continue;
      const recency = Math.min(s.timeMs, b.timeMs);
      if (nonIngress.length) {
        const m = matchObservations(s, b, nonIngress);
        if (m) {
          const cand = { match: m, s, b, recency };
          if (better(cand, best)) best = cand;
        }
      }
      if (ingress.length) {
        const m = matchObservations(s, b, ingress);
        if (m) {
          const cand = { match: m, s, b, recency };
          if (better(cand, bestIngress)) bestIngress = cand;
        }
      }
    }
  }
  const named = best ?? bestIngress;
  return {
    signalType,
    success: true,
    result: { bestMatch: best?.match ?? null, bestIngressMatch: bestIngress?.match ?? null },
    ...(named && {
      observationTimesByUnit: {
        baselineUnitId: formatObservationTime(named.b.timeMs),
        subjectUnitId: formatObservationTime(named.s.timeMs),
      },
    }),
  };
}
