import {
  ACCOUNT_ID_PATTERN,
  INTERACTION_ID_PATTERN,
  MAX_INTERACTION_ID_LENGTH,
  MAX_SDK_VERSION_ID_LENGTH,
  MAX_UNIT_ID_LENGTH,
  MAX_WINDOW_MS,
  SDK_VERSION_ID_PATTERN,
  UNIT_ID_PATTERN,
  UUID_PATTERN,
  VERIFICATION_STATUSES,
  type VerificationStatus,
} from '../../signals/identifiers.ts';
import { parseRfc3339Utc } from '../../timing/rfc3339.ts';
import type { UnitFilter } from './observation-store.ts';

/**
 * Query-parameter validation of the signal endpoints (docs/vendor-api.md#identifiers,
 * #observation-window). Hand-written over the shared precompiled patterns rather than zod: it runs on
 * every signal request and must cost microseconds. Every failure names its parameter.
 */

/** A 400: `param` is the query parameter at fault (as the client spelled it). */
export class SignalParamError extends Error {
  constructor(
    readonly param: string,
    why: string,
  ) {
    super(`${param}: ${why}`);
    this.name = 'SignalParamError';
  }
}

export type Query = Record<string, string | undefined>;

export interface TimeWindow {
  startMs: number;
  endMs: number;
}

/** One side's account and identifiers. */
export interface SideSelector {
  accountId: string;
  filter: UnitFilter;
}

const STATUSES: ReadonlySet<string> = new Set(VERIFICATION_STATUSES);

/**
 * The query with one value per parameter. A parameter given twice is a 400 naming it: taking the
 * first (or last) would hide a client bug and answer for an account the caller may not have meant.
 */
export function singleValuedQuery(all: Record<string, string[]>): Query {
  const q: Query = Object.create(null);
  for (const name in all) {
    const values = all[name]!;
    if (values.length > 1) throw new SignalParamError(name, 'must be given once');
    q[name] = values[0];
  }
  return q;
}

export function requireServiceId(q: Query): string {
  const v = q.serviceId;
  if (v === undefined) throw new SignalParamError('serviceId', 'is required');
  if (!UUID_PATTERN.test(v)) throw new SignalParamError('serviceId', 'must be a UUID');
  return v;
}

export function checkAccountId(name: string, v: string | undefined, required: boolean): string | undefined {
  if (v === undefined) {
    if (required) throw new SignalParamError(name, 'is required');
    return undefined;
  }
  if (!ACCOUNT_ID_PATTERN.test(v)) {
    throw new SignalParamError(name, 'must be 1 to 50 characters of A-Z, a-z, 0-9 and -');
  }
  return v;
}

/**
 * Parses the optional identifiers of one side (`prefix` is '', 'subject' or 'baseline') and applies
 * the ordering rule: verificationStatus requires unitId, interactionId requires verificationStatus.
 * With `requireAll` (remote access tool) unitId, verificationStatus and interactionId are required.
 */
export function parseUnitFilter(
  q: Query,
  prefix: '' | 'subject' | 'baseline',
  requireAll = false,
): UnitFilter {
  const n = (base: string) => (prefix === '' ? base : `${prefix}${base[0]!.toUpperCase()}${base.slice(1)}`);
  const unitName = n('unitId');
  const statusName = n('verificationStatus');
  const interactionName = n('interactionId');
  const sdkName = n('sdkVersionId');
  const unitId = q[unitName];
  const status = q[statusName];
  const interactionId = q[interactionName];
  const sdkVersionId = q[sdkName];

  if (unitId !== undefined) checkId(unitName, unitId, UNIT_ID_PATTERN, MAX_UNIT_ID_LENGTH);
  else if (requireAll) throw new SignalParamError(unitName, 'is required');
  if (status !== undefined) {
    if (!STATUSES.has(status))
      throw new SignalParamError(statusName, 'must be verified, unverified or fraud');
  } else if (requireAll) throw new SignalParamError(statusName, 'is required');
  if (interactionId !== undefined) {
    checkId(interactionName, interactionId, INTERACTION_ID_PATTERN, MAX_INTERACTION_ID_LENGTH);
  } else if (requireAll) throw new SignalParamError(interactionName, 'is required');
  if (sdkVersionId !== undefined) {
    if (sdkVersionId.length > MAX_SDK_VERSION_ID_LENGTH) {
      throw new SignalParamError(sdkName, `must be at most ${MAX_SDK_VERSION_ID_LENGTH} characters`);
    }
    if (!SDK_VERSION_ID_PATTERN.test(sdkVersionId)) {
      throw new SignalParamError(sdkName, 'must contain only A-Z, a-z, 0-9 and . - /');
    }
  }
  if (status !== undefined && unitId === undefined)
    throw new SignalParamError(statusName, `requires ${unitName}`);
  if (interactionId !== undefined && status === undefined) {
    throw new SignalParamError(interactionName, `requires ${statusName}`);
  }
  return {
    unitId,
    verificationStatus: status as VerificationStatus | undefined,
    interactionId,
    sdkVersionId,
  };
}

function checkId(name: string, v: string, pattern: RegExp, max: number): void {
  if (v.length > max) throw new SignalParamError(name, `must be at most ${max} characters`);
  if (!pattern.test(v)) throw new SignalParamError(name, 'must contain only A-Z, a-z, 0-9 and -');
}

function parseTime(name: string, v: string): number {
  const t = parseRfc3339Utc(v);
  if (t === undefined) {
    throw new SignalParamError(
      name,
      'must be an RFC 3339 UTC timestamp of a real date and time, e.g. 2024-01-02T10:00:00Z',
    );
  }
  return t;
}

/**
 * The observation window: end defaults to now, start to end − 31 days
 * (docs/vendor-api.md#observation-window). A start after the end or a span over 31 days is a 400. Both
 * bounds are inclusive.
 */
export function parseWindow(q: Query, nowMs: number): TimeWindow {
  const endMs = q.windowEnd === undefined ? nowMs : parseTime('windowEnd', q.windowEnd);
  const startMs =
    q.windowStart === undefined ? endMs - MAX_WINDOW_MS : parseTime('windowStart', q.windowStart);
  if (startMs > endMs) throw new SignalParamError('windowStart', 'must not be after windowEnd');
  if (endMs - startMs > MAX_WINDOW_MS)
    throw new SignalParamError('windowStart', 'window spans more than 31 days');
  return { startMs, endMs };
}

/** Parameters of geolocation, geovelocity and active call. */
export interface SingleUnitRequest {
  serviceId: string;
  side: SideSelector;
  window: TimeWindow;
}

export function parseSingleUnitRequest(q: Query, nowMs: number): SingleUnitRequest {
  const serviceId = requireServiceId(q);
  const accountId = checkAccountId('accountId', q.accountId, true)!;
  const filter = parseUnitFilter(q, '');
  return { serviceId, side: { accountId, filter }, window: parseWindow(q, nowMs) };
}

/** Parameters of the paired signals (proximity, new browser). */
export interface PairedRequest {
  serviceId: string;
  subject: SideSelector;
  baseline: SideSelector;
  /** Whether baselineAccountId was given (new-browser ignores baseline* without it). */
  explicitBaselineAccount: boolean;
  window: TimeWindow;
}

/** @param ignoreBaselineWithoutAccount new-browser: without baselineAccountId, baseline* are ignored. */
export function parsePairedRequest(
  q: Query,
  nowMs: number,
  ignoreBaselineWithoutAccount = false,
): PairedRequest {
  const serviceId = requireServiceId(q);
  const subjectAccountId = checkAccountId('subjectAccountId', q.subjectAccountId, true)!;
  const subjectFilter = parseUnitFilter(q, 'subject');
  const baselineAccountId = checkAccountId('baselineAccountId', q.baselineAccountId, false);
  const explicit = baselineAccountId !== undefined;
  const baselineFilter = !explicit && ignoreBaselineWithoutAccount ? {} : parseUnitFilter(q, 'baseline');
  return {
    serviceId,
    subject: { accountId: subjectAccountId, filter: subjectFilter },
    baseline: { accountId: baselineAccountId ?? subjectAccountId, filter: baselineFilter },
    explicitBaselineAccount: explicit,
    window: parseWindow(q, nowMs),
  };
}

/** Parameters of one remote-access-tool scoring (single GET or one batch item). */
export interface RatRequest {
  serviceId: string;
  accountId: string;
  filter: UnitFilter & { unitId: string; verificationStatus: VerificationStatus; interactionId: string };
}

export function parseRatRequest(q: Query): RatRequest {
  const serviceId = requireServiceId(q);
  const accountId = checkAccountId('accountId', q.accountId, true)!;
  const filter = parseUnitFilter(q, '', true) as RatRequest['filter'];
  filter.interactionExact = true;
  return { serviceId, accountId, filter };
}
