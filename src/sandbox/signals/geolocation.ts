import {
  type GeolocationResponse,
  type GeovelocityResponse,
  SIGNAL_TYPES,
} from '../../signals/signal-schemas.ts';
import { haversineKm, roundOneDecimal } from './great-circle.ts';
import { formatObservationTime, type Observation } from './observation.ts';

type Datapoint = NonNullable<GeolocationResponse['result']>['datapoints'][number];
type DatapointValue =
  | { name: string; valueType: 'geo'; lat: number; lon: number }
  | { name: string; valueType: 'string'; value: string };

/**
 * Geolocation: the latest value of each datapoint with at least one observation in the selection
 * (oldest first). GPS counts from mobile observations only; ingress geolocation from any platform.
 * No datapoint at all → insufficient_observations.
 */
export function computeGeolocation(selected: readonly Observation[]): GeolocationResponse {
  const signalType = SIGNAL_TYPES.geolocation;
  const found = new Map<string, Datapoint>();
  let latestUsed = Number.NEGATIVE_INFINITY;
  const put = (o: Observation, dp: DatapointValue) => {
    if (found.has(dp.name)) return;
    found.set(dp.name, {
      ...dp,
      observationTime: formatObservationTime(o.timeMs),
      unitId: o.unitId,
      verificationStatus: o.verificationStatus,
      interactionId: o.interactionId,
    });
    if (o.timeMs > latestUsed) latestUsed = o.timeMs;
  };
  for (let i = selected.length - 1; i >= 0 && found.size < DATAPOINT_ORDER.length; i--) {
    const o = selected[i]!;
    if (o.gps && o.platform === 'mobile')
      put(o, { name: 'geo', valueType: 'geo', lat: o.gps.lat, lon: o.gps.lon });
    const g = o.ingress;
    if (!g) continue;
    if (g.lat !== undefined && g.lon !== undefined) {
      put(o, { name: 'ingress_ip_geo', valueType: 'geo', lat: g.lat, lon: g.lon });
    }
    if (g.lat !== undefined) put(o, { name: 'ingress_ip_lat', valueType: 'string', value: String(g.lat) });
    if (g.lon !== undefined) put(o, { name: 'ingress_ip_lon', valueType: 'string', value: String(g.lon) });
    if (g.city) put(o, { name: 'ingress_ip_city', valueType: 'string', value: g.city });
    if (g.region) put(o, { name: 'ingress_ip_region', valueType: 'string', value: g.region });
    if (g.country) put(o, { name: 'ingress_ip_country', valueType: 'string', value: g.country });
    if (g.continent) put(o, { name: 'ingress_ip_continent', valueType: 'string', value: g.continent });
  }
  if (found.size === 0) return { signalType, success: false, reason: 'insufficient_observations' };
  const datapoints = DATAPOINT_ORDER.flatMap((name) => {
    const dp = found.get(name);
    return dp ? [dp] : [];
  });
  return {
    signalType,
    success: true,
    result: { datapoints },
    observationTime: formatObservationTime(latestUsed),
  };
}

const DATAPOINT_ORDER = [
  'geo',
  'ingress_ip_geo',
  'ingress_ip_lat',
  'ingress_ip_lon',
  'ingress_ip_city',
  'ingress_ip_region',
  'ingress_ip_country',
  'ingress_ip_continent',
];

/**
 * Geovelocity from GPS fixes of mobile observations, consecutive pairs in time order. Decisions the
 * spec leaves open (documented in docs/sandbox.md, "How the signals are computed"):
 * - nothing selected, or fewer than two GPS fixes → success false, insufficient_observations;
 * - observations selected but none from a mobile unit → unsupported_platform;
 * - a pair less than half a second apart (elapsedSeconds rounds to 0) cannot be scored; when no
 *   pair can, the gps source says `evaluated: false` (success true, anomaly false).
 * Speed is computed from the rounded distance and the integer seconds, as the vendor's formula says
 * (docs/vendor-api.md#signal-endpoints).
 */
export function computeGeovelocity(
  selected: readonly Observation[],
  thresholdKmh: number,
): GeovelocityResponse {
  const signalType = SIGNAL_TYPES.geovelocity;
  if (selected.length === 0) return { signalType, success: false, reason: 'insufficient_observations' };
  const mobile = selected.filter((o) => o.platform === 'mobile');
  if (mobile.length === 0) return { signalType, success: false, reason: 'unsupported_platform' };
  const fixes = mobile.filter((o) => o.gps !== undefined);
  if (fixes.length < 2) return { signalType, success: false, reason: 'insufficient_observations' };

  let pairs = 0;
  let fastest: ReturnType<typeof pairOf> | undefined;
  for (let i = 1; i < fixes.length; i++) {
    const pair = pairOf(fixes[i - 1]!, fixes[i]!);
    if (!pair) continue;
    pairs++;
    if (!fastest || pair.speedKmh > fastest.speedKmh) fastest = pair;
  }
  const observationTime = formatObservationTime(fixes[fixes.length - 1]!.timeMs);
  if (!fastest) {
    const source = {
      locationSource: 'gps',
      evaluated: false,
      anomaly: false,
      maxSpeedKmh: null,
      thresholdKmh: null,
      evaluatedPairCount: 0,
      fastestPair: null,
    };
    return {
      signalType,
      success: true,
      result: { anomaly: false, maxSpeedKmh: null, sources: [source] },
      observationTime,
    };
  }
  const anomaly = fastest.speedKmh > thresholdKmh;
  const source = {
    locationSource: 'gps',
    evaluated: true,
    anomaly,
    maxSpeedKmh: fastest.speedKmh,
    thresholdKmh,
    evaluatedPairCount: pairs,
    fastestPair: fastest,
  };
  return {
    signalType,
    success: true,
    result: { anomaly, maxSpeedKmh: fastest.speedKmh, sources: [source] },
    observationTime,
  };
}

function pairOf(from: Observation, to: Observation) {
  const elapsedSeconds = Math.round((to.timeMs - from.timeMs) / 1000);
  if (elapsedSeconds <= 0) return undefined;
  const distanceKm = roundOneDecimal(haversineKm(from.gps!, to.gps!));
  return {
    fromObservationTime: formatObservationTime(from.timeMs),
    toObservationTime: formatObservationTime(to.timeMs),
    fromUnitId: from.unitId,
    fromVerificationStatus: from.verificationStatus,
    fromInteractionId: from.interactionId,
    toUnitId: to.unitId,
    toVerificationStatus: to.verificationStatus,
    toInteractionId: to.interactionId,
    distanceKm,
    elapsedSeconds,
    speedKmh: roundOneDecimal(distanceKm / (elapsedSeconds / 3600)),
  };
}
