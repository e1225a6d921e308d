import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { RiskgateConfig } from '../config/riskgate-config.ts';
import type { RiskgateDatabase } from '../database/database.ts';
import { FileWatermark } from '../database/file-watermark.ts';
import {
  type Component,
  type LifecycleLog,
  type MetricsRegistry,
  stopWaitMs,
} from '../lifecycle/component.ts';
import type { Clock } from '../timing/clock.ts';
import { actionsRoutes } from './actions-routes.ts';
import { openOutboxStore } from './open-outbox-store.ts';
import { Outbox, type OutboxOptions } from './outbox.ts';
import { drainOutboxFile, LEGACY_OUTBOX_FILE } from './outbox-file-drain.ts';
import { OUTBOX_GAUGES } from './outbox-gauges.ts';
import type { OutboxStore } from './outbox-store.ts';

/**
 * The action outbox over its store (the control state's database, or memory; `given` when the
 * caller opened it, closed on stop either way). A former `outbox.sqlite` in the state dir is
 * drained into the database first (src/outbox/outbox-file-drain.ts). Delivery starts at once:
 * what an earlier process left undelivered goes out now. On stop it drains (bounded by
 * `drainTimeoutMs`) and closes the store. Mounts the operator's `/actions` endpoints.
 */
export function outboxComponent(o: {
  config: RiskgateConfig;
  /** The control state's database: the outbox's table, and its companions' (lock-out records). */
  database: RiskgateDatabase;
  given?: OutboxStore | undefined;
  admin: OutboxOptions['admin'];
  /** Carries out webhook deliveries (src/webhooks/); none when no receiver is configured. */
  webhooks?: OutboxOptions['webhooks'];
  onOutcome: OutboxOptions['onOutcome'];
  flushOutcomes: () => Promise<void>;
  log: LifecycleLog;
  /** Tuning (tests poll faster, shorten the backoff). */
  tuning?: Partial<Omit<OutboxOptions, 'store' | 'admin' | 'onOutcome'>>;
  /** Longest wait for queued actions on stop, milliseconds. */
  drainTimeoutMs: number;
  /** The component context's clock (src/timing/clock.ts). Default: the system clock. */
  clock?: Clock | undefined;
}): Component<Outbox, MetricsRegistry> {
  const { log } = o;
  return {
    name: 'outbox',
    async start() {
      await drainFormerFile(o);
      const store =
        o.given ??
        openOutboxStore(o.config, o.database, {
          onUnreadable: (id, error) =>
            log({
              level: 'error',
              msg: 'an outbox entry cannot be read: dead-lettered (unreadable_spec), kept for inspection',
              id,
              // Not the parser's message: it quotes the stored text.
              cause: error instanceof SyntaxError ? 'not JSON' : 'not an action spec this version reads',
            }),
        });
      try {
        for (const warning of (await store.warnings?.()) ?? []) log({ level: 'warn', msg: warning });
      } catch (error) {
        await store.close();
        throw error;
      }
      // Failed store operations, counted as well as logged (riskgate_outbox_store_errors_total).
      const failures = { count: 0 };
      const outbox = new Outbox({
        store,
        admin: o.admin,
        webhooks: o.webhooks,
        onOutcome: o.onOutcome,
        onError: (error) => {
          failures.count++;
          log({ level: 'error', msg: 'outbox store failed', error: String(error) });
        },
        horizonMs: o.config.outboxHorizonMs,
        flushOutcomes: o.flushOutcomes,
        // Its own store on the SQLite file: a quiet outbox skips polls while nobody writes to it.
        watermark:
          o.given === undefined && o.config.outbox.kind !== 'memory' && o.database.file !== undefined
            ? new FileWatermark(o.database.file)
            : undefined,
        ...(o.clock !== undefined && { clock: o.clock }),
        ...o.tuning,
      });
      outbox.start();
      return {
        handle: outbox,
        stop: async (deadlineAtMs) => {
          await outbox.drain(stopWaitMs(deadlineAtMs, o.drainTimeoutMs));
          await store.close();
        },
        routes: [
          actionsRoutes({
            store,
            onDropped: (entry) => outbox.reportFinal(entry),
            onRetried: () => outbox.nudge(),
          }),
        ],
        observe: (metrics) => observeOutbox(metrics, outbox, store, failures),
      };
    },
  };
}

/**
 * Drains a former `outbox.sqlite` into the database. A failure is logged and the file kept for the
 * next start: its entries are never dropped, and the service still starts (what it promises now
 * goes to the database).
 */
async function drainFormerFile(o: {
  config: RiskgateConfig;
  database: RiskgateDatabase;
  given?: OutboxStore | undefined;
  log: LifecycleLog;
}): Promise<void> {
  const file = join(o.config.stateDir, LEGACY_OUTBOX_FILE);
  if (o.given !== undefined || o.config.outbox.kind !== 'database') {
    if (existsSync(file))
      o.log({ level: 'warn', msg: 'outbox.sqlite left as it is: the outbox is not the database here', file });
    return;
  }
  try {
    await drainOutboxFile({ stateDir: o.config.stateDir, database: o.database, log: o.log });
  } catch (error) {
    o.log({
      level: 'error',
      msg: 'draining outbox.sqlite into the database failed: the file is kept, tried again at the next start',
      file,
      error: String(error),
    });
  }
}

function observeOutbox(
  metrics: MetricsRegistry,
  outbox: Outbox,
  store: OutboxStore,
  failures: { readonly count: number },
): void {
  metrics.observeCounter(
    'riskgate_outbox_store_errors',
    'Outbox store operations that failed in this process (an append, a claim, a count, a completion; each also logged as "outbox store failed")',
    () => failures.count,
  );
  metrics.observeCounter(
    'riskgate_outbox_unreadable_specs',
    'Outbox entries whose stored spec could not be read (damaged, or from a later version), dead-lettered as unreadable_spec by this process',
    () => store.unreadableSpecs ?? 0,
  );
  metrics.observeGauge(
    OUTBOX_GAUGES.pending,
    'Actions in the outbox not yet delivered (the whole store, shared by every worker and any replica using it)',
    () => outbox.stats.pending,
  );
  metrics.observeGauge(
    OUTBOX_GAUGES.oldestPendingAgeSeconds,
    'Age of the oldest undelivered action in the store (an Admin outage shows here first)',
    () => outbox.stats.oldestPendingAgeMs / 1000,
  );
  metrics.observeGauge(
    OUTBOX_GAUGES.dead,
    'Actions dead-lettered in the store (failed for good or out of horizon): an operator decides (riskgate actions)',
    () => outbox.stats.dead,
  );
  metrics.observeGauge(
    OUTBOX_GAUGES.deferred,
    'Actions answered deferred that the outbox store has not acknowledged yet (held by this process)',
    () => outbox.deferred,
  );
  metrics.observeCounter(
    'riskgate_outbox_attempts',
    'Delivery attempts started by this process',
    () => outbox.attemptsStarted,
  );
  metrics.observeGauge(
    'riskgate_action_queue_size',
    'Actions queued, waiting to retry or running',
    () => outbox.size,
  );
}
