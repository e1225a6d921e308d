import { parseRfc3339Utc } from '../../signals/rfc3339.ts';

const OFFSET = /^(.+)([+-])(\d{2}):(\d{2})$/;

/**
 * Epoch milliseconds of an RFC 3339 date-time with `Z` or a numeric offset (`…T11:30:00+01:30`), as
 * the Collection endpoint's `observedAt` takes it; undefined when malformed or not a real instant
 * (`2024-02-30`, `24:00`, offset hour above 23). The calendar check is the shared strict parser's.
 */
export function parseRfc3339(value: string): number | undefined {
  const m = OFFSET.exec(value);
  if (!m) return parseRfc3339Utc(value);
  const [, local, sign, hh, mm] = m;
  const hours = Number(hh);
  const minutes = Number(mm);
  if (hours > 23 || minutes > 59) return undefined;
  const ms = parseRfc3339Utc(`${local}Z`);
  if (ms === undefined) return undefined;
  return ms - (sign === '-' ? -1 : 1) * (hours * 60 + minutes) * 60_000;
}
