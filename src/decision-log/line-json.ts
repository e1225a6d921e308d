/**
 * A decision-log record's JSON, serialised once for its two readers. The decision log writes the
 * record as redacted and the decision store keeps it as it is (src/decision-store/decision-rows.ts);
 * redaction copies only the path it changes (src/decision-log/log-redaction.ts), so the two share
 * every other member, the bulk of the line (the request, the signals, the outcome, the timings).
 * The JSON of each object member of the record and of its `inputs` is kept (weakly) by the
 * member's identity: whichever reader comes second serialises only what redaction copied. Issue 32:
 * a second `JSON.stringify` of a ~3 KB line was ~14 µs of every decision on the event loop.
 *
 * Byte for byte `JSON.stringify(record)`. A record's members are not changed once it is logged (the
 * decide room builds a fresh line per decision; what it shares between decisions, such as a cached
 * Admin user, is read-only).
 */

const memo = new WeakMap<object, string>();

/** How deep objects are memoised: the record (when redaction left it whole), its members, those of `inputs`. */
const MEMO_DEPTH = 3;

/** `JSON.stringify(record)`, reusing the JSON of members already serialised for another line. */
export function lineJson(record: object): string {
  return objectJson(record, MEMO_DEPTH) ?? 'null';
}

function objectJson(value: object, depth: number): string | undefined {
  // Only plain objects are taken apart; arrays, a Date, a boxed string and the memo's bottom go to
  // JSON.stringify whole, which knows their rules.
  const proto: unknown = Object.getPrototypeOf(value);
  if (depth === 0 || (proto !== Object.prototype && proto !== null) || 'toJSON' in value)
    return JSON.stringify(value);
  const known = memo.get(value);
  if (known !== undefined) return known;
  let out = '{';
  for (const key of Object.keys(value)) {
    const member = (value as Record<string, unknown>)[key];
    const json =
      member !== null && typeof member === 'object' ? objectJson(member, depth - 1) : JSON.stringify(member);
    // undefined, a function or a symbol: left out, as JSON.stringify does.
    if (json === undefined) continue;
    out += `${out.length === 1 ? '' : ','}${JSON.stringify(key)}:${json}`;
  }
  out += '}';
  memo.set(value, out);
  return out;
}
