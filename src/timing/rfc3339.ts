import { z } from 'zod';

/**
 * The one timestamp parser. Strict RFC 3339 (§5.6: `2024-01-02T10:00:00Z`, a fraction of up to
 * nanoseconds, `Z` or a `±HH:MM` offset, `T` and `Z` in either case) for what the vendor APIs and
 * riskgate exchange as RFC 3339, and the looser ISO 8601 the Log API writes and reads (no offset
 * meaning UTC, `±HHMM`, a space for the `T` or for a form-decoded `+`; docs/vendor-api.md, "Log
 * API"). Both refuse a date or time that does not exist: `Date.parse` rolls impossible fields over
 * (`2024-02-30` becomes 1 March, `24:00:00` the next day), so the date-time part must read back
 * unchanged. Leap seconds (`:60`) and offsets past 23:59 are refused too.
 */

const TIMESTAMP =
  /^(\d{4}-\d{2}-\d{2})([Tt ])(\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+\- ])(\d{2})(:?)(\d{2}))?$/;

interface Instant {
  /** Epoch milliseconds of the whole second. */
  secondMs: number;
  /** The fraction's digits as written (up to 9; empty when none). */
  fraction: string;
}

/** Days in `month` (1-12) of `year`, proleptic Gregorian as `Date` counts them. */
function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** Days from 1970-01-01 to a real date (H. Hinnant's days_from_civil): `Date.UTC` without its 0-99 years quirk. */
function epochDays(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

function read(text: string, form: 'rfc3339' | 'rfc3339-utc' | 'iso8601'): Instant | undefined {
  if (typeof text !== 'string') return undefined;
  const m = TIMESTAMP.exec(text);
  if (!m) return undefined;
  const [, date, separator, time, fraction = '', zulu, sign, hh, colon, mm] = m;
  if (form !== 'iso8601') {
    if (separator === ' ' || (zulu === undefined && (form === 'rfc3339-utc' || sign === undefined)))
      return undefined;
    if (sign === ' ' || (sign !== undefined && colon !== ':')) return undefined;
  }
  // Field by field (issue 32: building a Date and reading it back was most of this on /decide,
  // which checks every timestamp of every signal answer). A field out of range is refused, as
  // `Date.parse` would roll it over: no 30 February, no 24:00, no leap second.
  const year = Number(date!.slice(0, 4));
  const month = Number(date!.slice(5, 7));
  const day = Number(date!.slice(8, 10));
  const hour = Number(time!.slice(0, 2));
  const minute = Number(time!.slice(3, 5));
  const second = Number(time!.slice(6, 8));
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  const ms = ((epochDays(year, month, day) * 24 + hour) * 60 + minute) * 60_000 + second * 1000;
  let offsetMinutes = 0;
  if (sign !== undefined) {
    const hours = Number(hh);
    const minutes = Number(mm);
    if (hours > 23 || minutes > 59) return undefined;
    offsetMinutes = (sign === '-' ? -1 : 1) * (hours * 60 + minutes);
  }
  return { secondMs: ms - offsetMinutes * 60_000, fraction };
}

/**
 * Epoch milliseconds of an RFC 3339 timestamp (fraction truncated to milliseconds), or `undefined`
 * when `text` is not one or names a time that does not exist. With `utcOnly`, only the `Z` form is
 * accepted (Trust Signals windows take that form alone).
 */
export function parseRfc3339(text: string, opts?: { utcOnly?: boolean }): number | undefined {
  const t = read(text, opts?.utcOnly ? 'rfc3339-utc' : 'rfc3339');
  return t && t.secondMs + Number(t.fraction.slice(0, 3).padEnd(3, '0'));
}

/** {@link parseRfc3339} with `utcOnly`: `2024-01-02T10:00:00Z` and its fractions only. */
export function parseRfc3339Utc(text: string): number | undefined {
  return parseRfc3339(text, { utcOnly: true });
}

/**
 * Nanoseconds since the epoch of an ISO 8601 timestamp as the Log API writes and reads them (RFC
 * 3339 plus: no offset meaning UTC, `±HHMM`, a space for the `T` or for the offset's `+`), exact at
 * any precision; `undefined` when it is not one or names a time that does not exist.
 */
export function parseIso8601Ns(text: string): bigint | undefined {
  const t = read(text, 'iso8601');
  return t && BigInt(t.secondMs) * 1_000_000n + BigInt(t.fraction.padEnd(9, '0'));
}

/** An RFC 3339 timestamp of a real date and time, `Z` or an offset (see {@link parseRfc3339}). */
export const rfc3339Schema = z
  .string()
  .refine((v) => parseRfc3339(v) !== undefined, 'must be an RFC 3339 timestamp of a real date and time')
  .meta({ format: 'date-time' });
