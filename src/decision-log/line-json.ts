/**
 * A decision-log record's JSON, serialised once for its two readers: the decision log writes the
 * record as redacted (RISKGATE_DECISION_LOG_REDACT), and the decision store, whose batch comes later,
 * keeps that same line (src/decision-store/decision-rows.ts): what the store keeps is never more
 * than the log keeps. Issue 32: a second `JSON.stringify` of a ~3.7 KB line is 14-20 µs of a
 * decision on the event loop. The store's filter columns (account, user, IP, unit) are read from
 * the record itself, not from the line.
 *
 * Kept by the record's identity (weakly) until the store takes it: a record is not changed once it
 * is logged. Taken, the entry is deleted, not left for the key's death: a scavenge copies the value
 * of every entry still in the map (a young key's too), and an entry whose key has been promoted is
 * kept, value and all, until a mark-compact (every ~40 s at 200/s), so a line the store had written
 * was promoted (issue 32, bench/RESULTS.md "what holds the decision log's line"). Sharing the
 * members redaction did not copy, serialised one by one, was measured and not kept: walking them
 * in JavaScript cost more than the native `JSON.stringify` it saved (bench/RESULTS.md, issue 32).
 */

const memo = new WeakMap<object, string>();

/** `JSON.stringify(line)` (the record as redacted, or the record itself), kept for the next reader of `record`. */
export function lineJson(record: object, line: object = record): string {
  const json = JSON.stringify(line);
  memo.set(record, json);
  return json;
}

/**
 * The line `lineJson` kept for `record`, no longer kept (the store is its last reader: it keeps the
 * line in its row until written); else (the log is off, or it dropped the record) the JSON of
 * `redact(record)`, the line the log would have written.
 */
export function takeLineJson(record: object, redact?: (record: object) => object): string {
  const kept = memo.get(record);
  if (kept === undefined) return JSON.stringify(redact === undefined ? record : redact(record));
  memo.delete(record);
  return kept;
}
