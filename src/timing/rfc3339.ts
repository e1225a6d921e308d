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

/** The value of the decimal digits `text[at, at + n)`, or -1 when one is not an ASCII digit. */
function digits(text: string, at: number, n: number): number {
  let v = 0;
  for (let i = at; i < at + n; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  return v;
}

const DASH = 45;
const COLON = 58;
const DOT = 46;
const PLUS = 43;
const SPACE = 32;

/** What `read` takes from a timestamp's text before checking its fields. */
interface Fields {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  /** `T` or `t` (true), or a space (false). */
  t: boolean;
  fraction: string;
  zulu: boolean;
  /** The offset's sign character code (`+`, `-` or a space), 0 when none. */
  sign: number;
  offsetHours: number;
  offsetMinutes: number;
  colon: boolean;
}

/**
 * Splits `YYYY-MM-DD[Tt ]hh:mm:ss[.f{1,9}][Zz|[+- ]hh[:]mm]` into its fields, or undefined when
 * the text does not have that shape (issue 32: a character scan instead of a regex match and its
 * capture strings on every timestamp of every signal answer).
 */
function split(text: string): Fields | undefined {
  const n = text.length;
  if (n < 19) return undefined;
  const sep = text.charCodeAt(10);
  const t = sep === 84 || sep === 116; // T t
  if (!t && sep !== SPACE) return undefined;
  if (text.charCodeAt(4) !== DASH || text.charCodeAt(7) !== DASH) return undefined;
  if (text.charCodeAt(13) !== COLON || text.charCodeAt(16) !== COLON) return undefined;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return undefined;
  let i = 19;
  let fraction = '';
  if (i < n && text.charCodeAt(i) === DOT) {
    const from = ++i;
    while (i < n && i - from < 10 && digits(text, i, 1) >= 0) i++;
    if (i === from || i - from > 9) return undefined;
    fraction = text.slice(from, i);
  }
  let zulu = false;
  let sign = 0;
  let offsetHours = 0;
  let offsetMinutes = 0;
  let colon = false;
  if (i < n) {
    const c = text.charCodeAt(i);
    if (c === 90 || c === 122) {
      // Z z
      if (i + 1 !== n) return undefined;
      zulu = true;
    } else {
      if (c !== PLUS && c !== DASH && c !== SPACE) return undefined;
      colon = text.charCodeAt(i + 3) === COLON;
      if (n !== i + (colon ? 6 : 5)) return undefined;
      offsetHours = digits(text, i + 1, 2);
      offsetMinutes = digits(text, i + (colon ? 4 : 3), 2);
      if (offsetHours < 0 || offsetMinutes < 0) return undefined;
      sign = c;
    }
  }
  return {
    year,
    month,
    day,
    hour,
    minute,
    second,
    t,
    fraction,
    zulu,
    sign,
    offsetHours,
    offsetMinutes,
    colon,
  };
}

function read(text: string, form: 'rfc3339' | 'rfc3339-utc' | 'iso8601'): Instant | undefined {
  if (typeof text !== 'string') return undefined;
  const m = split(text);
  if (m === undefined) return undefined;
  const { year, month, day, hour, minute, second, fraction, zulu, sign } = m;
  if (form !== 'iso8601') {
    if (!m.t || (!zulu && (form === 'rfc3339-utc' || sign === 0))) return undefined;
    if (sign === SPACE || (sign !== 0 && !m.colon)) return undefined;
  }
  // Field by field (issue 32: building a Date and reading it back was most of this on /decide,
  // which checks every timestamp of every signal answer). A field out of range is refused, as
  // `Date.parse` would roll it over: no 30 February, no 24:00, no leap second.
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  const ms = ((epochDays(year, month, day) * 24 + hour) * 60 + minute) * 60_000 + second * 1000;
  let offsetMinutes = 0;
  if (sign !== 0) {
    if (m.offsetHours > 23 || m.offsetMinutes > 59) return undefined;
    offsetMinutes = (sign === DASH ? -1 : 1) * (m.offsetHours * 60 + m.offsetMinutes);
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
