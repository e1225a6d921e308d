import { type Attributes, type HrTime, ValueType } from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPointType,
  type HistogramMetricData,
  InstrumentType,
  type MetricData,
  type ResourceMetrics,
  type SumMetricData,
} from '@opentelemetry/sdk-metrics';

/** An instrument aggregated in riskgate's memory whose collection is the SDK's data. */
export interface LocalInstrument {
  /** The metric as collected, or undefined while nothing was recorded (as the SDK omits it). */
  metricData(endTime: HrTime): MetricData | undefined;
}

/**
 * A histogram aggregated in riskgate's own memory and handed to the OpenTelemetry collection as
 * data, the same data the SDK's explicit-bucket histogram would give (cumulative, upper-inclusive
 * buckets, count, sum, min, max).
 *
 * Why (issue 32): the SDK hashes a record's attributes (sorting their keys and `JSON.stringify`)
 * on every record to find its series, and reads the clock; on `/decide` that was ~2 % of the main
 * thread for the upstream call and decision durations alone. Here the caller resolves its series
 * once per attribute set (`series`) and a record is a few additions.
 */
export interface LocalHistogram extends LocalInstrument {
  /** The series of one attribute set; make it once per attribute set, keep it and `record` on it. */
  series(attributes: Attributes): HistogramSeries;
  metricData(endTime: HrTime): HistogramMetricData | undefined;
}

/** One attribute set's cumulative aggregation. */
export interface HistogramSeries {
  /** Counts `value` (negative and NaN values are dropped, as the SDK drops them). */
  record(value: number): void;
}

/** Options of `createLocalHistogram`; `unit` as OpenTelemetry writes it (`s`, or `''`). */
export interface LocalHistogramOptions {
  name: string;
  description: string;
  unit: string;
  /** Upper bounds of the buckets, ascending; a value equal to a bound falls in its bucket. */
  boundaries: readonly number[];
}

class Series implements HistogramSeries {
  count = 0;
  sum = 0;
  min = Number.POSITIVE_INFINITY;
  max = Number.NEGATIVE_INFINITY;
  readonly counts: number[];
  readonly startTime: HrTime;

  constructor(
    readonly attributes: Attributes,
    private readonly boundaries: readonly number[],
  ) {
    this.counts = new Array<number>(boundaries.length + 1).fill(0);
    this.startTime = hrTimeOf(Date.now());
  }

  record(value: number): void {
    if (!(value >= 0)) return;
    this.count++;
    this.sum += value;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
    const b = this.boundaries;
    let i = 0;
    while (i < b.length && b[i]! < value) i++;
    this.counts[i]!++;
  }
}

/**
 * Series per instrument, as the SDK bounds them (its default aggregation cardinality limit, 2000):
 * past 1,999 attribute sets, every new one records into one overflow series.
 */
const MAX_SERIES = 1999;
const OVERFLOW: Attributes = { 'otel.metric.overflow': true };

/** A new series in `all`, or once `all` is full, its overflow series (made on first need). */
function bounded<S extends { attributes: Attributes }>(all: S[], make: () => S, overflow: () => S): S {
  if (all.length < MAX_SERIES) {
    const s = make();
    all.push(s);
    return s;
  }
  let over = all.find((s) => s.attributes === OVERFLOW);
  if (over === undefined) {
    over = overflow();
    all.push(over);
  }
  return over;
}

function hrTimeOf(epochMs: number): HrTime {
  const seconds = Math.floor(epochMs / 1000);
  return [seconds, Math.round((epochMs - seconds * 1000) * 1_000_000)];
}

export function createLocalHistogram(options: LocalHistogramOptions): LocalHistogram {
  const boundaries = [...options.boundaries];
  const all: Series[] = [];
  const descriptor = {
    name: options.name,
    type: InstrumentType.HISTOGRAM,
    description: options.description,
    unit: options.unit,
    valueType: ValueType.DOUBLE,
    advice: { explicitBucketBoundaries: boundaries },
  };
  return {
    series(attributes) {
      return bounded(
        all,
        () => new Series(attributes, boundaries),
        () => new Series(OVERFLOW, boundaries),
      );
    },
    metricData(endTime) {
      const recorded = all.filter((s) => s.count > 0);
      if (recorded.length === 0) return undefined;
      return {
        descriptor,
        aggregationTemporality: AggregationTemporality.CUMULATIVE,
        dataPointType: DataPointType.HISTOGRAM,
        dataPoints: recorded.map((s) => ({
          attributes: s.attributes,
          startTime: s.startTime,
          endTime,
          value: {
            min: s.min,
            max: s.max,
            sum: s.sum,
            buckets: { boundaries, counts: [...s.counts] },
            count: s.count,
          },
        })),
      };
    },
  };
}

/**
 * A monotonic counter aggregated in riskgate's memory, as `LocalHistogram` (same reason: the SDK
 * hashes a record's attributes on every `add`); collected as the SDK's counter data, so the
 * exposition is the same (`<name>_total`).
 */
export interface LocalCounter extends LocalInstrument {
  /** The series of one attribute set; make it once per attribute set, keep it and `add` to it. */
  series(attributes: Attributes): CounterSeries;
  metricData(endTime: HrTime): SumMetricData | undefined;
}

/** One attribute set's running total. */
export interface CounterSeries {
  /** Adds `value` (negative and NaN values are dropped, as the SDK drops them). */
  add(value: number): void;
}

class Total implements CounterSeries {
  value = 0;
  /** Whether it was ever added to (an `add(0)` makes a series exist at 0, as with the SDK). */
  touched = false;
  readonly startTime: HrTime = hrTimeOf(Date.now());

  constructor(readonly attributes: Attributes) {}

  add(value: number): void {
    if (!(value >= 0)) return;
    this.value += value;
    this.touched = true;
  }
}

export function createLocalCounter(options: { name: string; description: string }): LocalCounter {
  const all: Total[] = [];
  const descriptor = {
    name: options.name,
    type: InstrumentType.COUNTER,
    description: options.description,
    unit: '',
    valueType: ValueType.DOUBLE,
    advice: {},
  };
  return {
    series(attributes) {
      return bounded(
        all,
        () => new Total(attributes),
        () => new Total(OVERFLOW),
      );
    },
    metricData(endTime) {
      const added = all.filter((t) => t.touched);
      if (added.length === 0) return undefined;
      return {
        descriptor,
        aggregationTemporality: AggregationTemporality.CUMULATIVE,
        dataPointType: DataPointType.SUM,
        isMonotonic: true,
        dataPoints: added.map((t) => ({
          attributes: t.attributes,
          startTime: t.startTime,
          endTime,
          value: t.value,
        })),
      };
    },
  };
}

/**
 * Adds the local instruments' metrics to a collection, in the scope named `scope` (created when
 * the collection has none of that name).
 */
export function addLocalMetrics(
  collected: ResourceMetrics,
  scope: string,
  instruments: readonly LocalInstrument[],
): ResourceMetrics {
  const endTime = hrTimeOf(Date.now());
  const metrics = instruments.flatMap((h) => h.metricData(endTime) ?? []);
  if (metrics.length === 0) return collected;
  const into = collected.scopeMetrics.find((s) => s.scope.name === scope);
  if (into !== undefined) into.metrics.push(...metrics);
  else collected.scopeMetrics.push({ scope: { name: scope }, metrics });
  return collected;
}
