import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import type { Verdict } from '../policy-input/verdict.ts';
import type { UpstreamResult } from '../upstream/upstream-result.ts';
import type { CounterReadings, FeatureStore, HistoryReading } from './feature-store.ts';
import { type HistoryFeatures, historyFeatures, historyKey } from './history-features.ts';
import { type CounterPlan, counterValues, readOps, recordOps } from './velocity-counters.ts';

/**
 * What a decision asks of the feature store: its velocity counters and its user's history, as
 * results (never rejections, like the vendor clients), and its counts once it is decided. Counting
 * is fire-and-forget after the answer: a store that is down loses counts, never a login.
 */
export interface FeatureReader {
  readVelocity(plan: CounterPlan, nowMs: number): Promise<UpstreamResult<Record<string, number>>>;
  /** Unavailable (`RG_ERR_HISTORY_BEHIND`) while the follower is more than `maxLagMs` behind `nowMs`. */
  readHistory(userId: string, nowMs: number, maxLagMs: number): Promise<UpstreamResult<HistoryFeatures>>;
  /** Counts the decided request (after the answer). */
  record(plan: CounterPlan, verdict: Verdict, nowMs: number): void;
  /**
   * False when nothing feeds the history (the Log API is not configured): a decision then sees it
   * `not_configured`, a deployment's choice rather than a degradation. Default true.
   */
  historyConfigured?: boolean;
}

export interface FeatureReaderOptions {
  store: FeatureStore;
  /** A failed count (the store is down): for metrics and a rate-limited log line. */
  onRecordError?: (error: Error) => void;
  /** Whether the Log API feeds the history (see {@link FeatureReader.historyConfigured}). Default true. */
  historyConfigured?: boolean;
}

function unavailable<T>(cause: unknown, startedAt: number): UpstreamResult<T> {
  const message = cause instanceof Error ? cause.message : String(cause);
  return {
    ok: false,
    error: new UpstreamError(
      ErrorCode.FEATURE_STORE_UNAVAILABLE,
      `feature store: ${message}`,
      { upstream: 'features' },
      { cause },
    ),
    durationMs: performance.now() - startedAt,
  };
}

/** The history's features from a reading, or why they are unavailable (behind, or a bad reading). */
function historyResult(
  reading: HistoryReading,
  nowMs: number,
  maxLagMs: number,
  startedAt: number,
): UpstreamResult<HistoryFeatures> {
  try {
    const features = historyFeatures(reading, nowMs);
    if (!(features.lagSeconds * 1000 <= maxLagMs)) {
      const behind = Number.isFinite(features.lagSeconds)
        ? `${Math.round(features.lagSeconds)} s behind`
        : 'not read yet';
      return {
        ok: false,
        error: new UpstreamError(
          ErrorCode.HISTORY_BEHIND,
          `the Log API follower is ${behind} (at most ${maxLagMs / 1000} s)`,
          { upstream: 'features' },
        ),
        durationMs: performance.now() - startedAt,
      };
    }
    return { ok: true, value: features, durationMs: performance.now() - startedAt };
  } catch (cause) {
    return unavailable(cause, startedAt);
  }
}

export function createFeatureReader(options: FeatureReaderOptions): FeatureReader {
  const { store } = options;
  return {
    historyConfigured: options.historyConfigured ?? true,
    // Not async: each read is the store's promise and one `then` (an async layer is a promise, an
    // await and a resume more on every decision; issue 32). Whatever throws, the store or the
    // reading's features, is the feature store unavailable, as before.
    readVelocity(plan, nowMs) {
      const startedAt = performance.now();
      const ops = readOps(plan);
      const read = (readings: CounterReadings): UpstreamResult<Record<string, number>> => {
        try {
          return {
            ok: true,
            value: counterValues(plan, readings),
            durationMs: performance.now() - startedAt,
          };
        } catch (cause) {
          return unavailable(cause, startedAt);
        }
      };
      if (ops.length === 0) return Promise.resolve(read({ counts: [], seen: [] }));
      try {
        return store.readCounters(ops, nowMs).then(read, (cause: unknown) => unavailable(cause, startedAt));
      } catch (cause) {
        return Promise.resolve(unavailable(cause, startedAt));
      }
    },
    readHistory(userId, nowMs, maxLagMs) {
      const startedAt = performance.now();
      try {
        return store.readHistory(historyKey(userId), nowMs).then(
          (reading) => historyResult(reading, nowMs, maxLagMs, startedAt),
          (cause: unknown) => unavailable(cause, startedAt),
        );
      } catch (cause) {
        return Promise.resolve(unavailable(cause, startedAt));
      }
    },
    record(plan, verdict, nowMs) {
      const ops = recordOps(plan, verdict);
      if (ops.length === 0) return;
      store.recordCounters(ops, nowMs).catch((e: unknown) => {
        options.onRecordError?.(e instanceof Error ? e : new Error(String(e)));
      });
    },
  };
}
