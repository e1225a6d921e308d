import { join } from 'node:path';
import type { AdminClient } from '../admin/admin-client.ts';
import type { UpstreamConfig } from '../config/riskgate-config.ts';
import type { ServiceLog } from '../http/create-app.ts';
import { createLogClient } from '../logs/log-client.ts';
import type { LogEvent } from '../logs/log-event.ts';
import { createLogPoller, type LogPoller } from '../logs/log-poller.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import type { CallTracer } from '../upstream/call-tracer.ts';
import type { CallInfo } from '../upstream/upstream-call.ts';

/**
 * Follows the service's Log API events in the background (never on a decision's path): each one is
 * counted by type, and one that changes what the Admin reads return (a user updated or locked out
 * elsewhere, a failed authentication moving `failed_attempts`, a device added, updated or archived)
 * drops that user's cached Admin reads, so the next decision reads them afresh.
 */

/** Event types after which a user's cached Admin user and devices reads are stale (log-api.md). */
export const ADMIN_CACHE_INVALIDATING_EVENTS: ReadonlySet<string> = new Set([
  'user.updated',
  'admin-dashboard.user.updated',
  'authentication.failed',
  'device.created',
  'device.updated',
]);

/** Users invalidated per event-loop turn: a window of thousands of events never holds the loop. */
const INVALIDATIONS_PER_TURN = 200;

export interface LogFollowerOptions {
  upstream: Pick<UpstreamConfig, 'logsUrl' | 'logApiKey' | 'serviceId'>;
  /** The checkpoint goes to `<stateDir>/log-checkpoint-service.json`. */
  stateDir: string;
  admin: Pick<AdminClient, 'invalidateUser'>;
  metrics: Pick<RiskgateMetrics, 'recordLogEvents' | 'recordLogPollError'>;
  log: ServiceLog;
  onCall?: (info: CallInfo) => void;
  tracer?: CallTracer | undefined;
  /** Epoch ms, for windows and the `Date` header. Default `Date.now` (tests shift it with the sandbox clock). */
  now?: () => number;
  /** Pause between polls once caught up, milliseconds. Default 30 000. */
  pollIntervalMs?: number;
}

export interface LogFollower {
  /** Starts polling in the background; a checkpoint that cannot be read is logged, not thrown. */
  start(): Promise<void>;
  /** Stops after the window in progress and closes the client. */
  stop(): Promise<void>;
  /** Start of the next window, epoch ms. */
  cursor(): number | undefined;
}

/** Undefined when the Log API is not configured. */
export function createLogFollower(opts: LogFollowerOptions): LogFollower | undefined {
  const { logsUrl, logApiKey, serviceId } = opts.upstream;
  if (logsUrl === undefined || logApiKey === undefined) return undefined;
  const client = createLogClient({
    baseUrl: logsUrl,
    service: { id: serviceId, apiKey: logApiKey },
    ...(opts.now !== undefined && { now: opts.now }),
    ...(opts.onCall !== undefined && { onCall: opts.onCall }),
    tracer: opts.tracer,
  });
  const poller: LogPoller = createLogPoller({
    client,
    scope: 'service',
    checkpointFile: join(opts.stateDir, 'log-checkpoint-service.json'),
    ...(opts.now !== undefined && { now: opts.now }),
    ...(opts.pollIntervalMs !== undefined && { pollIntervalMs: opts.pollIntervalMs }),
    onEvents: (events) => handleEvents(events, opts),
    onError: (error, window) => {
      opts.metrics.recordLogPollError();
      opts.log({
        level: 'warn',
        msg: 'log api window failed',
        error: error.message,
        ...(window !== undefined && { window: { start: window.start, end: window.end } }),
      });
    },
  });

  return {
    async start() {
      try {
        await poller.start();
      } catch (error) {
        opts.log({
          level: 'error',
          msg: 'log api follower not started: its checkpoint is unreadable',
          error: error instanceof Error ? error.message : String(error),
        });
      }
    },
    async stop() {
      await poller.stop();
      await client.close();
    },
    cursor: () => poller.cursor(),
  };
}

async function handleEvents(events: LogEvent[], opts: LogFollowerOptions): Promise<void> {
  const counts = new Map<string, number>();
  const users = new Set<string>();
  for (const event of events) {
    counts.set(event.type, (counts.get(event.type) ?? 0) + 1);
    const userId = event.user_id;
    if (ADMIN_CACHE_INVALIDATING_EVENTS.has(event.type) && typeof userId === 'string') users.add(userId);
  }
  for (const [type, count] of counts) opts.metrics.recordLogEvents(type, count);
  let done = 0;
  for (const userId of users) {
    opts.admin.invalidateUser(userId);
    if (++done % INVALIDATIONS_PER_TURN === 0) await new Promise((r) => setImmediate(r));
  }
}
