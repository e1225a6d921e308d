import type { RiskgateConfig } from '../config/riskgate-config.ts';
import type { RiskgateDatabase } from '../database/database.ts';
import type { StateDatabases } from '../database/state-databases.ts';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import { createRedactor } from '../decision-log/log-redaction.ts';
import {
  type Component,
  type LifecycleLog,
  type MetricsRegistry,
  stopWaitMs,
} from '../lifecycle/component.ts';
import { type DecisionSink, kyselySink } from './decision-batch.ts';
import type { DecisionReader, DecisionStoreStatus } from './decision-query.ts';
import { createDecisionReader } from './decision-reader.ts';
import { keepRejects, type RejectTables } from './decision-rejects.ts';
import { decisionRoutes } from './decision-routes.ts';
import { DECISION_STORE_PENDING_GAUGE } from './decision-store-gauges.ts';
import { DecisionStoreWriter, type DecisionStoreWriterOptions } from './decision-store-writer.ts';
import type { DecisionTables } from './decision-tables.ts';
import { hourDriftCheck } from './hour-counts.ts';
import { pgThreadSink } from './pg-thread-sink.ts';
import { sqliteThreadSink } from './sqlite-thread-sink.ts';

/**
 * The decision store: what the console and `GET /decisions` read (a `DecisionReader`), fed with
 * every record the decision log is given (`ingest`, through `teeDecisionLog`).
 */
export interface DecisionStore extends DecisionReader {
  /** Keeps a decision-log record for the store's next batch. Never blocks, never throws. */
  ingest(record: object): void;
  /**
   * Resolves once every record ingested so far is readable, or `timeoutMs` passed (false then):
   * a page shown after an operator's own write (a label) shows it.
   */
  flush(timeoutMs: number): Promise<boolean>;
  readonly enabled: boolean;
}

/** Longest wait on stop for what is buffered to be written, milliseconds. */
export const DECISION_STORE_FLUSH_MS = 5000;

const DAY_MS = 24 * 3600 * 1000;

const OFF_STATUS: DecisionStoreStatus = {
  engine: 'off',
  writing: false,
  pending: 0,
  dropped: 0,
  written: 0,
  rejected: 0,
  lagMs: 0,
};

/** RISKGATE_DECISION_STORE=off: nothing kept, every query empty. */
export const DECISION_STORE_OFF: DecisionStore = {
  enabled: false,
  ingest() {},
  flush: async () => true,
  list: async () => ({ decisions: [] }),
  get: async () => undefined,
  countByVerdict: async () => ({ allow: 0, challenge: 0, deny: 0, total: 0 }),
  countOverTime: async () => [],
  status: () => OFF_STATUS,
};

/**
 * The decision log, and each record it is given also handed to `store`: the request path pays one
 * array push more. Everything else is the log's own.
 */
export function teeDecisionLog(log: DecisionLog, store: DecisionStore): DecisionLog {
  if (!store.enabled) return log;
  return {
    write(record) {
      log.write(record);
      store.ingest(record);
    },
    flush: () => log.flush(),
    close: (timeoutMs) => log.close(timeoutMs),
    get dropped() {
      return log.dropped;
    },
    ...(log.reopen !== undefined && { reopen: () => log.reopen!() }),
    ...(log.health !== undefined && { health: () => log.health!() }),
  };
}

/**
 * The decision store as a component, over the open `database`: a writer (batched, bounded, retried;
 * from a worker thread of its own, on SQLite and PostgreSQL) and the reader, `GET /decisions` on the operator
 * surface, its state in `/healthz` and the metrics. Never a readiness check: decisions go on
 * whatever the store does. On stop, what is buffered is written within the deadline.
 */
export function decisionStoreComponent(o: {
  config: Pick<RiskgateConfig, 'decisionStore' | 'decisionLogRedaction' | 'decisionLogHashKey'>;
  /**
   * The state's decisions handle; its `decisionsFile` (embedded) is written from a worker thread
   * (undefined: in this thread), set aside when the writes find it damaged, and followed when the
   * file is reopened.
   */
  state: Pick<StateDatabases, 'decisions' | 'decisionsFile' | 'decisionsDamaged' | 'onDecisionsReopened'>;
  log: LifecycleLog;
  /** Tests: a small buffer, a short deadline. */
  tuning?: Partial<Omit<DecisionStoreWriterOptions, 'sink'>>;
}): Component<DecisionStore, MetricsRegistry> {
  const settings = o.config.decisionStore;
  return {
    name: 'decision store',
    start() {
      if (!settings.enabled)
        return { handle: DECISION_STORE_OFF, routes: [decisionRoutes(DECISION_STORE_OFF, { off: true })] };
      const { state } = o;
      const db = state.decisions.db.withTables<DecisionTables>();
      const path = state.decisionsFile;
      const sink = storeSink(state.decisions, path);
      state.onDecisionsReopened(() => sink.restart?.());
      const writer = new DecisionStoreWriter({
        sink,
        maxPending: settings.bufferRecords,
        retention: { maxAgeMs: settings.retentionDays * DAY_MS, maxBytes: settings.maxBytes, chunk: 500 },
        onWriteError: (error) => state.decisionsDamaged(error),
        keepRejected: (rejects) => keepRejects(state.decisions.db.withTables<RejectTables>(), rejects),
        log: o.log,
        redact: createRedactor(o.config.decisionLogRedaction, o.config.decisionLogHashKey),
        onWritingChange: (error) =>
          o.log(
            error === undefined
              ? { level: 'info', msg: 'decision store writing again' }
              : { level: 'error', msg: 'decision store writes failing: decisions wait in memory', error },
          ),
        ...o.tuning,
      });
      // The counts per hour against their rows, one random hour an hour, on the reading connection.
      const hourCheck = hourDriftCheck({ db, maxAgeMs: settings.retentionDays * DAY_MS, log: o.log });
      const engine = state.decisions.engine;
      const status = (): DecisionStoreStatus => ({ engine, ...writer.status() });
      const store: DecisionStore = {
        ...createDecisionReader(db, status),
        enabled: true,
        ingest: (record) => writer.push(record),
        flush: (timeoutMs) => writer.flush(timeoutMs),
      };
      return {
        handle: store,
        routes: [decisionRoutes(store)],
        health: () => ({ decisionStore: status() }),
        stop: (deadlineAtMs) => {
          hourCheck.stop();
          return writer.close(stopWaitMs(deadlineAtMs, DECISION_STORE_FLUSH_MS));
        },
        observe: (metrics) => {
          observeStore(metrics, status);
          metrics.observeCounter(
            'riskgate_decision_hour_drift',
            'Differences found between the decision store counts per hour and a count of their rows (one random hour checked an hour; 0 while exact)',
            hourCheck.drift,
          );
        },
      };
    },
  };
}

/**
 * What the store writes through, off the event loop: the SQLite `file` and PostgreSQL each from a
 * thread of its own; a database handed over without its connection settings (tests), here.
 */
export function storeSink(decisions: RiskgateDatabase, file: string | undefined): DecisionSink {
  const db = decisions.db.withTables<DecisionTables>();
  if (file !== undefined) return sqliteThreadSink(file);
  return decisions.postgres !== undefined ? pgThreadSink(decisions.postgres, db) : kyselySink(db);
}

function observeStore(metrics: MetricsRegistry, status: () => DecisionStoreStatus): void {
  metrics.observeGauge(
    DECISION_STORE_PENDING_GAUGE,
    'Decision records waiting to be written to the decision store',
    () => status().pending,
  );
  metrics.observeCounter(
    'riskgate_decision_store_dropped',
    'Decision records dropped: the decision store buffer was full (RISKGATE_DECISION_STORE_BUFFER), or not written by the stop deadline',
    () => status().dropped,
  );
  metrics.observeCounter(
    'riskgate_decision_store_rejected',
    'Decision records the database refused (poison rows): set aside in decision_reject, the rest of their batch written',
    () => status().rejected,
  );
  metrics.observeCounter(
    'riskgate_decision_store_written',
    'Decision records written to the decision store by this process',
    () => status().written,
  );
  metrics.observeGauge(
    'riskgate_decision_store_lag_seconds',
    'Age of the oldest record waiting for the decision store (0 when none)',
    () => status().lagMs / 1000,
  );
  metrics.observeGauge(
    'riskgate_decision_store_writing',
    '1 while decision store writes succeed, 0 while they fail (records wait in memory, then drop)',
    () => (status().writing ? 1 : 0),
  );
}
