/**
 * Strict RFC 3339 UTC timestamps (`2024-01-02T10:00:00Z`, fraction up to nanoseconds, `T`/`Z` in
 * either case per RFC 3339 §5.6): the form Trust Signals windows take. Shared by the signals client
 * and the sandbox, so both refuse the same strings.
 */

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?[Zz]$/;

/**
 * Epoch milliseconds of an RFC 3339 UTC timestamp, or `undefined` when `text` is not one or names
 * a time that does not exist. `Date.parse` rolls impossible fields over (`2024-02-30` becomes
 * 1 March, `24:00:00` the next day): the date-time part must read back unchanged. Leap seconds
 * (`:60`) are refused. Fractions beyond milliseconds are truncated.
 */
export function parseRfc3339Utc(text: string): number | undefined {
  if (typeof text !== 'string' || !RFC3339_UTC.test(text)) return undefined;
  const ms = Date.parse(text.toUpperCase());
  if (Number.isNaN(ms)) return undefined;
  const back = new Date(ms).toISOString();
  // Both sides are `YYYY-MM-DDTHH:MM:SS` at 0-19 (a 4-digit year keeps toISOString to that form).
  for (let i = 0; i < 19; i++) {
    const c = text.charCodeAt(i) | 0x20; // `t` and `T` compare equal; digits and - : are unchanged
    if (c !== (back.charCodeAt(i) | 0x20)) return undefined;
  }
  return ms;
}
