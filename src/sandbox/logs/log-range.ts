import { parseIso8601Ns } from '../../timing/rfc3339.ts';
import { VendorApiError } from '../vendor-api-errors.ts';

/**
 * Timestamps and ranges of the Log API (docs/vendor-api.md#log-ranges). Times are
 * nanoseconds since the epoch (bigint) so nanosecond `created_at` values compare exactly.
 */

const NS_PER_MS = 1_000_000n;
const NS_PER_S = 1_000_000_000n;

/** Range rules, in one place so a vendor difference is one edit. */
export const LOG_RANGE_LIMITS = {
  /** `start` may be at most this far in the past. */
  maxStartAgeNs: 30n * 86_400n * NS_PER_S,
  /** `end` must be at least this far in the past (also the default `end` offset). */
  minEndAgeNs: 60n * NS_PER_S,
  /** Default span when `start` is omitted. */
  defaultSpanNs: 60n * NS_PER_S,
  minSpanNs: 1n * NS_PER_S,
  maxSpanNs: 3600n * NS_PER_S,
} as const;

const UNIX_SECONDS = /^(\d{1,12})(?:\.(\d{1,9}))?$/;

/**
 * Parses one of the four accepted formats: Unix seconds, ISO 8601 without offset (UTC), with `Z`,
 * with an offset such as `+01:00` / `-01:00` (its `+` may arrive form-decoded to a space). Returns
 * nanoseconds, or undefined when malformed or not a real date and time.
 */
export function parseLogTimestamp(value: string): bigint | undefined {
  const unix = UNIX_SECONDS.exec(value);
  if (unix) return BigInt(unix[1]!) * NS_PER_S + BigInt((unix[2] ?? '').padEnd(9, '0'));
  return parseIso8601Ns(value);
}

/** A resolved query range: start inclusive, end exclusive. */
export interface LogRange {
  startNs: bigint;
  endNs: bigint;
}

function rangeError(detail: string): VendorApiError {
  return new VendorApiError(40000, 'Invalid request parameters', detail);
}

/**
 * Applies the defaults (end = now − 1 min, start = end − 1 min) and the rules (start ≥ now − 30 days,
 * end ≤ now − 1 min, 1 s ≤ end − start ≤ 1 h). Throws 400 / 40000 naming the parameter.
 */
export function resolveLogRange(params: { start?: string; end?: string }, nowMs: number): LogRange {
  const nowNs = BigInt(Math.floor(nowMs)) * NS_PER_MS;
  let endNs = nowNs - LOG_RANGE_LIMITS.minEndAgeNs;
  if (params.end !== undefined) {
    const parsed = parseLogTimestamp(params.end);
    if (parsed === undefined) throw rangeError(`end: invalid timestamp '${params.end}'`);
    endNs = parsed;
  }
  let startNs = endNs - LOG_RANGE_LIMITS.defaultSpanNs;
  if (params.start !== undefined) {
    const parsed = parseLogTimestamp(params.start);
    if (parsed === undefined) throw rangeError(`start: invalid timestamp '${params.start}'`);
    startNs = parsed;
  }
  if (startNs < nowNs - LOG_RANGE_LIMITS.maxStartAgeNs) {
    throw rangeError('start: must be at most 30 days in the past');
  }
  if (endNs > nowNs - LOG_RANGE_LIMITS.minEndAgeNs) {
    throw rangeError('end: must be at least 1 minute in the past');
  }
  const span = endNs - startNs;
  if (span < LOG_RANGE_LIMITS.minSpanNs) {
    throw rangeError('range: end minus start must be at least 1 second');
  }
  if (span > LOG_RANGE_LIMITS.maxSpanNs) {
    throw rangeError('range: end minus start must be at most 1 hour');
  }
  return { startNs, endNs };
}

/** `created_at` text: ISO 8601 UTC with nanoseconds (`...T10:00:00.123456789Z`) or whole seconds. */
export function formatCreatedAt(atNs: bigint, secondPrecision: boolean): string {
  const ms = Number(atNs / NS_PER_MS);
  const base = new Date(ms).toISOString().slice(0, 19);
  if (secondPrecision) return `${base}Z`;
  const nanos = (atNs % NS_PER_S).toString().padStart(9, '0');
  return `${base}.${nanos}Z`;
}

/** Converts a millisecond clock reading to nanoseconds. */
export function msToNs(ms: number): bigint {
  return BigInt(Math.floor(ms)) * NS_PER_MS;
}
