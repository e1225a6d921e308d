import type { AdminDevice, AdminUser } from '../admin/admin-schemas.ts';
import { HISTORY_FEATURE_NAMES } from '../features/history-features.ts';
import type { SupportingSignalType } from '../signals/signal-schemas.ts';
import type {
  Activation,
  ActiveCallView,
  GeolocationView,
  GeovelocityView,
  HistoricalProximityView,
  LatestProximityView,
  NewBrowserView,
  RemoteAccessToolView,
} from './cel-environment.ts';
import { DeviceView } from './cel-environment.ts';
import type { PolicyInput, PolicySignalName, SignalOutcome, SignalResponses } from './inputs/input-values.ts';
import { MISSING } from './inputs/unavailable-reason.ts';
import { EVERY_FIELD } from './policy-analysis.ts';

/**
 * Refills the activation views from a `PolicyInput`. Views are reset to their zero values first, so
 * nothing of the previous decision leaks into the next. Only the signals the policy references are
 * touched; the others keep zero values and no expression reads them.
 */

const EMPTY: readonly string[] = Object.freeze([]);

const NO_CONTEXT: Record<string, string | number | boolean> = Object.freeze({});

/** Reason recorded for a referenced input the decision service did not pass at all. */
const MISSING_REASON = MISSING;

interface CommonView {
  available: boolean;
  success: boolean;
  reason: string;
  observationTime: string;
}

function fillCommon(
  view: CommonView,
  outcome: SignalOutcome | undefined,
): { success: boolean; observationTime?: string | undefined } | undefined {
  if (outcome === undefined) {
    view.available = false;
    view.success = false;
    view.reason = MISSING_REASON;
    view.observationTime = '';
    return undefined;
  }
  if (outcome.status === 'unavailable') {
    view.available = false;
    view.success = false;
    view.reason = outcome.reason;
    view.observationTime = '';
    return undefined;
  }
  const r = outcome.response;
  view.available = true;
  view.success = r.success;
  view.reason = r.reason ?? '';
  view.observationTime = r.observationTime ?? '';
  return r;
}

function matchedTypes(
  signals: readonly { type: SupportingSignalType; details: { matched: boolean } }[] | undefined,
): readonly string[] {
  if (!signals || signals.length === 0) return EMPTY;
  let out: string[] | undefined;
  for (const s of signals) {
    if (!s.details.matched) continue;
    if (out) out.push(s.type);
    else out = [s.type];
  }
  return out ?? EMPTY;
}

function fillRat(v: RemoteAccessToolView, o: SignalOutcome<'remoteAccessTool'> | undefined): void {
  const r = fillCommon(v, o) as SignalResponses['remoteAccessTool'] | undefined;
  const res = r?.result;
  v.anomaly = res?.anomaly ?? false;
  v.anomalyConfidence = res?.anomalyConfidence ?? 0;
}

function fillNewBrowser(v: NewBrowserView, o: SignalOutcome<'newBrowser'> | undefined): void {
  const r = fillCommon(v, o) as SignalResponses['newBrowser'] | undefined;
  v.known = r?.result?.known ?? false;
  v.mismatchedFields = r?.mismatchedFields ?? EMPTY;
}

function fillLatest(v: LatestProximityView, o: SignalOutcome<'latestProximity'> | undefined): void {
  const r = fillCommon(v, o) as SignalResponses['latestProximity'] | undefined;
  if (r) v.observationTime = r.observationTimesByUnit?.subjectUnitId ?? v.observationTime;
  v.proximityConfidence = r?.result?.proximityConfidence ?? 0;
  v.matchedSignals = matchedTypes(r?.result?.supportingSignals);
}

function fillHistorical(
  v: HistoricalProximityView,
  o: SignalOutcome<'historicalProximity'> | undefined,
): void {
  const r = fillCommon(v, o) as SignalResponses['historicalProximity'] | undefined;
  if (r) v.observationTime = r.observationTimesByUnit?.subjectUnitId ?? v.observationTime;
  const best = r?.result?.bestMatch ?? null;
  const ingress = r?.result?.bestIngressMatch ?? null;
  v.hasBestMatch = best !== null;
  v.bestConfidence = best?.proximityConfidence ?? 0;
  v.matchedSignals = matchedTypes(best?.supportingSignals);
  v.hasBestIngressMatch = ingress !== null;
  v.bestIngressConfidence = ingress?.proximityConfidence ?? 0;
  v.ingressMatchedSignals = matchedTypes(ingress?.supportingSignals);
}

function fillGeovelocity(v: GeovelocityView, o: SignalOutcome<'geovelocity'> | undefined): void {
  const r = fillCommon(v, o) as SignalResponses['geovelocity'] | undefined;
  const res = r?.result;
  v.anomaly = res?.anomaly ?? false;
  v.maxSpeedKmh = res?.maxSpeedKmh ?? 0;
  v.evaluated = false;
  v.thresholdKmh = 0;
  v.evaluatedPairCount = 0;
  v.distanceKm = 0;
  v.elapsedSeconds = 0;
  if (!res) return;
  // The fastest source decides; today there is a single gps source.
  let fastestSpeed = -1;
  for (const s of res.sources) {
    if (s.evaluated) v.evaluated = true;
    v.evaluatedPairCount += s.evaluatedPairCount;
    if (s.thresholdKmh !== null && v.thresholdKmh === 0) v.thresholdKmh = s.thresholdKmh;
    if (s.fastestPair && s.fastestPair.speedKmh > fastestSpeed) {
      fastestSpeed = s.fastestPair.speedKmh;
      v.distanceKm = s.fastestPair.distanceKm;
      v.elapsedSeconds = s.fastestPair.elapsedSeconds;
      if (s.thresholdKmh !== null) v.thresholdKmh = s.thresholdKmh;
    }
  }
}

function fillActiveCall(v: ActiveCallView, o: SignalOutcome<'activeCall'> | undefined): void {
  const r = fillCommon(v, o) as SignalResponses['activeCall'] | undefined;
  v.onCall = r?.result?.onCall ?? false;
}

function fillGeolocation(v: GeolocationView, o: SignalOutcome<'geolocation'> | undefined): void {
  const r = fillCommon(v, o) as SignalResponses['geolocation'] | undefined;
  v.hasGps = false;
  v.lat = 0;
  v.lon = 0;
  v.hasIngress = false;
  v.ingressLat = 0;
  v.ingressLon = 0;
  v.country = '';
  v.region = '';
  v.city = '';
  v.continent = '';
  for (const d of r?.result?.datapoints ?? []) {
    if (d.valueType === 'geo') {
      if (d.name === 'geo') {
        v.hasGps = true;
        v.lat = d.lat;
        v.lon = d.lon;
      } else if (d.name === 'ingress_ip_geo') {
        v.hasIngress = true;
        v.ingressLat = d.lat;
        v.ingressLon = d.lon;
      }
    } else if (d.valueType === 'string') {
      switch (d.name) {
        case 'ingress_ip_country':
          v.country = d.value;
          break;
        case 'ingress_ip_region':
          v.region = d.value;
          break;
        case 'ingress_ip_city':
          v.city = d.value;
          break;
        case 'ingress_ip_continent':
          v.continent = d.value;
          break;
      }
    }
  }
}

/** Fills one signal's view; the views' `available` says whether it had a value. */
export const SIGNAL_FILLS: {
  [N in PolicySignalName]: (view: never, outcome: SignalOutcome<N> | undefined) => void;
} = {
  remoteAccessTool: fillRat,
  newBrowser: fillNewBrowser,
  latestProximity: fillLatest,
  historicalProximity: fillHistorical,
  geovelocity: fillGeovelocity,
  activeCall: fillActiveCall,
  geolocation: fillGeolocation,
};

/**
 * Members of a signal's vendor answer that the fills above read only for some fields of the view,
 * and where in the answer (`response`) each sits: `supportingSignals` only for the matched types, the
 * largest part of a proximity answer (a third of a decision line's parse). Only members worth
 * leaving unparsed are listed (newBrowser's `mismatchedFields`, a few short strings, costs less to
 * parse than to cut). src/policy/policy-activation.test.ts checks that dropping a member changes no
 * other field.
 */
export const ANSWER_MEMBERS_FILLING: {
  [N in PolicySignalName]?: Readonly<
    Record<string, { fills: readonly string[]; at: readonly (readonly string[])[] }>
  >;
} = {
  latestProximity: { supportingSignals: { fills: ['matchedSignals'], at: [['result']] } },
  historicalProximity: {
    supportingSignals: {
      fills: ['matchedSignals', 'ingressMatchedSignals'],
      at: [
        ['result', 'bestMatch'],
        ['result', 'bestIngressMatch'],
      ],
    },
  },
};

/** A member of a signal's answer a policy never needs, and the objects of the answer it sits in. */
export interface UnreadAnswerMember {
  signal: PolicySignalName;
  member: string;
  at: readonly (readonly string[])[];
}

/**
 * The members of the answers of the signals a policy reads that it never needs, by the fields of
 * the views it reads: what replay may leave unparsed (src/replay/replay-record.ts).
 */
export function unreadAnswerMembers(requirements: {
  signals: ReadonlySet<PolicySignalName>;
  signalFields?: ReadonlyMap<PolicySignalName, ReadonlySet<string>>;
}): UnreadAnswerMember[] {
  const out: UnreadAnswerMember[] = [];
  if (requirements.signalFields === undefined) return out;
  for (const signal of requirements.signals) {
    const read = requirements.signalFields.get(signal);
    const members = ANSWER_MEMBERS_FILLING[signal];
    if (read === undefined || read.has(EVERY_FIELD) || members === undefined) continue;
    for (const [member, { fills, at }] of Object.entries(members)) {
      if (!fills.some((f) => read.has(f))) out.push({ signal, member, at });
    }
  }
  return out;
}

const NO_COUNTERS: Record<string, number> = Object.freeze({});

/** An input the policy reads (a row of its input table) and its bit in the unavailability mask. */
export interface ReadInput {
  row: { fill(act: Activation, input: PolicyInput): boolean };
  bit: number;
}

/**
 * Fills `act` for the inputs the policy reads (each row fills its own view); returns the
 * unavailability mask (the bits of the rows that had no value).
 */
export function fillActivation(act: Activation, input: PolicyInput, reads: readonly ReadInput[]): number {
  let unavailable = 0;
  for (let i = 0; i < reads.length; i++) {
    const r = reads[i]!;
    if (!r.row.fill(act, input)) unavailable |= r.bit;
  }
  const r = act.request;
  const q = input.request;
  r.accountId = q.accountId;
  r.userId = q.userId ?? '';
  r.deviceId = q.deviceId ?? '';
  r.platform = q.platform ?? '';
  r.unitId = q.unitId ?? '';
  r.verificationStatus = q.verificationStatus ?? '';
  r.interactionId = q.interactionId ?? '';
  r.sdkVersionId = q.sdkVersionId ?? '';
  r.ip = q.ip ?? '';
  r.userAgent = q.userAgent ?? '';
  r.firstFactor = q.firstFactor ?? '';
  r.context = q.context ?? NO_CONTEXT;
  act.now = input.now;
  act.nowSeconds = input.now.getTime() / 1000;
  return unavailable;
}

/** `velocity`: the counters' values, or none (unavailable). */
export function fillVelocity(act: Activation, input: PolicyInput): boolean {
  act.velocity = input.velocity ?? NO_COUNTERS;
  return input.velocity !== undefined;
}

export function fillUser(
  act: Activation,
  user: AdminUser | undefined,
  unavailableReason: string | undefined,
): boolean {
  const v = act.user;
  if (!user) {
    v.available = false;
    v.reason = unavailableReason ?? MISSING_REASON;
    v.user_id = '';
    v.username = '';
    v.display_name = '';
    v.status = '';
    v.failed_attempts = 0;
    v.max_attempts = 0;
    v.allowed_factors = EMPTY;
    v.service_defined_username = false;
    v.created_at = 0;
    v.updated_at = 0;
    v.archived_at = 0;
    return false;
  }
  v.available = true;
  v.reason = '';
  v.user_id = user.user_id;
  v.username = user.username;
  v.display_name = user.display_name ?? '';
  v.status = user.status;
  v.failed_attempts = user.failed_attempts;
  v.max_attempts = user.max_attempts;
  v.allowed_factors = user.allowed_factors;
  v.service_defined_username = user.service_defined_username;
  v.created_at = user.created_at;
  v.updated_at = user.updated_at;
  v.archived_at = user.archived_at ?? 0;
  return true;
}

/** Device views are pooled: a decision reuses the previous decision's objects. */
export function fillDevices(
  act: Activation,
  devices: AdminDevice[],
  unavailableReason: string | undefined,
): boolean {
  const out = act.devices;
  if (unavailableReason !== undefined) {
    out.length = 0;
    return false;
  }
  const pool = act.devicePool;
  out.length = devices.length;
  for (let i = 0; i < devices.length; i++) {
    const d = devices[i]!;
    let v = pool[i];
    if (v === undefined) {
      v = new DeviceView();
      pool[i] = v;
    }
    v.device_id = d.device_id;
    v.type = d.type;
    v.display_name = d.display_name;
    v.capabilities = d.capabilities;
    v.enrolled = d.enrolled;
    v.enrolled_at = d.enrolled_at ?? 0;
    v.created_at = d.created_at;
    v.updated_at = d.updated_at;
    v.archived_at = d.archived_at ?? 0;
    v.version = d.version ?? '';
    v.version_supported = d.version_supported ?? true;
    v.device_integrity = d.device_integrity ?? '';
    v.device_integrity_updated_at = d.device_integrity_updated_at ?? 0;
    v.migrated_from_device_id = d.migrated_from_device_id ?? '';
    v.migrated_to_device_id = d.migrated_to_device_id ?? '';
    v.migrated_at = d.migrated_at ?? 0;
    out[i] = v;
  }
  return true;
}

export function fillHistory(act: Activation, input: PolicyInput): boolean {
  const v = act.history;
  const h = input.history;
  v.available = h !== undefined;
  v.reason = h === undefined ? (input.featuresUnavailable?.history ?? MISSING_REASON) : '';
  for (const name of HISTORY_FEATURE_NAMES) v[name] = h?.[name] ?? 0;
  return h !== undefined;
}

/** Points every list view at the decision's snapshot and clock; false when the lists are unavailable. */
export function fillLists(act: Activation, input: PolicyInput): boolean {
  const nowMs = input.now.getTime();
  for (const name in act.lists) {
    const v = act.lists[name]!;
    v.lookup = input.lists;
    v.nowMs = nowMs;
  }
  return input.lists !== undefined;
}
