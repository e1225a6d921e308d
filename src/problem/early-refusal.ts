/**
 * A refused request body Node discards without closing the connection: as large as the largest
 * `/decide` body (`MAX_DECIDE_BODY_BYTES`, src/decide/decide-request.ts; a test keeps them equal).
 * Not imported from there: this rule sits below the rooms that answer requests.
 */
export const SMALL_REFUSED_BODY_BYTES = 16 * 1024;

/** Statuses answered before the request body is read to its end. */
const EARLY_REFUSALS: ReadonlySet<number> = new Set([401, 404, 405, 413, 415, 503]);

/**
 * Whether an answer of `status` must close its connection. A request refused before its body was
 * read (or part-read, a 413) leaves a connection that cannot carry another request reliably, and
 * reading the rest would be work for a caller already refused. Except a shed 503 whose body is
 * small: Node discards it and keeps the connection; closing made every refused client reconnect,
 * and under a burst the reconnections were the work (bench/RESULTS.md). The one rule for the app's
 * answers and the refusals written before it (src/admission/shed-before-app.ts).
 */
export function refusalClosesConnection(
  status: number,
  contentLength: string | undefined,
  transferEncoding: string | undefined,
): boolean {
  if (!EARLY_REFUSALS.has(status)) return false;
  const hasBody = (contentLength !== undefined && contentLength !== '0') || transferEncoding !== undefined;
  if (!hasBody) return false;
  const small = transferEncoding === undefined && Number(contentLength ?? 0) <= SMALL_REFUSED_BODY_BYTES;
  return !(status === 503 && small);
}
