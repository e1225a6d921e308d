import type { Histogram } from 'hdr-histogram-js';
import * as hdr from 'hdr-histogram-js';

/** Percentiles of one histogram, microseconds. */
export interface LatencySummary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

/** A microsecond histogram from 1 µs to 10 minutes at 3 significant digits. */
export function createMicrosecondHistogram(): Histogram {
  return hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 600_000_000,
    numberOfSignificantValueDigits: 3,
  });
}

/** Records a value in microseconds, clamped into the histogram's range (hdr rejects negatives). */
export function recordMicros(histogram: Histogram, micros: number): void {
  histogram.recordValue(Math.min(600_000_000, Math.max(0, Math.round(micros))));
}

/** p50/p90/p99/p99.9/max/mean of a histogram; zeros when it is empty. */
export function summarize(histogram: Histogram): LatencySummary {
  if (histogram.totalCount === 0) return { count: 0, p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0 };
  return {
    count: histogram.totalCount,
    p50: histogram.getValueAtPercentile(50),
    p90: histogram.getValueAtPercentile(90),
    p99: histogram.getValueAtPercentile(99),
    p999: histogram.getValueAtPercentile(99.9),
    max: histogram.maxValue,
    mean: Math.round(histogram.mean),
  };
}
