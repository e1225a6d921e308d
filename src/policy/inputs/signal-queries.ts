import type { VerificationStatus } from '../../signals/identifiers.ts';
import type { PolicySignalName } from './input-values.ts';
import { MISSING_IDENTIFIERS, NOT_APPLICABLE } from './unavailable-reason.ts';

/**
 * How a /decide request becomes one Trust Signals query per signal, and which signals cannot
 * apply to it. This is the one place that maps the login (the subject) and its `baseline` onto the
 * vendor's parameters; the vendor's `serviceId` is the client's business.
 */

/** What the rows read of the /decide request (src/decide/decide-request.ts). */
export interface InputRequest {
  accountId: string;
  userId?: string | undefined;
  platform?: 'browser' | 'mobile' | undefined;
  unitId?: string | undefined;
  verificationStatus?: VerificationStatus | undefined;
  interactionId?: string | undefined;
  sdkVersionId?: string | undefined;
  baseline?:
    | {
        accountId?: string | undefined;
        unitId?: string | undefined;
        verificationStatus?: VerificationStatus | undefined;
        interactionId?: string | undefined;
        sdkVersionId?: string | undefined;
      }
    | undefined;
}

/** Parameters of the single-unit signals (geolocation, geovelocity, active call). */
export interface UnitQuery {
  accountId: string;
  unitId?: string;
  verificationStatus?: VerificationStatus;
  interactionId?: string;
  sdkVersionId?: string;
}

/** Parameters of the paired signals (proximity, new browser). */
export interface PairedQuery {
  subjectAccountId: string;
  subjectUnitId?: string;
  subjectVerificationStatus?: VerificationStatus;
  subjectInteractionId?: string;
  subjectSdkVersionId?: string;
  baselineAccountId?: string;
  baselineUnitId?: string;
  baselineVerificationStatus?: VerificationStatus;
  baselineInteractionId?: string;
  baselineSdkVersionId?: string;
}

/** Parameters of the remote access tool signal (all identifiers required). */
export interface RemoteAccessToolQuery {
  accountId: string;
  unitId: string;
  verificationStatus: VerificationStatus;
  interactionId: string;
  sdkVersionId?: string;
}

/** Vendor options a policy may set per signal (`signalSettings[name].params`). */
export type SignalParams = Record<string, string | number | boolean>;

export interface SignalQueries {
  remoteAccessTool: RemoteAccessToolQuery;
  newBrowser: PairedQuery;
  latestProximity: PairedQuery;
  historicalProximity: PairedQuery;
  geovelocity: UnitQuery;
  activeCall: UnitQuery;
  geolocation: UnitQuery;
}

/** The sensor platforms a signal is computed for (docs/vendor-api.md#signal-endpoints). */
const PLATFORMS: Record<PolicySignalName, readonly ('browser' | 'mobile')[]> = {
  remoteAccessTool: ['browser'],
  newBrowser: ['browser'],
  latestProximity: ['browser', 'mobile'],
  historicalProximity: ['browser', 'mobile'],
  geovelocity: ['mobile'],
  activeCall: ['mobile'],
  geolocation: ['browser', 'mobile'],
};

/**
 * Whether `name` can be queried for this login: `ok`; `not_applicable` when the caller names a
 * platform the signal does not cover (a browser-only signal on a mobile login, or the reverse),
 * the one case the policy never counts; `missing_identifiers` when the platform allows it (or is
 * not given) but an identifier the signal needs is missing. Neither costs a call.
 */
export function applicability(
  name: PolicySignalName,
  request: InputRequest,
): 'ok' | typeof NOT_APPLICABLE | typeof MISSING_IDENTIFIERS {
  if (request.platform !== undefined && !PLATFORMS[name].includes(request.platform)) return NOT_APPLICABLE;
  switch (name) {
    case 'remoteAccessTool':
      // The ordering rule makes interactionId imply unitId and verificationStatus.
      return request.interactionId === undefined ? MISSING_IDENTIFIERS : 'ok';
    case 'latestProximity':
    case 'historicalProximity':
      // Without a baseline both sides are the same observations: a meaningless "near itself".
      return request.baseline === undefined ? MISSING_IDENTIFIERS : 'ok';
    default:
      return 'ok';
  }
}

function unitQuery(r: InputRequest): UnitQuery {
  const q: UnitQuery = { accountId: r.accountId };
  if (r.unitId !== undefined) q.unitId = r.unitId;
  if (r.verificationStatus !== undefined) q.verificationStatus = r.verificationStatus;
  if (r.interactionId !== undefined) q.interactionId = r.interactionId;
  if (r.sdkVersionId !== undefined) q.sdkVersionId = r.sdkVersionId;
  return q;
}

function subjectQuery(r: InputRequest): PairedQuery {
  const q: PairedQuery = { subjectAccountId: r.accountId };
  if (r.unitId !== undefined) q.subjectUnitId = r.unitId;
  if (r.verificationStatus !== undefined) q.subjectVerificationStatus = r.verificationStatus;
  if (r.interactionId !== undefined) q.subjectInteractionId = r.interactionId;
  if (r.sdkVersionId !== undefined) q.subjectSdkVersionId = r.sdkVersionId;
  return q;
}

function proximityQuery(r: InputRequest): PairedQuery {
  const q = subjectQuery(r);
  const b = r.baseline;
  if (b !== undefined) {
    if (b.accountId !== undefined && b.accountId !== r.accountId) q.baselineAccountId = b.accountId;
    if (b.unitId !== undefined) q.baselineUnitId = b.unitId;
    if (b.verificationStatus !== undefined) q.baselineVerificationStatus = b.verificationStatus;
    if (b.interactionId !== undefined) q.baselineInteractionId = b.interactionId;
    if (b.sdkVersionId !== undefined) q.baselineSdkVersionId = b.sdkVersionId;
  }
  return q;
}

/**
 * "Has this browser been seen for this account": the login's fingerprint against every earlier
 * observation of the account. `baselineAccountId` is sent even when it is the subject's own: without
 * it the vendor compares the subject side with itself, which the login's interactionId narrows to
 * the login alone. The request's `baseline` (a phone, for proximity) is no browser history.
 */
function newBrowserQuery(r: InputRequest): PairedQuery {
  const q = subjectQuery(r);
  q.baselineAccountId = r.accountId;
  return q;
}

/** Builds the vendor query of `name` for an applicable request, with the policy's `params` added. */
export function buildSignalQuery<N extends PolicySignalName>(
  name: N,
  request: InputRequest,
  params: SignalParams | undefined,
): SignalQueries[N] {
  let query: SignalQueries[PolicySignalName];
  switch (name) {
    case 'remoteAccessTool':
      query = unitQuery(request) as RemoteAccessToolQuery;
      break;
    case 'newBrowser':
      query = newBrowserQuery(request);
      break;
    case 'latestProximity':
    case 'historicalProximity':
      query = proximityQuery(request);
      break;
    default:
      query = unitQuery(request);
  }
  return (params ? { ...params, ...query } : query) as SignalQueries[N];
}
