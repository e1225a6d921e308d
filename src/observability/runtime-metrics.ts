import { readdirSync, readFileSync } from 'node:fs';
import { constants, monitorEventLoopDelay, PerformanceObserver, performance } from 'node:perf_hooks';
import type { Meter } from '@opentelemetry/api';
import { type Clock, type ClockTimer, systemClock } from '../timing/clock.ts';

/**
 * The process's own health, read at scrape time: event-loop delay and utilisation (what a decision
 * waits for before its handler runs), garbage-collection pauses by kind, and the standard process
 * and Node.js metrics every Prometheus client library exports under the same names (CPU seconds,
 * resident memory, open and maximum file descriptors, start time, V8 heap), so stock dashboards and
 * alerts apply. Started by `createMetrics`; `stop()` ends the monitor and the GC observer.
 */

/** Event-loop delay sampling resolution, milliseconds (Node's default is 10). */
const EVENT_LOOP_RESOLUTION_MS = 10;
/**
 * The delay monitor's 10 ms timer wakes the process 100 times a second, most of an idle
 * riskgate's CPU (issue 32: 0.85 % of a core on its own on a loaded 2-core host). It pauses once
 * the loop has been busy under `QUIET_BUSY_RATIO` for `QUIET_CHECKS_TO_PAUSE` checks in a row (one
 * a second), and resumes at the first check that finds it busier: an idle loop has no delay to show.
 */
const QUIET_CHECK_MS = 1000;
const QUIET_CHECKS_TO_PAUSE = 5;
const QUIET_BUSY_RATIO = 0.02;
const NS_PER_S = 1e9;
const GC_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];
const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};
/** The event-loop delay gauges: one per quantile (promtool allows a `quantile` label on summaries only). */
const DELAY_GAUGES = [
  ['riskgate_event_loop_delay_p50_seconds', 'median', 50],
  ['riskgate_event_loop_delay_p90_seconds', '90th percentile', 90],
  ['riskgate_event_loop_delay_p99_seconds', '99th percentile', 99],
  ['riskgate_event_loop_delay_max_seconds', 'maximum', 100],
] as const;

export function startRuntimeMetrics(meter: Meter): { stop(): void } {
  const delay = monitorEventLoopDelay({ resolution: EVENT_LOOP_RESOLUTION_MS });
  delay.enable();
  const pausing = pauseWhileQuiet(delay);
  // Quantiles over the interval since the previous scrape, then the histogram starts afresh: a
  // stall shows at the next scrape and does not linger in the figures for the life of the process.
  const delayGauges = DELAY_GAUGES.map(([name, what, p]) => ({
    p,
    gauge: meter.createObservableGauge(name, {
      description: `Event-loop delay since the previous scrape, ${what}; sampled every 10 ms, so values under 10 ms read as about 10 ms (0 while the loop is idle: not sampled then)`,
      unit: 's',
    }),
  }));
  meter.addBatchObservableCallback(
    (r) => {
      if (delay.count === 0) {
        // Paused the whole interval: the loop was idle, nothing waited.
        if (pausing.paused()) for (const { gauge } of delayGauges) r.observe(gauge, 0);
        return;
      }
      for (const { p, gauge } of delayGauges)
        r.observe(gauge, (p === 100 ? delay.max : delay.percentile(p)) / NS_PER_S);
      delay.reset();
    },
    delayGauges.map((g) => g.gauge),
  );

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

  observeProcess(meter);

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
      pausing.stop();
      delay.disable();
      gc.disconnect();
    },
  };
}

/**
 * Disables `delay` while the event loop is quiet and enables it again once it is busier (see
 * `QUIET_CHECK_MS` above). `busyRatio` is the loop's utilisation since its previous call (the
 * default reads `performance.eventLoopUtilization`); `clock` times the checks.
 */
export function pauseWhileQuiet(
  delay: { enable(): boolean; disable(): boolean },
  o: { clock?: Clock; busyRatio?: () => number } = {},
): { paused(): boolean; stop(): void } {
  const clock = o.clock ?? systemClock;
  let last = performance.eventLoopUtilization();
  const busyRatio =
    o.busyRatio ??
    (() => {
      const now = performance.eventLoopUtilization();
      const ratio = performance.eventLoopUtilization(now, last).utilization;
      last = now;
      return ratio;
    });
  let quietChecks = 0;
  let paused = false;
  let timer: ClockTimer | undefined;
  const check = () => {
    if (busyRatio() >= QUIET_BUSY_RATIO) {
      quietChecks = 0;
      if (paused) delay.enable();
      paused = false;
    } else if (!paused && ++quietChecks >= QUIET_CHECKS_TO_PAUSE) {
      delay.disable();
      paused = true;
    }
    timer = clock.setTimeout(check, QUIET_CHECK_MS);
    timer.unref();
  };
  timer = clock.setTimeout(check, QUIET_CHECK_MS);
  timer.unref();
  return { paused: () => paused, stop: () => clock.clearTimeout(timer) };
}

/**
 * `process_*` and `nodejs_*`, named as the Prometheus client libraries name them. The file
 * descriptor gauges read /proc (Linux) and are left out where it does not exist.
 */
function observeProcess(meter: Meter): void {
  const cpu = meter.createObservableCounter('process_cpu_seconds', {
    description: 'Total user and system CPU time spent, seconds',
  });
  const cpuUser = meter.createObservableCounter('process_cpu_user_seconds', {
    description: 'User CPU time spent, seconds',
  });
  const cpuSystem = meter.createObservableCounter('process_cpu_system_seconds', {
    description: 'System CPU time spent, seconds',
  });
  const resident = meter.createObservableGauge('process_resident_memory_bytes', {
    description: 'Resident memory size, bytes',
  });
  const heapUsed = meter.createObservableGauge('nodejs_heap_size_used_bytes', {
    description: 'V8 heap in use, bytes',
  });
  const heapTotal = meter.createObservableGauge('nodejs_heap_size_total_bytes', {
    description: 'V8 heap reserved, bytes',
  });
  const external = meter.createObservableGauge('nodejs_external_memory_bytes', {
    description: 'Memory of C++ objects bound to JavaScript objects (buffers included), bytes',
  });
  meter.addBatchObservableCallback(
    (r) => {
      const { user, system } = process.cpuUsage();
      r.observe(cpu, (user + system) / 1e6);
      r.observe(cpuUser, user / 1e6);
      r.observe(cpuSystem, system / 1e6);
      const m = process.memoryUsage();
      r.observe(resident, m.rss);
      r.observe(heapUsed, m.heapUsed);
      r.observe(heapTotal, m.heapTotal);
      r.observe(external, m.external);
    },
    [cpu, cpuUser, cpuSystem, resident, heapUsed, heapTotal, external],
  );
  const startTimeS = Math.round(Date.now() / 1000 - process.uptime());
  meter
    .createObservableGauge('process_start_time_seconds', {
      description: 'Start time of the process since the Unix epoch, seconds',
    })
    .addCallback((r) => r.observe(startTimeS));

  if (openFds() === undefined) return;
  meter
    .createObservableGauge('process_open_fds', { description: 'Open file descriptors' })
    .addCallback((r) => {
      const n = openFds();
      if (n !== undefined) r.observe(n);
    });
  const max = maxFds();
  if (max !== undefined)
    meter
      .createObservableGauge('process_max_fds', { description: 'Most open file descriptors allowed' })
      .addCallback((r) => r.observe(max));
}

/** Open descriptors, less the one reading the directory; undefined without /proc. */
function openFds(): number | undefined {
  try {
    return readdirSync('/proc/self/fd').length - 1;
  } catch {
    return undefined;
  }
}

/** The soft limit on open files (`ulimit -n`), read once: it does not change under a running process. */
function maxFds(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return line === null ? undefined : Number(line[1]);
  } catch {
    return undefined;
  }
}
