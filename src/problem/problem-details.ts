/**
 * What riskgate answers when it refuses a request: RFC 9457 problem details and the rule for closing
 * a refused connection. Shared by the HTTP app (src/http/) and the admission control that refuses
 * before the app (src/admission/), below both.
 */
import { ErrorCode, InputError, isRiskgateError, UpstreamError } from '../errors/riskgate-error.ts';

/**
 * The one error envelope of riskgate's HTTP edge: RFC 9457 problem details, keyed by the stable
 * `RG_ERR_*` code. Every non-2xx answer riskgate produces itself goes through `toProblem`.
 */

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export interface ProblemDetails {
  /** `urn:riskgate:problem:<code>`, stable per code. */
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  /** The first bad field of an input error, as a dotted path (`baseline.unitId`). */
  field?: string;
  /** Every bad field of an input error. */
  errors?: { field: string; message: string }[];
}

interface CodeInfo {
  status: number;
  title: string;
}

const CODES: Record<ErrorCode, CodeInfo> = {
  RG_ERR_INVALID_INPUT: { status: 400, title: 'Invalid request' },
  RG_ERR_PAYLOAD_TOO_LARGE: { status: 413, title: 'Request body too large' },
  RG_ERR_UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type' },
  RG_ERR_UNAUTHENTICATED: { status: 401, title: 'Unauthenticated' },
  RG_ERR_INVALID_SIGNATURE: { status: 401, title: 'Invalid signature' },
  RG_ERR_FORBIDDEN: { status: 403, title: 'Forbidden' },
  RG_ERR_RATE_LIMITED: { status: 429, title: 'Too many requests' },
  RG_ERR_CALLBACK_REPLAYED: { status: 409, title: 'Callback already received' },
  RG_ERR_CONFLICT: { status: 409, title: 'Conflict with the current state' },
  RG_ERR_DECISION_LOG_UNAVAILABLE: { status: 503, title: 'Decision log unavailable' },
  RG_ERR_NOT_FOUND: { status: 404, title: 'Not found' },
  RG_ERR_METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed' },
  RG_ERR_DEADLINE_EXCEEDED: { status: 504, title: 'Deadline exceeded' },
  RG_ERR_TOKEN_UNAVAILABLE: { status: 503, title: 'Upstream token unavailable' },
  RG_ERR_UPSTREAM_TIMEOUT: { status: 504, title: 'Upstream timeout' },
  RG_ERR_UPSTREAM_UNREACHABLE: { status: 502, title: 'Upstream unreachable' },
  RG_ERR_UPSTREAM_BAD_REQUEST: { status: 502, title: 'Upstream refused the request' },
  RG_ERR_UPSTREAM_UNAUTHORIZED: { status: 502, title: 'Upstream refused the credentials' },
  RG_ERR_UPSTREAM_FORBIDDEN: { status: 502, title: 'Upstream forbade the request' },
  RG_ERR_UPSTREAM_NOT_FOUND: { status: 502, title: 'Upstream resource not found' },
  RG_ERR_UPSTREAM_GONE: { status: 502, title: 'Upstream resource archived' },
  RG_ERR_UPSTREAM_RATE_LIMITED: { status: 503, title: 'Upstream rate limited' },
  RG_ERR_UPSTREAM_SERVER_ERROR: { status: 502, title: 'Upstream error' },
  RG_ERR_UPSTREAM_MALFORMED_RESPONSE: { status: 502, title: 'Upstream answered malformed data' },
  RG_ERR_UPSTREAM_UNEXPECTED_STATUS: { status: 502, title: 'Upstream answered an unexpected status' },
  RG_ERR_INVALID_CONFIG: { status: 500, title: 'Invalid configuration' },
  RG_ERR_INVALID_POLICY: { status: 500, title: 'Invalid policy' },
  RG_ERR_ABORTED: { status: 503, title: 'Aborted' },
  RG_ERR_OVERLOADED: { status: 503, title: 'Overloaded' },
  RG_ERR_CIRCUIT_OPEN: { status: 503, title: 'Upstream circuit open' },
  RG_ERR_UNSENDABLE_REQUEST: { status: 500, title: 'Request cannot be sent' },
  RG_ERR_FEATURE_STORE_UNAVAILABLE: { status: 503, title: 'Feature store unavailable' },
  RG_ERR_HISTORY_BEHIND: { status: 503, title: 'Event history behind' },
  RG_ERR_OUTBOX_UNAVAILABLE: { status: 503, title: 'Outbox unavailable' },
  RG_ERR_FEEDBACK_UNAVAILABLE: { status: 503, title: 'Recent decisions unavailable' },
  RG_ERR_DECISION_STORE_UNAVAILABLE: { status: 503, title: 'Decision store unavailable' },
  RG_ERR_DATABASE_UNAVAILABLE: { status: 503, title: 'Database unavailable' },
  RG_ERR_AUDIT_UNAVAILABLE: { status: 503, title: 'Audit trail unavailable' },
  RG_ERR_SUBJECT_MISMATCH: { status: 400, title: 'Subject mismatch' },
  RG_ERR_LISTS_UNAVAILABLE: { status: 503, title: 'Lists unavailable' },
  RG_ERR_SNOOZES_UNAVAILABLE: { status: 503, title: 'Rule snoozes unavailable' },
  RG_ERR_POLICY_VERSION_CONFLICT: { status: 409, title: 'Policy version conflict' },
  RG_ERR_POLICY_SELF_APPROVAL: { status: 403, title: 'Approval needs a second admin' },
  RG_ERR_INTERNAL: { status: 500, title: 'Internal error' },
};

/** The HTTP status riskgate answers for an error code. */
export function statusOfCode(code: ErrorCode): number {
  return CODES[code].status;
}

/**
 * Maps any thrown value to problem details. A `RiskgateError` keeps its code and message (they
 * are written for callers and never carry secrets); anything else is a bug and becomes a bare
 * `RG_ERR_INTERNAL` with no detail of its own, so nothing internal leaks.
 */
export function toProblem(error: unknown): ProblemDetails {
  if (!isRiskgateError(error)) return problemOf(ErrorCode.INTERNAL, 'An internal error occurred.');
  const problem = problemOf(error.code, error.message);
  if (error instanceof InputError && error.issues.length > 0) {
    problem.field = error.issues[0]!.field;
    problem.errors = error.issues.map((i) => ({ field: i.field, message: i.message }));
  } else if (error instanceof UpstreamError) {
    // An upstream's own message may echo our request; the code and upstream name are enough.
    problem.detail = `${error.upstream}: ${error.code}`;
  }
  return problem;
}

/** Problem details for `code` with a human `detail`. */
export function problemOf(code: ErrorCode, detail: string): ProblemDetails {
  const info = CODES[code];
  return {
    type: `urn:riskgate:problem:${code.slice('RG_ERR_'.length).toLowerCase().replaceAll('_', '-')}`,
    title: info.title,
    status: info.status,
    detail,
    code,
  };
}

/** The code of each problem answer, for the edge's error metrics (no header, no body parsing). */
const problemCodes = new WeakMap<Response, ErrorCode>();

/** A `Response` carrying `problem`, with the problem+json content type. */
export function problemResponse(problem: ProblemDetails, headers?: Record<string, string>): Response {
  const answer = problemAnswer(problem, headers);
  const response = new Response(answer.body, { status: answer.status, headers: answer.headers });
  problemCodes.set(response, problem.code);
  return response;
}

/** `problemResponse`'s parts, for an answer written without a `Response` (src/http/direct-route.ts). */
export function problemAnswer(
  problem: ProblemDetails,
  headers?: Record<string, string>,
): { status: number; headers: Record<string, string>; body: string; code: ErrorCode } {
  return {
    status: problem.status,
    headers: { 'content-type': PROBLEM_CONTENT_TYPE, ...headers },
    body: JSON.stringify(problem),
    code: problem.code,
  };
}

/** The `RG_ERR_*` code of a response made by `problemResponse`; undefined for any other. */
export function problemCodeOf(response: Response): ErrorCode | undefined {
  return problemCodes.get(response);
}
