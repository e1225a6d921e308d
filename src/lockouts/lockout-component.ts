import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import type { ActionSpec } from '../actions/admin-actions.ts';
import type { RiskgateDatabase } from '../database/database.ts';
import type { EventSink } from '../events/riskgate-event.ts';
import {
  type Component,
  type LifecycleLog,
  type MetricsRegistry,
  stopWaitMs,
} from '../lifecycle/component.ts';
import type { AttemptGate } from '../outbox/outbox.ts';
import type { OutboxStore } from '../outbox/outbox-store.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { LockoutRecorder } from './lockout-recorder.ts';
import { type LockoutOperations, lockoutOperations, lockoutRoutes } from './lockout-routes.ts';
import { LockoutStore } from './lockout-store.ts';
import { lockoutMigrations } from './lockout-tables.ts';
import { unlockGate } from './unlock-gate.ts';

export { lockoutMigrations };

/** What the lock-outs give the rest of riskgate. */
export interface Lockouts {
  /** Where decisions tell their lock-outs and the outbox its outcomes. */
  recorder: LockoutRecorder;
  /** The outbox's `beforeAttempt`: whether a temporary lock-out's unlock still should run. */
  gate: (spec: ActionSpec, outbox: Pick<OutboxStore, 'get'>) => Promise<AttemptGate>;
  /** The records' reads and the operator's unlock (the console's Lock-outs page). */
  operations: LockoutOperations;
}

/**
 * The lock-out records (src/lockouts/) as a component, started before the outbox (whose outcomes
 * and unlock gate it serves) so it stops after it: the outcomes of the outbox's drain are written
 * before the database closes. Mounts `/lockouts` on the operator surface.
 */
export function lockoutsComponent(o: {
  database: RiskgateDatabase;
  events: EventSink<ActionSpec>;
  /** The outbox, once started: an operator's unlock goes out through it. */
  actions: () => Pick<ActionDispatcher, 'submit'>;
  log: LifecycleLog;
  /** Longest wait for the records still queued on stop, milliseconds. Default 2000. */
  flushTimeoutMs?: number;
  /** The component context's clock (src/timing/clock.ts). Default: the system clock. */
  clock?: Clock | undefined;
}): Component<Lockouts, MetricsRegistry> {
  return {
    name: 'lockouts',
    async start() {
      const store = new LockoutStore(o.database);
      const clock = o.clock ?? systemClock;
      const recorder = new LockoutRecorder({ store, events: o.events, log: o.log, clock });
      let eventsLost = 0;
      const routeOptions = {
        store,
        events: o.events,
        actions: o.actions,
        log: o.log,
        onEventLost: () => eventsLost++,
        records: recorder,
        clock,
      };
      const operations = lockoutOperations(routeOptions);
      return {
        handle: { recorder, gate: unlockGate(store, { clock }), operations },
        stop: (deadlineAtMs) => recorder.flush(stopWaitMs(deadlineAtMs, o.flushTimeoutMs ?? 2000)),
        routes: [lockoutRoutes(routeOptions, operations)],
        observe(metrics) {
          metrics.observeCounter(
            'riskgate_lockout_records_dropped',
            'Lock-out record writes dropped (the queue was full, or the database failed every try): a lock-out the console and GET /lockouts do not show',
            () => recorder.dropped,
          );
          metrics.observeCounter(
            'riskgate_lockout_events_lost',
            'lockout.ended events not queued for the webhooks after every try (the unlock itself was made)',
            () => eventsLost,
          );
        },
      };
    },
  };
}
