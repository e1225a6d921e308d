import type { IncomingMessage } from 'node:http';
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { z } from 'zod';
import { ErrorCode, InputError, RiskgateError } from '../errors/riskgate-error.ts';
import { problemOf, problemResponse } from '../problem/problem-details.ts';
import { withDirectGuard } from './direct-form.ts';

/**
 * JSON request bodies at the edge: content type (415), size (413), syntax and schema (400). The
 * errors are `RiskgateError`s, so the app's one error handler renders them as problem+json.
 */

const JSON_CONTENT_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * Hono middleware answering 413 problem+json for a body over `maxBytes`. A declared length is
 * checked from the header alone, so the body is then read by the adapter's direct path; only a
 * streamed (chunked) body goes through hono's counting reader, which materialises a web Request.
 */
export function limitBody(maxBytes: number): MiddlewareHandler {
  const tooLarge = () =>
    problemResponse(problemOf(ErrorCode.PAYLOAD_TOO_LARGE, `The request body is over ${maxBytes} bytes.`));
  const streamed = bodyLimit({ maxSize: maxBytes, onError: tooLarge });
  // Not async: `next()`'s promise is the layer's (see keyAuth, src/edge/caller-auth.ts).
  const middleware: MiddlewareHandler = (c, next) => {
    const length = c.req.header('content-length');
    if (length === undefined || c.req.header('transfer-encoding') !== undefined) return streamed(c, next);
    if (Number(length) > maxBytes) return Promise.resolve(tooLarge());
    return next();
  };
  // Directly: a declared length within the limit only (a streamed body is hono's counting reader's).
  return withDirectGuard(middleware, {
    check: (req) => {
      const length = req.headers['content-length'];
      return (
        length !== undefined && req.headers['transfer-encoding'] === undefined && !(Number(length) > maxBytes)
      );
    },
  });
}

/**
 * The error to answer when the client closed the connection before sending its whole request
 * (`RG_ERR_ABORTED`), else undefined. Reading such a body fails with Node's `Error: aborted`,
 * which is the client's doing, not a bug: the edge's error handler answers it (nobody hears the
 * answer) without logging it as an unhandled error; `riskgate_http_*` still counts it by code.
 */
export function clientAbortOf(incoming: IncomingMessage | undefined): RiskgateError | undefined {
  if (incoming === undefined || incoming.complete) return undefined;
  if (!incoming.destroyed && incoming.errored == null) return undefined;
  return new RiskgateError(ErrorCode.ABORTED, 'The client closed the connection before its request ended.');
}

/** The value at `path` in `input`, or undefined when any step is missing. */
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/**
 * A caller-facing message for one zod issue: zod's own ("Invalid input: expected string, received
 * undefined") names its internals; a caller needs "is required" or "must be a string".
 */
function issueMessage(issue: z.core.$ZodIssue, input: unknown): string {
  if (issue.code !== 'invalid_type') return issue.message;
  if (input !== undefined && issue.path.length > 0 && valueAt(input, issue.path) === undefined) {
    return 'is required';
  }
  const expected = String(issue.expected);
  if (expected === 'number' && typeof valueAt(input, issue.path) === 'number') {
    return 'must be a finite number (this one is beyond the double-precision range)';
  }
  return `must be ${/^[aeiou]/.test(expected) ? 'an' : 'a'} ${expected}`;
}

/**
 * Converts zod issues to `InputError` issues with dotted field paths (`baseline.unitId`). With the
 * parsed `input`, a missing field reads "is required" and a wrong type "must be a <type>".
 */
export function inputErrorOf(error: z.ZodError, what = 'The request body', input?: unknown): InputError {
  const issues = error.issues.flatMap((issue) => {
    const base = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((k) => ({ field: base ? `${base}.${k}` : k, message: 'is not a known field' }));
    }
    return [{ field: base, message: issueMessage(issue, input) }];
  });
  const first = issues[0];
  const message = first
    ? `${what} is invalid: ${first.field ? `${first.field} ` : ''}${first.message}`
    : `${what} is invalid`;
  return new InputError(message, issues);
}

/**
 * Reads, parses and validates a JSON body with `schema` (or first `accept`, the same check without
 * zod of the bodies it certainly accepts). Throws `RG_ERR_UNSUPPORTED_MEDIA_TYPE` for a content
 * type other than JSON, and `InputError` for bad JSON or a schema violation.
 */
export function readJsonBody<S extends z.ZodType>(
  c: Context,
  schema: S,
  accept?: (json: unknown) => z.output<S> | undefined,
): Promise<z.output<S>> {
  return jsonBodyOf(c.req.header('content-type'), () => c.req.text(), schema, accept);
}

/** `readJsonBody` of a request's content type and body text, however they are read. */
export function jsonBodyOf<S extends z.ZodType>(
  contentType: string | undefined,
  text: () => Promise<string>,
  schema: S,
  accept?: (json: unknown) => z.output<S> | undefined,
): Promise<z.output<S>> {
  if (contentType === undefined || !JSON_CONTENT_TYPE.test(contentType)) {
    return Promise.reject(
      new RiskgateError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, 'Send the body as application/json.'),
    );
  }
  // Not async: the body's own promise and one `then` (issue 32: an async layer per request).
  return text().then((body) => checkedJsonBody(body, schema, accept));
}

/** The body's text parsed and checked (see `readJsonBody`): throws `InputError` when it is not. */
function checkedJsonBody<S extends z.ZodType>(
  text: string,
  schema: S,
  accept: ((json: unknown) => z.output<S> | undefined) | undefined,
): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new InputError('The request body is not valid JSON.', [
      { field: '', message: 'is not valid JSON' },
    ]);
  }
  const accepted = accept?.(json);
  if (accepted !== undefined) return accepted;
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw inputErrorOf(parsed.error, 'The request body', json);
  return parsed.data;
}
