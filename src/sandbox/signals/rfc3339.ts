/**
 * Strict RFC 3339 date-times for the sandbox (signal windows, Collection `observedAt`, the Log API's
 * ISO forms). `Date.parse` rolls an impossible date over (`2024-02-30` becomes March 1) and takes
 * `24:00`, so a client bug would pass unseen; here every field must exist on the calendar.
 *
 * Kept local until the shared strict parser (`src/signals/rfc3339.ts`, planned) lands; then the
 * sandbox should import that one instead.
 */

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$/;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/**
 * Milliseconds since the epoch of a UTC calendar date and time (month 1-12), or undefined when a
 * field is out of range (February 30th, hour 24, second 60). Years 0-99 are taken as written.
 */
export function utcDateTimeMs(
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
  second: number,
): number | undefined {
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  const d = new Date(0);
  // setUTCFullYear, unlike Date.UTC, does not map years 0-99 to 1900-1999.
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, 0);
  return d.getTime();
}

/**
 * Parses an RFC 3339 date-time (`2024-01-02T10:00:00Z`, `…T10:00:00.5+01:00`) to milliseconds since
 * the epoch (fractions below 1 ms are dropped). Undefined when malformed or not a real instant.
 * @param options.utcOnly refuse offsets other than `Z`. Default false.
 */
export function parseRfc3339(value: string, options: { utcOnly?: boolean } = {}): number | undefined {
  const m = RFC3339.exec(value);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const base = utcDateTimeMs(Number(y), Number(mo), Number(d), Number(h), Number(mi), Number(s));
  if (base === undefined) return undefined;
  let offsetMs = 0;
  if (zone !== 'Z' && zone !== 'z') {
    if (options.utcOnly) return undefined;
    const oh = Number(zone!.slice(1, 3));
    const om = Number(zone!.slice(4, 6));
    if (oh > 23 || om > 59) return undefined;
    offsetMs = (zone![0] === '-' ? -1 : 1) * (oh * 60 + om) * 60_000;
  }
  const ms = frac === undefined ? 0 : Number(frac.slice(0, 3).padEnd(3, '0'));
  return base + ms - offsetMs;
}
