/**
 * Tracing of upstream calls, as the upstream layer sees it: one client span per call (its attempts
 * included), whose W3C `traceparent` is the one the call sends. Implemented by
 * src/observability/tracing.ts; absent when tracing is off, so a call then costs one `undefined`
 * check. Lives here so the upstream layer does not depend on OpenTelemetry.
 */

/** What a client span records about its call (HTTP semantic conventions). */
export interface CallSpanStart {
  /** `upstream operation`, e.g. `signals new-browser`. */
  name: string;
  method: string;
  /** `scheme://host[:port]`. */
  origin: string;
  /** The path without its query (which may carry identifiers; never secrets, but kept out). */
  path: string;
}

export interface CallSpan {
  /** The span's own `traceparent`, sent on every attempt of the call. */
  readonly traceparent: string;
  /** Ends the span: the last HTTP status seen, the error code when it failed, attempts made. */
  end(status: number | undefined, errorType: string | undefined, attempts: number): void;
}

export interface CallTracer {
  /**
   * Starts a client span: a child of `parent` (the decision's `traceparent`) when given, else the
   * root of a trace of its own (background calls: token refresh, cache refresh, the Log API follower,
   * actions without a decision context). `links` are further traces the call serves (a batch POST
   * carries the lookups of several decisions).
   */
  startCall(parent: string | undefined, links: readonly string[] | undefined, start: CallSpanStart): CallSpan;
}
