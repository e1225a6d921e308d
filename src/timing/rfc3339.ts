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
  const local = `${date}T${time}`;
  const ms = Date.parse(`${local}Z`);
  // A 4-digit year keeps toISOString to `YYYY-MM-DDTHH:MM:SS` at 0-19.
  if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 19) !== local) return undefined;
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
