import { constants, monitorEventLoopDelay, PerformanceObserver, performance } from 'node:perf_hooks';
import type { Meter } from '@opentelemetry/api';

/**
 * The process's own health, read at scrape time: event-loop delay and utilisation (what a decision
 * waits for before its handler runs), heap and resident memory, garbage-collection pauses by kind.
 * Started by `createMetrics`; `stop()` ends the monitor and the GC observer.
 */

/** Event-loop delay sampling resolution, milliseconds (Node's default is 10). */
const EVENT_LOOP_RESOLUTION_MS = 10;
const NS_PER_S = 1e9;
const GC_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];
const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};
const QUANTILES = [
  ['0.5', 50],
  ['0.9', 90],
  ['0.99', 99],
] as const;

export function startRuntimeMetrics(meter: Meter): { stop(): void } {
  const delay = monitorEventLoopDelay({ resolution: EVENT_LOOP_RESOLUTION_MS });
  delay.enable();
  // Quantiles over the interval since the previous scrape, then the histogram starts afresh: a
  // stall shows at the next scrape and does not linger in the figures for the life of the process.
  meter
    .createObservableGauge('riskgate_event_loop_delay_seconds', {
      description:
        'Event-loop delay since the previous scrape, by quantile (quantile="1" is the maximum); sampled every 10 ms, so values under 10 ms read as about 10 ms',
      unit: 's',
    })
    .addCallback((r) => {
      if (delay.count === 0) return;
      for (const [quantile, p] of QUANTILES) r.observe(delay.percentile(p) / NS_PER_S, { quantile });
      r.observe(delay.max / NS_PER_S, { quantile: '1' });
      delay.reset();
    });

  let lastUtilization = performance.eventLoopUtilization();
  meter
    .createObservableGauge('riskgate_event_loop_utilization_ratio', {
      description: 'Share of time the event loop was busy since the previous scrape (0 to 1)',
    })
    .addCallback((r) => {
      const now = performance.eventLoopUtilization();
      r.observe(performance.eventLoopUtilization(now, lastUtilization).utilization);
      lastUtilization = now;
    });

  const heapUsed = meter.createObservableGauge('riskgate_heap_used_bytes', {
    description: 'V8 heap in use',
    unit: 'By',
  });
  const heapTotal = meter.createObservableGauge('riskgate_heap_total_bytes', {
    description: 'V8 heap reserved',
    unit: 'By',
  });
  const resident = meter.createObservableGauge('riskgate_resident_memory_bytes', {
    description: 'Resident set size of the process',
    unit: 'By',
  });
  meter.addBatchObservableCallback(
    (r) => {
      const m = process.memoryUsage();
      r.observe(heapUsed, m.heapUsed);
      r.observe(heapTotal, m.heapTotal);
      r.observe(resident, m.rss);
    },
    [heapUsed, heapTotal, resident],
  );

  const gcPauses = meter.createHistogram('riskgate_gc_duration_seconds', {
    description: 'Garbage-collection pauses, by kind (minor, major, incremental, weakcb)',
    unit: 's',
    advice: { explicitBucketBoundaries: GC_BUCKETS_S },
  });
  const gcAttrs = new Map(Object.entries(GC_KINDS).map(([k, kind]) => [Number(k), { kind }]));
  const other = { kind: 'other' };
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as { detail?: { kind?: number } }).detail?.kind;
      gcPauses.record(entry.duration / 1000, (kind !== undefined && gcAttrs.get(kind)) || other);
    }
  });
  gc.observe({ entryTypes: ['gc'] });

  return {
    stop() {
      delay.disable();
      gc.disconnect();
    },
  };
}
