import { InputError } from '../errors/riskgate-error.ts';
import { parseRfc3339Utc } from '../timing/rfc3339.ts';
import {
  ACCOUNT_ID_PATTERN,
  findOrderingViolation,
  INTERACTION_ID_PATTERN,
  MAX_INTERACTION_ID_LENGTH,
  MAX_SDK_VERSION_ID_LENGTH,
  MAX_UNIT_ID_LENGTH,
  MAX_WINDOW_MS,
  SDK_VERSION_ID_PATTERN,
  UNIT_ID_PATTERN,
  type VerificationStatus,
} from './identifiers.ts';
import { SUPPORTING_SIGNAL_TYPES, type SupportingSignalType } from './signal-schemas.ts';

/**
 * Parameters of each Trust Signals endpoint (docs/vendor-api.md#signal-endpoints), their validation
 * and their query strings. Validation is hand-written over the shared patterns of identifiers.ts:
 * it runs on every call, before any network I/O, and must cost next to nothing. Query strings are
 * concatenated directly: identifiers that passed their patterns need no percent-encoding.
 */

/** A window bound: an RFC 3339 UTC string (`...Z`, checked by `parseRfc3339Utc`) or a `Date`. */
export type WindowBound = string | Date;

/** The observation window; at most 31 days, start not after end. */
export interface SignalWindow {
  /** Default: `windowEnd` − 31 days. */
  windowStart?: WindowBound | undefined;
  /** Default: now. */
  windowEnd?: WindowBound | undefined;
}

/** Geolocation, geovelocity and active call. */
export interface SingleUnitParams extends SignalWindow {
  accountId: string;
  unitId?: string | undefined;
  /** Requires `unitId`. */
  verificationStatus?: VerificationStatus | undefined;
  /** Prefix match; requires `verificationStatus`. */
  interactionId?: string | undefined;
  sdkVersionId?: string | undefined;
}

/** Both sides of a paired signal (proximity, new browser). */
export interface PairedParams extends SignalWindow {
  subjectAccountId: string;
  subjectUnitId?: string | undefined;
  subjectVerificationStatus?: VerificationStatus | undefined;
  subjectInteractionId?: string | undefined;
  subjectSdkVersionId?: string | undefined;
  /** Omit when both sides belong to `subjectAccountId`. */
  baselineAccountId?: string | undefined;
  baselineUnitId?: string | undefined;
  baselineVerificationStatus?: VerificationStatus | undefined;
  baselineInteractionId?: string | undefined;
  baselineSdkVersionId?: string | undefined;
}

/** Latest and historical proximity. */
export interface ProximityParams extends PairedParams {
  /** Restricts computation to one supporting-signal type. */
  supportingSignal?: SupportingSignalType | undefined;
}

export const MATCH_SCOPES = ['browser_profile', 'full_fingerprint'] as const;
export type MatchScope = (typeof MATCH_SCOPES)[number];

/** New browser. */
export interface NewBrowserParams extends PairedParams {
  /** Default `browser_profile` (server side). */
  matchScope?: MatchScope | undefined;
  /** Integer ≥ 0; default 3600 (server side). */
  cooldownSeconds?: number | undefined;
}

export const BASELINE_SCOPES = ['interaction_anchored', 'full_history'] as const;
export type BaselineScope = (typeof BASELINE_SCOPES)[number];

/** Remote access tool: every identifier but `sdkVersionId` is required; `interactionId` matches exactly. */
export interface RemoteAccessToolParams {
  accountId: string;
  unitId: string;
  verificationStatus: VerificationStatus;
  interactionId: string;
  sdkVersionId?: string | undefined;
  /**
   * Default `interaction_anchored` (stable when re-queried; the only scope the batch endpoint
   * uses). `full_history` always goes to the single GET and is never cached.
   */
  baselineScope?: BaselineScope | undefined;
}

function fail(field: string, message: string): never {
  throw new InputError(`${field} ${message}`, [{ field, message }]);
}

function checkAccountId(field: string, v: unknown): void {
  if (typeof v !== 'string' || !ACCOUNT_ID_PATTERN.test(v)) {
    fail(field, 'must be 1 to 50 characters of A-Z, a-z, 0-9 and -');
  }
}

function checkId(field: string, v: unknown, pattern: RegExp, max: number, chars: string): void {
  if (v === undefined) return;
  if (typeof v !== 'string' || v.length > max || !pattern.test(v)) {
    fail(field, `must be 1 to ${max} characters of ${chars}`);
  }
}

function checkStatus(field: string, v: unknown): void {
  if (v !== undefined && v !== 'verified' && v !== 'unverified' && v !== 'fraud') {
    fail(field, 'must be verified, unverified or fraud');
  }
}

const ID_CHARS = 'A-Z, a-z, 0-9 and -';
const SDK_CHARS = 'A-Z, a-z, 0-9 and . - /';

type Side = '' | 'subject' | 'baseline';

/** The parameter names of one side (`unitId`, `subjectUnitId`, `baselineUnitId`...). */
function sideNames(prefix: Side) {
  const name = (n: string) => (prefix === '' ? n : `${prefix}${n[0]!.toUpperCase()}${n.slice(1)}`);
  return {
    unitId: name('unitId'),
    verificationStatus: name('verificationStatus'),
    interactionId: name('interactionId'),
    sdkVersionId: name('sdkVersionId'),
  };
}

// Built once (issue 32: a closure and four names built per side on every proximity lookup).
const SIDE_NAMES = { '': sideNames(''), subject: sideNames('subject'), baseline: sideNames('baseline') };

function checkSide(
  prefix: Side,
  unitId: unknown,
  verificationStatus: unknown,
  interactionId: unknown,
  sdkVersionId: unknown,
): void {
  const name = SIDE_NAMES[prefix];
  checkId(name.unitId, unitId, UNIT_ID_PATTERN, MAX_UNIT_ID_LENGTH, ID_CHARS);
  checkStatus(name.verificationStatus, verificationStatus);
  checkId(name.interactionId, interactionId, INTERACTION_ID_PATTERN, MAX_INTERACTION_ID_LENGTH, ID_CHARS);
  checkId(name.sdkVersionId, sdkVersionId, SDK_VERSION_ID_PATTERN, MAX_SDK_VERSION_ID_LENGTH, SDK_CHARS);
  const bad = findOrderingViolation({
    unitId: unitId as string | undefined,
    verificationStatus: verificationStatus as VerificationStatus | undefined,
    interactionId: interactionId as string | undefined,
  });
  if (bad === 'verificationStatus') fail(name.verificationStatus, `requires ${name.unitId}`);
  if (bad === 'interactionId') fail(name.interactionId, `requires ${name.verificationStatus}`);
}

function boundToString(field: string, v: WindowBound): { text: string; ms: number } {
  if (v instanceof Date) {
    const ms = v.getTime();
    if (Number.isNaN(ms)) fail(field, 'is an invalid Date');
    return { text: v.toISOString(), ms };
  }
  const ms = parseRfc3339Utc(v);
  if (ms === undefined) {
    fail(field, 'must be an existing RFC 3339 UTC time such as 2024-01-02T10:00:00Z');
  }
  return { text: v, ms };
}

/** Validates the window and appends it to `q`. `nowMs` stands in for an omitted end. */
function appendWindow(q: string, w: SignalWindow, nowMs: number): string {
  if (w.windowStart === undefined && w.windowEnd === undefined) return q;
  const start = w.windowStart === undefined ? undefined : boundToString('windowStart', w.windowStart);
  const end = w.windowEnd === undefined ? undefined : boundToString('windowEnd', w.windowEnd);
  const endMs = end ? end.ms : nowMs;
  if (start) {
    if (start.ms > endMs) fail('windowStart', 'must not be after windowEnd');
    if (endMs - start.ms > MAX_WINDOW_MS) fail('windowStart', 'makes a window over 31 days');
    q += `&windowStart=${start.text}`;
  }
  if (end) q += `&windowEnd=${end.text}`;
  return q;
}

function sdk(v: string): string {
  // `.`, `-` and `/` are legal in a query, but `/` is encoded so no proxy mistakes it for a path.
  return v.indexOf('/') === -1 ? v : encodeURIComponent(v);
}

/** `&accountId=…&unitId=…` for a single-unit side; the parameters are already validated. */
function appendSingle(q: string, p: SingleUnitParams | RemoteAccessToolParams): string {
  q += `&accountId=${p.accountId}`;
  if (p.unitId !== undefined) q += `&unitId=${p.unitId}`;
  if (p.verificationStatus !== undefined) q += `&verificationStatus=${p.verificationStatus}`;
  if (p.interactionId !== undefined) q += `&interactionId=${p.interactionId}`;
  if (p.sdkVersionId !== undefined) q += `&sdkVersionId=${sdk(p.sdkVersionId)}`;
  return q;
}

function appendPaired(q: string, p: PairedParams): string {
  q += `&subjectAccountId=${p.subjectAccountId}`;
  if (p.subjectUnitId !== undefined) q += `&subjectUnitId=${p.subjectUnitId}`;
  if (p.subjectVerificationStatus !== undefined)
    q += `&subjectVerificationStatus=${p.subjectVerificationStatus}`;
  if (p.subjectInteractionId !== undefined) q += `&subjectInteractionId=${p.subjectInteractionId}`;
  if (p.subjectSdkVersionId !== undefined) q += `&subjectSdkVersionId=${sdk(p.subjectSdkVersionId)}`;
  if (p.baselineAccountId !== undefined) q += `&baselineAccountId=${p.baselineAccountId}`;
  if (p.baselineUnitId !== undefined) q += `&baselineUnitId=${p.baselineUnitId}`;
  if (p.baselineVerificationStatus !== undefined)
    q += `&baselineVerificationStatus=${p.baselineVerificationStatus}`;
  if (p.baselineInteractionId !== undefined) q += `&baselineInteractionId=${p.baselineInteractionId}`;
  if (p.baselineSdkVersionId !== undefined) q += `&baselineSdkVersionId=${sdk(p.baselineSdkVersionId)}`;
  return q;
}

function checkObject(p: unknown): void {
  if (typeof p !== 'object' || p === null) fail('(params)', 'must be an object');
}

function checkPaired(p: PairedParams): void {
  checkObject(p);
  checkAccountId('subjectAccountId', p.subjectAccountId);
  if (p.baselineAccountId !== undefined) checkAccountId('baselineAccountId', p.baselineAccountId);
  checkSide(
    'subject',
    p.subjectUnitId,
    p.subjectVerificationStatus,
    p.subjectInteractionId,
    p.subjectSdkVersionId,
  );
  checkSide(
    'baseline',
    p.baselineUnitId,
    p.baselineVerificationStatus,
    p.baselineInteractionId,
    p.baselineSdkVersionId,
  );
}

/**
 * Query-string builders. Each takes the client's prefix (`?serviceId=<uuid>`), validates and
 * returns the full query, or throws `InputError` naming the first bad field.
 */
export function singleUnitQuery(prefix: string, p: SingleUnitParams, nowMs: number): string {
  checkObject(p);
  checkAccountId('accountId', p.accountId);
  checkSide('', p.unitId, p.verificationStatus, p.interactionId, p.sdkVersionId);
  return appendWindow(appendSingle(prefix, p), p, nowMs);
}

export function proximityQuery(prefix: string, p: ProximityParams, nowMs: number): string {
  checkPaired(p);
  let q = appendPaired(prefix, p);
  if (p.supportingSignal !== undefined) {
    if (!(SUPPORTING_SIGNAL_TYPES as readonly string[]).includes(p.supportingSignal)) {
      fail('supportingSignal', `must be one of ${SUPPORTING_SIGNAL_TYPES.join(', ')}`);
    }
    q += `&supportingSignal=${p.supportingSignal}`;
  }
  return appendWindow(q, p, nowMs);
}

export function newBrowserQuery(prefix: string, p: NewBrowserParams, nowMs: number): string {
  checkPaired(p);
  let q = appendPaired(prefix, p);
  if (p.matchScope !== undefined) {
    if (p.matchScope !== 'browser_profile' && p.matchScope !== 'full_fingerprint') {
      fail('matchScope', 'must be browser_profile or full_fingerprint');
    }
    q += `&matchScope=${p.matchScope}`;
  }
  if (p.cooldownSeconds !== undefined) {
    if (!Number.isSafeInteger(p.cooldownSeconds) || p.cooldownSeconds < 0) {
      fail('cooldownSeconds', 'must be an integer of at least 0');
    }
    q += `&cooldownSeconds=${p.cooldownSeconds}`;
  }
  return appendWindow(q, p, nowMs);
}

/** Validates remote-access-tool parameters (single or batched). */
export function checkRemoteAccessTool(p: RemoteAccessToolParams): void {
  checkObject(p);
  checkAccountId('accountId', p.accountId);
  if (p.unitId === undefined) fail('unitId', 'is required');
  if (p.verificationStatus === undefined) fail('verificationStatus', 'is required');
  if (p.interactionId === undefined) fail('interactionId', 'is required');
  checkSide('', p.unitId, p.verificationStatus, p.interactionId, p.sdkVersionId);
  if (
    p.baselineScope !== undefined &&
    p.baselineScope !== 'interaction_anchored' &&
    p.baselineScope !== 'full_history'
  ) {
    fail('baselineScope', 'must be interaction_anchored or full_history');
  }
}

export function remoteAccessToolQuery(prefix: string, p: RemoteAccessToolParams): string {
  checkRemoteAccessTool(p);
  let q = appendSingle(prefix, p);
  if (p.baselineScope !== undefined) q += `&baselineScope=${p.baselineScope}`;
  return q;
}
