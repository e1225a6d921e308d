import { ErrorCode, RiskgateError, UpstreamError } from '../errors/riskgate-error.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { CallTracer } from '../upstream/call-tracer.ts';
import { type CallInfo, callUpstream } from '../upstream/upstream-call.ts';
import { createUpstreamContext } from '../upstream/upstream-context.ts';
import { malformedError } from '../upstream/upstream-errors.ts';
import { splitBaseUrl, type UpstreamPoolOptions } from '../upstream/upstream-pool.ts';
import type { AttemptRequest } from '../upstream/upstream-request.ts';
import type { CallOptions, UpstreamResult } from '../upstream/upstream-result.ts';
import {
  canonicalizeQuery,
  createSigningKey,
  formatRfc2822,
  signRequest,
} from '../vendor-auth/hmac-signature.ts';
import { type LogEvent, logEventSchema } from './log-event.ts';
import { NdjsonLines } from './ndjson-lines.ts';

/**
 * The Log API client (docs/vendor-api.md#log-api, #signing): both endpoints, signed with the `Date`
 * header, NDJSON parsed line by line as it arrives. A final non-JSON line containing `Error` means
 * the server gave up mid-stream: the window failed and must be fetched again.
 */

export const LOGS_PREFIX = '/logs/v1';

export type LogScope = 'service' | 'organization';

/** Credentials of one Log API scope. */
export interface LogCredentials {
  /** The service ID or organization ID (also the path parameter). */
  id: string;
  /** That scope's Log API key. Never logged, never in an error. */
  apiKey: string;
}

/** Options of `createLogClient`. Times in milliseconds. */
export interface LogClientOptions {
  /** `{base_url}`: the origin (a path in it goes in front); paths add `/logs/v1`. */
  baseUrl: string;
  service?: LogCredentials;
  organization?: LogCredentials;
  /** Timeout of one window's whole stream. Default 30000. */
  timeoutMs?: number;
  /** Longest accepted line, bytes. Default 1 MiB. */
  maxLineBytes?: number;
  /** Longest accepted stream, bytes. Default 256 MiB. */
  maxBodyBytes?: number;
  /** Its wall time dates the `Date` header. Default {@link systemClock}. */
  clock?: Clock;
  onCall?: (info: CallInfo) => void;
  /** Client spans and `traceparent` on every call, when tracing is on (src/observability/tracing.ts). */
  tracer?: CallTracer | undefined;
  pool?: Omit<UpstreamPoolOptions, 'connections'>;
}

/** A range: `start` inclusive, `end` exclusive, epoch milliseconds. The API wants 1 s to 1 h. */
export interface LogWindow {
  start: number;
  end: number;
}

export interface LogClient {
  /**
   * Streams one window's events to `onEvent`, in the order received (arbitrary:
   * docs/vendor-api.md#log-endpoints).
   * Resolves with the count, or with the typed error of a failed window (then `onEvent` may have
   * seen part of it: fetch the whole window again). Never retried inside: that would repeat events.
   */
  readWindow(
    scope: LogScope,
    window: LogWindow,
    onEvent: (event: LogEvent) => void,
    opts?: CallOptions,
  ): Promise<UpstreamResult<{ events: number }>>;
  close(): Promise<void>;
}

/** `2024-01-02T10:00:00Z` (milliseconds only when not whole seconds). */
export function formatLogTime(ms: number): string {
  const iso = new Date(ms).toISOString();
  return ms % 1000 === 0 ? `${iso.slice(0, 19)}Z` : iso;
}

const MAX_ERROR_LINE = 200;

/** Creates a Log API client. Throws `RG_ERR_INVALID_CONFIG` without any credentials. */
export function createLogClient(opts: LogClientOptions): LogClient {
  if (!opts.service && !opts.organization) {
    throw new RiskgateError(
      ErrorCode.INVALID_CONFIG,
      'log client: give service and/or organization credentials',
    );
  }
  const { origin, host, protocol, pathPrefix } = splitBaseUrl(opts.baseUrl);
  const clock = opts.clock ?? systemClock;
  const now = () => clock.nowMs();
  const maxLineBytes = opts.maxLineBytes ?? 1024 * 1024;
  // Windows are read one at a time per scope: two connections are enough.
  const { ctx, close: closePool } = createUpstreamContext(
    'logs',
    origin,
    clock,
    { pool: opts.pool, maxBodyBytes: opts.maxBodyBytes, onCall: opts.onCall, tracer: opts.tracer },
    { connections: 2, defaultTimeoutMs: opts.timeoutMs ?? 30_000, maxBodyBytes: 256 * 1024 * 1024 },
  );

  // Imported once: a string key is re-imported by every HMAC.
  const keys = {
    service: opts.service && createSigningKey(opts.service.apiKey),
    organization: opts.organization && createSigningKey(opts.organization.apiKey),
  };

  return {
    readWindow(scope, window, onEvent, callOpts) {
      const creds = scope === 'service' ? opts.service : opts.organization;
      const key = keys[scope];
      if (!creds || !key)
        return Promise.reject(
          new RiskgateError(ErrorCode.INVALID_CONFIG, `log client: no ${scope} credentials`),
        );
      if (!(Number.isFinite(window.start) && Number.isFinite(window.end) && window.end > window.start)) {
        return Promise.reject(
          new RiskgateError(ErrorCode.INVALID_INPUT, 'log window: end must be after start'),
        );
      }
      const operation = `${scope}-events`;
      const path = `${pathPrefix}${LOGS_PREFIX}/${scope}/${encodeURIComponent(creds.id)}`;
      const query: [string, string][] = [
        ['start', formatLogTime(window.start)],
        ['end', formatLogTime(window.end)],
      ];
      const wireQuery = `?${canonicalizeQuery(query)}`;

      let lines = new NdjsonLines(maxLineBytes);
      let count = 0;
      let errorLine: string | undefined;
      let failure: UpstreamError | undefined;

      const onLine = (line: string): boolean => {
        if (errorLine !== undefined) {
          // Nothing may follow the error line.
          failure = malformedError('logs', operation, 'data after the stream error line', 200);
          return false;
        }
        let json: unknown;
        try {
          json = JSON.parse(line);
        } catch {
          if (line.includes('Error')) {
            errorLine = line.length > MAX_ERROR_LINE ? `${line.slice(0, MAX_ERROR_LINE)}…` : line;
            return true;
          }
          failure = malformedError('logs', operation, `line ${count + 1} is not JSON`, 200);
          return false;
        }
        const parsed = logEventSchema.safeParse(json);
        if (!parsed.success) {
          const issue = parsed.error.issues[0];
          failure = malformedError(
            'logs',
            operation,
            `line ${count + 1}: ${issue?.path.join('.') || '(root)'} ${issue?.message}`,
            200,
          );
          return false;
        }
        count++;
        onEvent(parsed.data);
        return true;
      };

      const build = (): AttemptRequest => {
        lines = new NdjsonLines(maxLineBytes);
        count = 0;
        errorLine = undefined;
        failure = undefined;
        const date = formatRfc2822(new Date(now()));
        const authorization = signRequest(
          { date, method: 'GET', host, protocol, path, query },
          creds.id,
          key,
        );
        const headers: Record<string, string> = { date, authorization, accept: 'application/x-ndjson' };
        return { method: 'GET', path: path + wireQuery, headers };
      };

      return callUpstream(
        ctx,
        {
          name: operation,
          build,
          retry: false,
          onChunk: (chunk) => {
            if (lines.push(chunk, onLine)) return undefined;
            return failure ?? malformedError('logs', operation, `a line over ${maxLineBytes} bytes`, 200);
          },
          parse: () => {
            const last = lines.end();
            if (last !== undefined && failure === undefined) onLine(last);
            if (failure) return failure;
            if (errorLine !== undefined) {
              return new UpstreamError(
                ErrorCode.UPSTREAM_SERVER_ERROR,
                `logs ${operation}: stream interrupted (${errorLine})`,
                {
                  upstream: 'logs',
                  status: 200,
                  upstreamMessage: errorLine,
                },
              );
            }
            return { events: count };
          },
        },
        callOpts,
      );
    },
    close: closePool,
  };
}
