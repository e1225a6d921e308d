/**
 * Bench only (issue 32): counts the timer callbacks that fire on riskgate's main thread, by the
 * call site that created them (`setTimeout`, `setInterval`, `setImmediate` as called through the
 * globals: riskgate's own, the clock's, undici's timer wheel and its immediates; not Node's
 * internal ones, a socket's own timeout, which the main thread's wake-ups below still count), and
 * the main thread's voluntary context switches (`/proc/self/task/<pid>/status`: each one a sleep
 * of the event loop, so a wake-up after it, whatever woke it). A timer cleared before it fires is
 * counted as created only; an interval or a `refresh()`ed timeout counts each fire. Writes the
 * cumulative counts, with the requests the HTTP server has emitted so far, as one JSON line a
 * second to `$TIMER_FIRES_DIR/<pid>.ndjson`; read them with `bench/timer-fires-report.ts`. A
 * preload, so any tree (a `git archive` of main) is counted unchanged; plain erasable TypeScript,
 * loaded by Node itself before tsx:
 *
 *   TIMER_FIRES_DIR=/tmp/timer-fires npx tsx bench/hot-path-cpu.ts --rate 200 \
 *     --builds this=bench/riskgate-under-bench.ts~--import=$PWD/bench/timer-fires.ts
 *
 * It costs a structured stack trace per timer created (a few µs; the sites are cached by the
 * creating frame's position), so read its counts, not the CPU of a run it is loaded in.
 */
import { EventEmitter } from 'node:events';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { Server } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { isMainThread } from 'node:worker_threads';

interface Site {
  created: number;
  fired: number;
  /** Fires that woke a sleeping loop (see `woke` below). */
  woke: number;
}

type Timer = (fn: (...args: unknown[]) => void, ...rest: unknown[]) => unknown;

/** Frames skipped for the site: Node's own, this file, and the clock every riskgate timer goes through. */
const PASS_THROUGH = ['timer-fires.ts', 'src/timing/clock.ts', 'src/timing/driven-clock.ts'];

const dir = process.env.TIMER_FIRES_DIR;
// Main thread only: a preload runs in every worker thread too.
if (isMainThread && dir !== undefined && dir !== '') {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${process.pid}.ndjson`);
  /** Idle milliseconds before a fire that count as a sleep it ended. */
  const idleMs = Number(process.env.TIMER_FIRES_IDLE_MS ?? 0.5);
  const status = `/proc/self/task/${process.pid}/status`;
  const sites = new Map<string, Site>();
  let requests = 0;

  const siteOf = (kind: string, delay: unknown): Site => {
    const prepare = Error.prepareStackTrace;
    const limit = Error.stackTraceLimit;
    Error.prepareStackTrace = (_, callSites) => callSites;
    Error.stackTraceLimit = 10;
    const holder: { stack?: NodeJS.CallSite[] } = {};
    Error.captureStackTrace(holder, siteOf);
    const callSites = holder.stack ?? [];
    Error.prepareStackTrace = prepare;
    Error.stackTraceLimit = limit;
    const own = callSites.find((c) => {
      const f = c.getFileName() ?? 'node:';
      return !f.startsWith('node:') && !PASS_THROUGH.some((p) => f.endsWith(p));
    });
    const f = (own?.getFileName() ?? '?').replace(/^.*?\/(src|bench|node_modules)\//, '$1/');
    // tsx's generated lines, not the source's: the function names the site.
    const ms = delay === undefined ? '' : ` ${Math.round(Number(delay))}ms`;
    const key = `${kind}${ms} ${f} ${own?.getFunctionName() ?? '(anonymous)'}`;
    const known = sites.get(key);
    if (known !== undefined) return known;
    const site = { created: 0, fired: 0, woke: 0 };
    sites.set(key, site);
    return site;
  };

  // Whether a fire woke a sleeping loop: it is the first timer of its loop iteration (libuv's
  // metrics count them), nothing ran before it in that iteration (no event emitted: the poll
  // phase's I/O reaches JavaScript through `emit`; no immediate: the check phase), and the loop's
  // idle time grew since the last thing that ran (it slept in between).
  // Iterations in which nothing counted ran (loop iterations less `seen`): a timer's wake-up that
  // ran no callback (Node wakes at a cleared timer's time when it was the earliest, and when a
  // timer list's head was refreshed), and I/O that reaches JavaScript other than by `emit`.
  const loopNow = () => performance.nodeTiming.uvMetricsInfo.loopCount;
  let activeLoop = -1;
  let idleAtActivity = 0;
  let seen = 0;
  const activity = () => {
    const loop = loopNow();
    if (loop !== activeLoop) seen++;
    activeLoop = loop;
    idleAtActivity = performance.eventLoopUtilization().idle;
  };
  const woke = (timer: boolean): boolean => {
    const loop = loopNow();
    const idle = performance.eventLoopUtilization().idle;
    const first = timer && loop !== activeLoop && idle - idleAtActivity >= idleMs;
    if (loop !== activeLoop) seen++;
    activeLoop = loop;
    idleAtActivity = idle;
    return first;
  };

  const counted = (kind: string, original: Timer, delayed: boolean): Timer => {
    const wrapper = function (this: unknown, fn: (...args: unknown[]) => void, ...rest: unknown[]) {
      if (typeof fn !== 'function') return original.call(this, fn, ...rest);
      const site = siteOf(kind, delayed ? (rest[0] ?? 1) : undefined);
      site.created++;
      return original.call(
        this,
        function (this: unknown, ...args: unknown[]) {
          site.fired++;
          if (woke(delayed)) site.woke++;
          return fn.apply(this, args);
        },
        ...rest,
      );
    };
    const custom = (original as unknown as Record<symbol, unknown>)[promisify.custom];
    if (custom !== undefined) Object.defineProperty(wrapper, promisify.custom, { value: custom });
    return wrapper;
  };

  const g = globalThis as unknown as Record<string, Timer>;
  const write = () => {
    const voluntary = /voluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(status, 'utf8'))?.[1];
    const line = {
      atMs: Math.round(performance.now()),
      requests,
      wakeups: Number(voluntary),
      iterations: loopNow(),
      seen,
      sites: Object.fromEntries(sites),
    };
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  };
  // Before the wrapping: its own timer is not counted.
  setInterval(write, 1000).unref();
  process.on('exit', write);
  g.setTimeout = counted('Timeout', g.setTimeout!, true);
  g.setInterval = counted('Interval', g.setInterval!, true);
  g.setImmediate = counted('Immediate', g.setImmediate!, false);

  const emit = EventEmitter.prototype.emit;
  EventEmitter.prototype.emit = function (this: EventEmitter, event: string | symbol, ...args: unknown[]) {
    activity();
    if (event === 'request' && this instanceof Server) requests++;
    return emit.call(this, event, ...args);
  } as EventEmitter['emit'];
}
