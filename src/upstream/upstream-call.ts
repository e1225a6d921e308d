import type { Dispatcher } from 'undici';
import type { z } from 'zod';
import { ErrorCode, UpstreamError, type UpstreamName } from '../errors/riskgate-error.ts';
import { backoffDelayMs } from '../timing/backoff.ts';
import type { Clock } from '../timing/clock.ts';
import { sleep } from '../timing/sleep.ts';
import type { CallSpan, CallTracer } from './call-tracer.ts';
import { type CircuitBreakers, circuitOpenError } from './circuit-breaker.ts';
import { deadlineError, malformedError, statusError } from './upstream-errors.ts';
import { type AttemptRequest, type LateAnswers, type RawResponse, sendAttempt } from './upstream-request.ts';
import type { CallOptions, UpstreamResult } from './upstream-result.ts';

/**
 * A call to an upstream: attempts, the retry policy, the 401 hook and the typed result. Every
 * client builds on `callUpstream`; none talks to undici directly.
 */

/** What a client observes about each call (metrics, Server-Timing). Never carries secrets. */
export interface CallInfo {
  upstream: UpstreamName;
  /** Operation, e.g. `new-browser`, `remote-access-tool-batch`, `get-user`. */
  name: string;
  durationMs: number;
  /** Attempts made (1, or 2 after a retry / a token refresh). */
  attempts: number;
  /** Last HTTP status seen, when the upstream answered. */
  status?: number;
  /** The error code, when the call failed. */
  code?: string;
  /** Items carried, for a batch call. */
  items?: number;
}

/** Settings shared by all calls of one client. Times in milliseconds. */
export interface UpstreamContext {
  upstream: UpstreamName;
  dispatcher: Dispatcher;
  /** Wall time for deadlines and `Retry-After` dates (src/timing/clock.ts). */
  clock: Clock;
  /** Timeout of one attempt when the call gives none. */
  defaultTimeoutMs: number;
  /** Longest `Retry-After` honoured when the call has no `deadlineAt`. */
  maxRetryWaitMs: number;
  /** Pause before retrying a transport failure, timeout or 5xx (jittered between 50% and 100%). */
  retryDelayMs: number;
  /** A retry is only started when at least this much remains before `deadlineAt`. */
  minRetryBudgetMs: number;
  /** Larger bodies are malformed. */
  maxBodyBytes: number;
  /** How long a timed-out attempt's late answer may take before its socket is destroyed (see `AttemptSettings`). */
  lateAnswerGraceMs: number;
  /** The late answers being drained (ended by the client's `close()`). */
  lateAnswers?: LateAnswers | undefined;
  onCall?: ((info: CallInfo) => void) | undefined;
  /** Client spans and `traceparent` for every call; undefined when tracing is off. */
  tracer?: CallTracer | undefined;
  /** `scheme://host[:port]` of the upstream, for the client spans' `url.full`. */
  origin?: string | undefined;
  /** Per-route circuit breakers; undefined: every call is attempted (the token endpoint). */
  breakers?: CircuitBreakers | undefined;
}

/** Client-level options that tune `UpstreamContext` (all optional, milliseconds). */
export interface RetryTuning {
  /** Longest `Retry-After` honoured when a call has no `deadlineAt`. Default 1000. */
  maxRetryWaitMs?: number;
  /** Pause before a retry after a transport failure, timeout or 5xx. Default 20. */
  retryDelayMs?: number;
  /** Minimum time left before `deadlineAt` for a retry to start. Default 20. */
  minRetryBudgetMs?: number;
}

/**
 * The retry settings of a client's `UpstreamContext`, from its optional tuning. Defaults (ms):
 * `maxRetryWaitMs` 1000 (longest `Retry-After` honoured without a `deadlineAt`), `retryDelayMs` 20
 * (pause before retrying a transport failure, timeout or 5xx, jittered to 50-100%),
 * `minRetryBudgetMs` 20 (time that must be left before `deadlineAt` for any retry to start).
 */
export function retryDefaults(
  t: RetryTuning = {},
): Pick<UpstreamContext, 'maxRetryWaitMs' | 'retryDelayMs' | 'minRetryBudgetMs'> {
  return {
    maxRetryWaitMs: t.maxRetryWaitMs ?? 1000,
    retryDelayMs: t.retryDelayMs ?? 20,
    minRetryBudgetMs: t.minRetryBudgetMs ?? 20,
  };
}

/** One logical call. */
export interface CallSpec<T> {
  /** Operation name for errors and metrics. */
  name: string;
  /**
   * Builds the request of each attempt (called again for a retry, so signatures and tokens are
   * fresh). May resolve to an error (e.g. no token), which ends the call.
   */
  build: () => AttemptRequest | UpstreamError | Promise<AttemptRequest | UpstreamError>;
  /** Statuses handed to `parse`; any other is a typed status error. Default: 200 only. */
  accept?: (status: number) => boolean;
  /** Turns an accepted answer into the value, or into an error when it does not match the spec. */
  parse: (res: RawResponse) => T | UpstreamError;
  /**
   * Whether the request is safe to send twice (idempotent), so a failure may be retried. At most one
   * retry is ever made per call, the 401 retry included.
   */
  retry: boolean;
  /**
   * Called on a 401 with the request that got it; resolving `true` retries once (after the token
   * was refreshed). Independent of `retry`: a stale token is not a reason to give up. Not called
   * when the call already retried, or when too little time is left before `deadlineAt`.
   */
  onUnauthorized?: (req: AttemptRequest) => Promise<boolean>;
  /** Streams a 2xx body instead of collecting it (the Log API). */
  onChunk?: (chunk: Buffer) => UpstreamError | undefined;
  /** Items in a batch call, reported in `CallInfo`. */
  items?: number;
  /** Traces of other decisions this call also serves (a batch), linked from its client span. */
  links?: readonly string[];
}

const accept200 = (status: number): boolean => status === 200;

function isRetryable(err: UpstreamError): boolean {
  switch (err.code) {
    case ErrorCode.UPSTREAM_UNREACHABLE:
    case ErrorCode.UPSTREAM_TIMEOUT:
      return true;
    case ErrorCode.UPSTREAM_SERVER_ERROR:
      // 501 "not implemented" will not change on a second try.
      return err.status !== 501;
    case ErrorCode.UPSTREAM_RATE_LIMITED:
      return err.retryAfterMs !== undefined;
    default:
      return false;
  }
}

/** The error of an answer whose status the call does not accept (its `Retry-After` read now). */
function statusErrorOf(ctx: UpstreamContext, name: string, res: RawResponse): UpstreamError {
  return statusError(ctx.upstream, name, res.status, res.body, res.headers['retry-after'], ctx.clock.nowMs());
}

/** Whether a retry after `waitMs` still leaves `minRetryBudgetMs` before the call's `deadlineAt`. */
function fitsDeadline(ctx: UpstreamContext, opts: CallOptions | undefined, waitMs: number): boolean {
  return (
    opts?.deadlineAt === undefined || ctx.clock.nowMs() + waitMs + ctx.minRetryBudgetMs <= opts.deadlineAt
  );
}

/**
 * Runs a call with its retry policy and resolves to an `UpstreamResult` (never rejects for an
 * upstream failure). A call makes at most two attempts: one retry, for one reason. That retry is
 * either the 401 one (`spec.onUnauthorized` refreshed the token; made whether or not `spec.retry`)
 * or, only when `spec.retry`, the one after a transport failure, a timeout, a 5xx other than 501,
 * or a 429 whose `Retry-After` fits. So a 401 then a 503 is the call's answer (503), not a third
 * attempt. Either retry starts only when at least `minRetryBudgetMs` is left before
 * `opts.deadlineAt` (after the wait, for a 5xx/429).
 */
export async function callUpstream<T>(
  ctx: UpstreamContext,
  spec: CallSpec<T>,
  opts: CallOptions | undefined,
): Promise<UpstreamResult<T>> {
  const started = performance.now();
  const breakers = ctx.breakers;
  const route = breakers === undefined ? undefined : `${ctx.upstream} ${spec.name}`;
  let probe = false;
  if (route !== undefined) {
    const gate = breakers!.gate(route);
    if (!gate.go) {
      // An open route is not tried: the caller moves on at once (its input is unavailable).
      const error = circuitOpenError(ctx.upstream, spec.name, gate.retryAfterMs);
      ctx.onCall?.({ upstream: ctx.upstream, name: spec.name, durationMs: 0, attempts: 0, code: error.code });
      return { ok: false, error, durationMs: 0 };
    }
    probe = gate.probe;
  }
  const signal = opts?.signal;
  const timeoutMs = opts?.timeoutMs ?? ctx.defaultTimeoutMs;
  const accept = spec.accept ?? accept200;
  let attempts = 0;
  let retried = false;
  let lastStatus: number | undefined;
  let outcome: T | UpstreamError;
  let span: CallSpan | undefined;

  for (;;) {
    if (signal?.aborted) {
      outcome = deadlineError(ctx.upstream, spec.name);
      break;
    }
    let req = spec.build();
    if (req instanceof Promise) req = await req;
    if (req instanceof UpstreamError) {
      outcome = req;
      break;
    }
    attempts++;
    if (ctx.tracer !== undefined) {
      span ??= startSpan(ctx, ctx.tracer, spec, req, opts);
      req.headers.traceparent = span.traceparent;
    }
    const res = await sendAttempt(ctx.dispatcher, req, {
      upstream: ctx.upstream,
      operation: spec.name,
      timeoutMs,
      signal,
      signalAbortsAtMs: opts?.signalAbortsAtMs,
      maxBodyBytes: ctx.maxBodyBytes,
      lateAnswerGraceMs: ctx.lateAnswerGraceMs,
      clock: ctx.clock,
      lateAnswers: ctx.lateAnswers,
      onChunk: spec.onChunk,
    });
    if (res instanceof UpstreamError) {
      outcome = res;
    } else {
      lastStatus = res.status;
      outcome = accept(res.status) ? spec.parse(res) : statusErrorOf(ctx, spec.name, res);
    }
    if (!(outcome instanceof UpstreamError)) break;

    // One retry budget per call, whatever the reason: at most two attempts ever reach the upstream.
    if (retried) break;
    if (outcome.status === 401 && spec.onUnauthorized !== undefined) {
      if (!fitsDeadline(ctx, opts, 0)) break;
      retried = true;
      if (!(await spec.onUnauthorized(req))) break;
      // The refresh may have used up what was left.
      if (!fitsDeadline(ctx, opts, 0)) break;
      continue;
    }
    if (!spec.retry || !isRetryable(outcome)) break;
    const wait =
      outcome.code === ErrorCode.UPSTREAM_RATE_LIMITED
        ? (outcome.retryAfterMs ?? 0)
        : backoffDelayMs({ initialMs: ctx.retryDelayMs, maxMs: ctx.retryDelayMs }, 1);
    const fits = opts?.deadlineAt !== undefined ? fitsDeadline(ctx, opts, wait) : wait <= ctx.maxRetryWaitMs;
    if (!fits) break;
    retried = true;
    if (!(await sleep(wait, signal))) {
      outcome = deadlineError(ctx.upstream, spec.name);
      break;
    }
  }

  const durationMs = performance.now() - started;
  span?.end(lastStatus, outcome instanceof UpstreamError ? outcome.code : undefined, attempts);
  if (route !== undefined)
    breakers!.record(route, outcome instanceof UpstreamError ? outcome : undefined, probe);
  if (outcome instanceof UpstreamError) {
    if (ctx.onCall) {
      const info: CallInfo = {
        upstream: ctx.upstream,
        name: spec.name,
        durationMs,
        attempts,
        code: outcome.code,
      };
      if (lastStatus !== undefined) info.status = lastStatus;
      if (spec.items !== undefined) info.items = spec.items;
      ctx.onCall(info);
    }
    return { ok: false, error: outcome, durationMs };
  }
  if (ctx.onCall) {
    const info: CallInfo = { upstream: ctx.upstream, name: spec.name, durationMs, attempts };
    if (lastStatus !== undefined) info.status = lastStatus;
    if (spec.items !== undefined) info.items = spec.items;
    ctx.onCall(info);
  }
  return { ok: true, value: outcome, durationMs };
}

function startSpan(
  ctx: UpstreamContext,
  tracer: CallTracer,
  spec: CallSpec<unknown>,
  req: AttemptRequest,
  opts: CallOptions | undefined,
): CallSpan {
  const q = req.path.indexOf('?');
  return tracer.startCall(opts?.traceparent, spec.links, {
    name: `${ctx.upstream} ${spec.name}`,
    method: req.method,
    origin: ctx.origin ?? '',
    path: q === -1 ? req.path : req.path.slice(0, q),
  });
}

/**
 * Parses a JSON body with a precompiled zod schema. Bad JSON or a shape that does not match the
 * spec is `RG_ERR_UPSTREAM_MALFORMED_RESPONSE` (naming the first bad field, never the body).
 */
export function parseJsonBody<S extends z.ZodType>(
  upstream: UpstreamName,
  operation: string,
  res: RawResponse,
  schema: S,
): z.infer<S> | UpstreamError {
  let json: unknown;
  try {
    json = JSON.parse(res.body.toString('utf8'));
  } catch {
    return malformedError(upstream, operation, 'body is not valid JSON', res.status);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? issue.path.join('.') : '(root)';
    return malformedError(
      upstream,
      operation,
      `body does not match the spec at ${where}: ${issue?.message}`,
      res.status,
    );
  }
  return parsed.data;
}
