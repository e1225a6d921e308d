import type { Context } from 'hono';
import type { RiskgateDatabase } from '../database/database.ts';
import {
  type Component,
  type LifecycleLog,
  type MetricsRegistry,
  stopWaitMs,
} from '../lifecycle/component.ts';
import type { LockoutOperations } from '../lockouts/lockout-routes.ts';
import type { Label } from '../replay/replay-labels.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { ReviewIntake } from './review-intake.ts';
import { type ReviewedDecision, type ReviewOperations, reviewOperations } from './review-operations.ts';
import { reviewRoutes } from './review-routes.ts';
import { type ReviewQueueStats, ReviewStore } from './review-store.ts';

/** Longest a graceful stop waits for the intake's writes, ms. */
const STOP_CAP_MS = 5000;

/** What the review queue gives the rest of riskgate. */
export interface ReviewQueue {
  /** Where decisions hand the cases their policy or the sample opens (after the answer). */
  intake: ReviewIntake;
  /** The queue's reads and changes (the console's Review page), the same as `/review`'s. */
  operations: ReviewOperations;
  /** Reads the queue's depth and age now (the metrics' figures are read every `statsPollMs`). */
  refreshStats(): Promise<ReviewQueueStats>;
}

export interface ReviewComponentOptions {
  database: RiskgateDatabase;
  /** A case is due this long after it opens, hours (RISKGATE_REVIEW_SLA_HOURS). */
  slaHours: number;
  /** Share of allowed logins sampled into the queue, 0-1 (RISKGATE_REVIEW_SAMPLE_SHARE). */
  sampleShare: number;
  /** Records a disposition's label as the console's label form does. */
  label(input: { decisionId: string; label: Label; note?: string | undefined; c: Context }): Promise<unknown>;
  /** A decision's verdict, user and account, from the decision store. */
  decision(id: string): Promise<ReviewedDecision | undefined>;
  lockouts?: LockoutOperations | undefined;
  settle?: (() => Promise<void>) | undefined;
  log: LifecycleLog;
  /** How often the queue's depth and age are read for the metrics, ms. Default 15000. */
  statsPollMs?: number | undefined;
  /** The service's clock. Default {@link systemClock}. */
  clock?: Clock | undefined;
}

/**
 * The review queue as a component (docs/review-queue.md): its tables are the control database's
 * (src/service/database-migrations.ts); the intake writes the cases decisions open, off their
 * path; the operator endpoints; the queue's depth and oldest open case read every 15 s for the
 * metrics (a read that fails keeps the last figures and counts the failure). Its stop writes what
 * the intake holds.
 */
export function reviewComponent(o: ReviewComponentOptions): Component<ReviewQueue, MetricsRegistry> {
  return {
    name: 'review queue',
    async start() {
      const store = new ReviewStore(o.database);
      const clock = o.clock ?? systemClock;
      const slaMs = o.slaHours * 3_600_000;
      const intake = new ReviewIntake({ store, sampleShare: o.sampleShare, slaMs, clock, log: o.log });
      const operations = reviewOperations({
        store,
        slaMs,
        label: o.label,
        decision: o.decision,
        lockouts: o.lockouts,
        settle: o.settle,
        clock,
      });
      let stats: ReviewQueueStats = { open: 0, claimed: 0, overdue: 0, oldestOpenMs: undefined };
      let statsFailures = 0;
      const refreshStats = async () => {
        try {
          stats = await store.stats(clock.nowMs());
          return stats;
        } catch (error) {
          statsFailures++;
          throw error;
        }
      };
      await refreshStats().catch((error: Error) =>
        o.log({
          level: 'warn',
          msg: 'review queue: its depth could not be read at start',
          error: error.message,
        }),
      );
      const timer = setInterval(() => {
        refreshStats().catch(() => {});
      }, o.statsPollMs ?? 15_000);
      timer.unref();
      return {
        handle: { intake, operations, refreshStats },
        routes: [reviewRoutes(operations)],
        health: () => ({
          reviewQueue: {
            open: stats.open,
            claimed: stats.claimed,
            overdue: stats.overdue,
            pending: intake.pending,
          },
        }),
        observe(registry) {
          registry.observeGauge(
            'riskgate_review_queue_open',
            'Review cases not yet claimed (read every 15 s; shared by every replica on PostgreSQL: take max)',
            () => stats.open,
          );
          registry.observeGauge(
            'riskgate_review_queue_claimed',
            'Review cases claimed and not yet closed',
            () => stats.claimed,
          );
          registry.observeGauge(
            'riskgate_review_queue_overdue',
            'Review cases not closed past their due time (RISKGATE_REVIEW_SLA_HOURS)',
            () => stats.overdue,
          );
          registry.observeGauge(
            'riskgate_review_queue_oldest_open_age_seconds',
            'Age of the oldest review case not closed; 0 when none is',
            () =>
              stats.oldestOpenMs === undefined ? 0 : Math.max(0, (clock.nowMs() - stats.oldestOpenMs) / 1000),
          );
          registry.observeCounter(
            'riskgate_review_intake_opened_total',
            'Review cases this process opened for its decisions (policy review: true, or the sample)',
            () => intake.opened,
          );
          registry.observeCounter(
            'riskgate_review_intake_dropped_total',
            'Review cases a decision asked for that were not opened (the intake was full, or the control database refused)',
            () => intake.dropped,
          );
          registry.observeCounter(
            'riskgate_review_queue_read_failures_total',
            "Reads of the review queue's depth that failed (the control database did not answer)",
            () => statsFailures,
          );
        },
        async stop(deadlineAtMs, reason) {
          clearInterval(timer);
          // A graceful stop writes what the intake holds, bounded by the teardown's deadline;
          // what it could not write is counted as dropped.
          const waitMs = reason === 'fatal' ? 0 : stopWaitMs(deadlineAtMs, STOP_CAP_MS);
          await intake.stop(waitMs);
        },
      };
    },
  };
}
