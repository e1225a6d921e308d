import type { RiskgateDatabase } from '../database/database.ts';
import type { EventSink } from '../events/riskgate-event.ts';
import type { Component, InputWarmth, LifecycleLog, MetricsRegistry } from '../lifecycle/component.ts';
import type { DeclaredList } from '../policy/policy-types.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { type ListOperations, listOperations, listRoutes } from './list-routes.ts';
import { ListStore } from './list-store.ts';
import { DEFAULT_LIST_STALE_AFTER_MS, ListSync, type ListSyncOptions } from './list-sync.ts';

/** How often expired entries are deleted from the database, milliseconds. */
const PURGE_EVERY_MS = 10 * 60_000;
/** Expired entries are kept this long (visible to nobody, but in the database for a look), ms. */
const PURGE_AFTER_MS = 24 * 3_600_000;

/** What the runtime lists give the rest of riskgate. */
export interface RuntimeLists {
  /** The snapshot decisions read. */
  sync: ListSync;
  /** The lists' reads and changes (the console's Lists page). */
  operations: ListOperations;
}

/**
 * The lists' warmth for `/readyz`: warm while the snapshot is current; unavailable while the
 * database answers errors (known, logged and counted: rules reading lists see them unavailable,
 * and the degraded verdict covers them); behind otherwise (not loaded yet, or a refresh that
 * neither finishes nor fails).
 */
export function listWarmth(sync: ListSync, staleAfterMs: number, nowMs: number): InputWarmth {
  const ageMs = sync.ageMs(nowMs);
  const everWarm = Number.isFinite(ageMs);
  if (sync.read(nowMs).ok) return { state: 'warm', everWarm };
  const sinceMs = everWarm ? nowMs - ageMs + staleAfterMs : undefined;
  const error = sync.lastError();
  if (error !== undefined) {
    return { state: 'unavailable', everWarm, sinceMs, reason: `the list database fails: ${error}` };
  }
  return {
    state: 'behind',
    everWarm,
    sinceMs,
    reason: everWarm
      ? `the list snapshot was last confirmed ${Math.round(ageMs / 1000)} s ago (bound ${staleAfterMs / 1000} s)`
      : 'the lists are not loaded yet',
  };
}

/**
 * The runtime lists as a component: the first snapshot loaded at start (a database that does not
 * answer fails the start, as the database component does), then kept current by polling; the
 * operator endpoints; expired entries purged now and then.
 */
export function listComponent(o: {
  database: RiskgateDatabase;
  /** The lists the active policy declares. */
  declared: () => readonly DeclaredList[];
  events: EventSink;
  log: LifecycleLog;
  /** Poll and staleness tuning (tests). */
  sync?: Pick<ListSyncOptions, 'pollMs' | 'staleAfterMs' | 'poll'>;
  /** The service's clock. Default {@link systemClock}. */
  clock?: Clock | undefined;
}): Component<RuntimeLists, MetricsRegistry> {
  return {
    name: 'lists',
    async start() {
      const store = new ListStore(o.database);
      const clock = o.clock ?? systemClock;
      const sync = new ListSync({ store, log: o.log, clock, ...o.sync });
      await sync.start();
      const purge = setInterval(() => {
        store.purgeExpired(clock.nowMs() - PURGE_AFTER_MS).catch(() => {});
      }, PURGE_EVERY_MS);
      purge.unref();
      const routeDeps = { store, sync, declared: o.declared, events: o.events, log: o.log, clock };
      const operations = listOperations(routeDeps);
      return {
        handle: { sync, operations },
        routes: [listRoutes(routeDeps, operations)],
        ready: () => ({
          lists: listWarmth(sync, o.sync?.staleAfterMs ?? DEFAULT_LIST_STALE_AFTER_MS, clock.nowMs()),
        }),
        health: () => ({
          lists: { snapshotAgeMs: Math.round(sync.ageMs()), stale: !sync.read(clock.nowMs()).ok },
        }),
        observe(registry) {
          registry.observeGauge(
            'riskgate_lists_snapshot_age_seconds',
            "How long ago this process's runtime list snapshot was last confirmed current (stale past 10 s: rules reading lists see them unavailable)",
            () => sync.ageMs() / 1000,
          );
          registry.observeGauge(
            'riskgate_lists_unreadable_rows',
            'Runtime list entries left out of the snapshot because their stored value cannot be read (hand-edited rows): they do not apply',
            () => sync.unreadableRows(),
          );
          registry.observeCounter(
            'riskgate_lists_refresh_failures_total',
            'Refreshes of the runtime list snapshot that failed (the database did not answer)',
            () => sync.failures,
          );
        },
        stop: async () => {
          clearInterval(purge);
          await sync.stop();
        },
      };
    },
  };
}
