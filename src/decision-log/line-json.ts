/**
 * A decision-log record's JSON, serialised once for its two readers: the decision log writes the
 * record as redacted, the decision store keeps it as it is (src/decision-store/decision-rows.ts).
 * When redaction leaves the record whole (RISKGATE_DECISION_LOG_REDACT=none, or no field it names is
 * in the line) the log keeps its JSON here, and the store, whose batch comes later, takes it.
 * Issue 32: a second `JSON.stringify` of a ~3.7 KB line is 14-20 µs of a decision on the event loop.
 *
 * Kept by the record's identity (weakly): a record is not changed once it is logged. Sharing the
 * members redaction did not copy, serialised one by one, was measured and not kept: walking them
 * in JavaScript cost more than the native `JSON.stringify` it saved (bench/RESULTS.md, issue 32).
 */

const memo = new WeakMap<object, string>();

/** `JSON.stringify(record)`, kept for the next reader of the same object. */
export function lineJson(record: object): string {
  const json = JSON.stringify(record);
  memo.set(record, json);
  return json;
}

/** The JSON `lineJson` kept for `record`, else `JSON.stringify(record)` (not kept: no one asks again). */
export function takeLineJson(record: object): string {
  return memo.get(record) ?? JSON.stringify(record);
}
