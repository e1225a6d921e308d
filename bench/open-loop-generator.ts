/**
 * The load generator, in its own process (forked by bench/run.ts with `node --import tsx`, pinned
 * beside the servers). Two jobs, driven over IPC:
 *
 * - `open`: an open-model run. Sends are scheduled at fixed intended times (rate per second) and
 *   fired whether or not earlier answers came back, so a slow answer never delays the next send.
 *   Every latency is measured from the intended send time to the end of the response body
 *   (no coordinated omission), in microseconds, into hdr histograms.
 * - `cannon`: a closed-model autocannon run (throughput ceiling).
 * - `closed`: a closed-model run with undici (each of `connections` callers sends its next request
 *   when the previous one answered), counting the verdicts per account as `open` does; for the
 *   stress test, which checks every answer.
 */
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { Pool } from 'undici';
import {
  createMicrosecondHistogram,
  type LatencySummary,
  recordMicros,
  summarize,
} from './latency-summary.ts';
import { parseServerTiming } from './server-timing.ts';

export interface OpenLoopJob {
  type: 'open';
  id: number;
  origin: string;
  path: string;
  headers: Record<string, string>;
  /** Serialised bodies, POSTed in turn; empty sends GETs (the transport baseline). */
  bodies: string[];
  rate: number;
  durationS: number;
  warmupS: number;
  connections: number;
  timeoutMs: number;
  maxInFlight: number;
  /** Counts the 2xx answers within this many ms of their intended send (`withinBound`). */
  goodputWithinMs?: number;
  /** Also reports the p99 of 2xx answers by second of intended send (`perSecondP99Ms`). */
  perSecond?: boolean;
}

export interface CannonJob {
  type: 'cannon';
  id: number;
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  /** Bodies cycled per request (POST); empty for GET. */
  bodies: string[];
  durationS: number;
  connections: number;
}

export interface ClosedLoopJob {
  type: 'closed';
  id: number;
  origin: string;
  path: string;
  headers: Record<string, string>;
  /** Serialised /decide bodies, taken in turn by whichever caller is free. */
  bodies: string[];
  connections: number;
  durationS: number;
  /** Per-request timeout, ms; a timed-out request counts in `errors.timeouts`. */
  timeoutMs: number;
}

export interface ClosedLoopResult {
  durationS: number;
  connections: number;
  /** Requests answered (any status) or failed. */
  requests: number;
  /** 2xx answers. */
  ok: number;
  /** 2xx answers per second of the run. */
  requestsPerSecond: number;
  non2xx: number;
  errors: { timeouts: number; connection: number; status: Record<string, number> };
  /** Latency of the 2xx answers, ms. */
  latencyMs: { p50: number; p99: number; max: number };
  verdicts: Record<string, number>;
  /** Verdicts of the 2xx answers by the body's `accountId`. */
  verdictsByAccount: Record<string, Record<string, number>>;
}

export type GeneratorJob = OpenLoopJob | CannonJob | ClosedLoopJob;

export interface OpenLoopResult {
  rate: number;
  durationS: number;
  warmupS: number;
  /** Sends scheduled in the measured window. */
  scheduled: number;
  /** 2xx answers in the measured window. */
  ok: number;
  /** Answers of any status, warm-up included: the denominator of per-decision upstream figures. */
  answeredIncludingWarmup: number;
  /** 2xx answers, warm-up included: the denominator of CPU per decision (issue 32: never the sheds). */
  okIncludingWarmup: number;
  /** 503 answers (sheds), warm-up included: shown beside the CPU per 2xx answer. */
  shedIncludingWarmup: number;
  /** 2xx answers per second of the measured window. */
  achievedRate: number;
  errors: { timeouts: number; connection: number; dropped: number; status: Record<string, number> };
  /** Intended send → end of body, 2xx answers and timeouts. */
  latencyUs: LatencySummary;
  /** Actual send → end of body (excludes the generator's own scheduling lag). */
  serviceTimeUs: LatencySummary;
  /** Actual send − intended send: how far behind schedule the generator itself ran. */
  sendLagUs: LatencySummary;
  /** Intended send → end of body of the 503 answers (shed): how fast a refusal is. */
  shedLatencyUs: LatencySummary;
  /** Slowest upstream call per decision, from Server-Timing: the floor. */
  slowestUpstreamUs: LatencySummary;
  /** Server-Timing `total` − slowest upstream: orchestration overhead inside riskgate. */
  overheadServerUs: LatencySummary;
  /** Actual send → end of body − slowest upstream: overhead as the caller sees it (HTTP and loopback included). */
  overheadEndToEndUs: LatencySummary;
  /** 2xx answers without a parsable Server-Timing `total`. */
  missingServerTiming: number;
  /** Mean upstream metrics named in Server-Timing per 2xx decision. */
  upstreamMetricsPerDecision: number;
  verdicts: Record<string, number>;
  /** Verdicts of the measured 2xx answers by the body's `accountId` (`unknown` without one). */
  verdictsByAccount: Record<string, Record<string, number>>;
  /** CPU the generator used during the run, microseconds (to show it was not the bottleneck). */
  generatorCpuUs: number;
  /** 2xx answers within `goodputWithinMs` of their intended send (0 without it). */
  withinBound: number;
  /** p99 latency of the 2xx answers sent in each second of the measured window, ms (with `perSecond`). */
  perSecondP99Ms?: number[];
}

export interface CannonResult {
  url: string;
  durationS: number;
  connections: number;
  requests: number;
  ok: number;
  requestsPerSecond: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodes: Record<string, number>;
}

export type GeneratorReply =
  | { type: 'ready' }
  | { type: 'result'; id: number; result: OpenLoopResult | CannonResult | ClosedLoopResult }
  | { type: 'error'; id: number; message: string };

/** The generator's connections to the target: the generator's own deadlines are the ones that count. */
function generatorPool(job: { origin: string; connections: number }): Pool {
  return new Pool(job.origin, {
    connections: job.connections,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    headersTimeout: 0,
    bodyTimeout: 0,
  });
}

async function runOpenLoop(job: OpenLoopJob): Promise<OpenLoopResult> {
  const pool = generatorPool(job);
  const latency = createMicrosecondHistogram();
  const serviceTime = createMicrosecondHistogram();
  const sendLag = createMicrosecondHistogram();
  const shedLatency = createMicrosecondHistogram();
  const slowestUpstream = createMicrosecondHistogram();
  const overheadServer = createMicrosecondHistogram();
  const overheadEndToEnd = createMicrosecondHistogram();
  const errors = { timeouts: 0, connection: 0, dropped: 0, status: {} as Record<string, number> };
  const verdicts: Record<string, number> = {};
  const verdictsByAccount: Record<string, Record<string, number>> = {};
  const accounts = job.bodies.map(accountOf);
  let ok = 0;
  let answeredIncludingWarmup = 0;
  let okIncludingWarmup = 0;
  let shedIncludingWarmup = 0;
  let missingServerTiming = 0;
  let upstreamMetrics = 0;
  let inFlight = 0;
  let withinBound = 0;
  const perSecond = job.perSecond
    ? Array.from({ length: Math.ceil(job.durationS) }, () => createMicrosecondHistogram())
    : undefined;

  const intervalMs = 1000 / job.rate;
  const warmupCount = Math.round(job.warmupS * job.rate);
  const measuredCount = Math.round(job.durationS * job.rate);
  const total = warmupCount + measuredCount;
  const isPost = job.bodies.length > 0;
  const headers = isPost ? { 'content-type': 'application/json', ...job.headers } : job.headers;
  const cpuBefore = process.cpuUsage();
  // Start a few ms out so the first sends are not already late.
  const startMs = performance.now() + 5;
  const measuredStartMs = startMs + warmupCount * intervalMs;
  let lastMeasuredEndMs = measuredStartMs;

  const fire = (index: number, intendedMs: number): void => {
    const measured = index >= warmupCount;
    if (inFlight >= job.maxInFlight) {
      if (measured) errors.dropped++;
      return;
    }
    inFlight++;
    const sentMs = performance.now();
    if (measured) recordMicros(sendLag, (sentMs - intendedMs) * 1000);
    const remainingMs = Math.max(1, Math.round(job.timeoutMs - (sentMs - intendedMs)));
    pool
      .request({
        path: job.path,
        method: isPost ? 'POST' : 'GET',
        headers,
        body: isPost ? job.bodies[index % job.bodies.length]! : null,
        signal: AbortSignal.timeout(remainingMs),
      })
      .then(async (response) => {
        const text = await response.body.text();
        const endMs = performance.now();
        answeredIncludingWarmup++;
        if (response.statusCode >= 200 && response.statusCode <= 299) okIncludingWarmup++;
        else if (response.statusCode === 503) shedIncludingWarmup++;
        if (!measured) return;
        if (endMs > lastMeasuredEndMs) lastMeasuredEndMs = endMs;
        if (response.statusCode < 200 || response.statusCode > 299) {
          const key = String(response.statusCode);
          errors.status[key] = (errors.status[key] ?? 0) + 1;
          if (response.statusCode === 503) recordMicros(shedLatency, (endMs - intendedMs) * 1000);
          return;
        }
        ok++;
        recordMicros(latency, (endMs - intendedMs) * 1000);
        if (job.goodputWithinMs !== undefined && endMs - intendedMs <= job.goodputWithinMs) withinBound++;
        if (perSecond !== undefined) {
          const second = Math.floor((intendedMs - measuredStartMs) / 1000);
          const h = perSecond[Math.min(perSecond.length - 1, Math.max(0, second))]!;
          recordMicros(h, (endMs - intendedMs) * 1000);
        }
        const serviceMs = endMs - sentMs;
        recordMicros(serviceTime, serviceMs * 1000);
        const timing = parseServerTiming(response.headers['server-timing']);
        if (timing?.totalMs === undefined) {
          missingServerTiming++;
        } else {
          upstreamMetrics += timing.upstreamCalls;
          recordMicros(slowestUpstream, timing.slowestUpstreamMs * 1000);
          recordMicros(overheadServer, (timing.totalMs - timing.slowestUpstreamMs) * 1000);
          recordMicros(overheadEndToEnd, (serviceMs - timing.slowestUpstreamMs) * 1000);
        }
        const verdict = readVerdict(text);
        verdicts[verdict] = (verdicts[verdict] ?? 0) + 1;
        countVerdict(verdictsByAccount, accounts[index % accounts.length] ?? 'unknown', verdict);
      })
      .catch((error: unknown) => {
        const endMs = performance.now();
        if (!measured) return;
        if (endMs > lastMeasuredEndMs) lastMeasuredEndMs = endMs;
        const name = error instanceof Error ? error.name : '';
        if (name === 'TimeoutError' || name === 'AbortError') {
          errors.timeouts++;
          // A timed-out request still counts in the latency figures, at what it cost the caller.
          recordMicros(latency, (endMs - intendedMs) * 1000);
        } else {
          errors.connection++;
        }
      })
      .finally(() => {
        inFlight--;
      });
  };

  await new Promise<void>((resolve) => {
    let next = 0;
    const tick = (): void => {
      const now = performance.now();
      // Fire everything whose intended time has come: a late tick sends a burst, never skips.
      while (next < total && startMs + next * intervalMs <= now) {
        fire(next, startMs + next * intervalMs);
        next++;
      }
      if (next < total) {
        setTimeout(tick, Math.max(0, startMs + next * intervalMs - performance.now()));
      } else {
        resolve();
      }
    };
    setTimeout(tick, Math.max(0, startMs - performance.now()));
  });
  while (inFlight > 0) await new Promise((r) => setTimeout(r, 5));
  const cpu = process.cpuUsage(cpuBefore);
  await pool.close();

  const windowS = Math.max(job.durationS, (lastMeasuredEndMs - measuredStartMs) / 1000);
  return {
    rate: job.rate,
    durationS: job.durationS,
    warmupS: job.warmupS,
    scheduled: measuredCount,
    ok,
    answeredIncludingWarmup,
    okIncludingWarmup,
    shedIncludingWarmup,
    achievedRate: round(ok / windowS, 1),
    errors,
    latencyUs: summarize(latency),
    serviceTimeUs: summarize(serviceTime),
    sendLagUs: summarize(sendLag),
    shedLatencyUs: summarize(shedLatency),
    slowestUpstreamUs: summarize(slowestUpstream),
    overheadServerUs: summarize(overheadServer),
    overheadEndToEndUs: summarize(overheadEndToEnd),
    missingServerTiming,
    upstreamMetricsPerDecision:
      ok - missingServerTiming > 0 ? round(upstreamMetrics / (ok - missingServerTiming), 3) : 0,
    verdicts,
    verdictsByAccount,
    generatorCpuUs: cpu.user + cpu.system,
    withinBound,
    ...(perSecond !== undefined && {
      perSecondP99Ms: perSecond.map((h) =>
        h.totalCount === 0 ? 0 : round(h.getValueAtPercentile(99) / 1000, 2),
      ),
    }),
  };
}

/** The `verdict` of a /decide answer without a full parse when the field is where D puts it. */
function readVerdict(text: string): string {
  const match = /"verdict"\s*:\s*"([a-z_]+)"/.exec(text);
  return match?.[1] ?? 'unknown';
}

/** The `accountId` of a serialised /decide body (read once per body, not per request). */
function accountOf(body: string): string {
  try {
    const v = JSON.parse(body) as { accountId?: unknown };
    return typeof v.accountId === 'string' ? v.accountId : 'unknown';
  } catch {
    return 'unknown';
  }
}

function countVerdict(into: Record<string, Record<string, number>>, account: string, verdict: string): void {
  const row = into[account] ?? {};
  row[verdict] = (row[verdict] ?? 0) + 1;
  into[account] = row;
}

async function runClosedLoop(job: ClosedLoopJob): Promise<ClosedLoopResult> {
  const pool = generatorPool(job);
  const headers = { 'content-type': 'application/json', ...job.headers };
  const accounts = job.bodies.map(accountOf);
  const latency = createMicrosecondHistogram();
  const errors = { timeouts: 0, connection: 0, status: {} as Record<string, number> };
  const verdicts: Record<string, number> = {};
  const verdictsByAccount: Record<string, Record<string, number>> = {};
  let next = 0;
  let requests = 0;
  let ok = 0;
  const startMs = performance.now();
  const endMs = startMs + job.durationS * 1000;
  const caller = async (): Promise<void> => {
    // Bounded by time: no request starts after the end, and each has its own timeout.
    while (performance.now() < endMs) {
      const index = next++ % job.bodies.length;
      const sentMs = performance.now();
      requests++;
      try {
        const response = await pool.request({
          path: job.path,
          method: 'POST',
          headers,
          body: job.bodies[index]!,
          signal: AbortSignal.timeout(job.timeoutMs),
        });
        const text = await response.body.text();
        if (response.statusCode < 200 || response.statusCode > 299) {
          const key = String(response.statusCode);
          errors.status[key] = (errors.status[key] ?? 0) + 1;
          continue;
        }
        ok++;
        recordMicros(latency, (performance.now() - sentMs) * 1000);
        const verdict = readVerdict(text);
        verdicts[verdict] = (verdicts[verdict] ?? 0) + 1;
        countVerdict(verdictsByAccount, accounts[index] ?? 'unknown', verdict);
      } catch (error) {
        const name = error instanceof Error ? error.name : '';
        if (name === 'TimeoutError' || name === 'AbortError') errors.timeouts++;
        else errors.connection++;
      }
    }
  };
  await Promise.all(Array.from({ length: job.connections }, caller));
  const elapsedS = (performance.now() - startMs) / 1000;
  await pool.close();
  const l = summarize(latency);
  return {
    durationS: round(elapsedS, 2),
    connections: job.connections,
    requests,
    ok,
    requestsPerSecond: round(ok / elapsedS, 1),
    non2xx: Object.values(errors.status).reduce((a, b) => a + b, 0),
    errors,
    latencyMs: { p50: round(l.p50 / 1000, 1), p99: round(l.p99 / 1000, 1), max: round(l.max / 1000, 1) },
    verdicts,
    verdictsByAccount,
  };
}

async function runCannon(job: CannonJob): Promise<CannonResult> {
  let n = 0;
  const bodies = job.bodies;
  const result = await autocannon({
    url: job.url,
    connections: job.connections,
    duration: job.durationS,
    timeout: 10,
    method: job.method,
    headers: job.headers,
    requests:
      bodies.length > 0
        ? [
            {
              method: job.method,
              setupRequest: (request) => {
                request.body = bodies[n++ % bodies.length]!;
                return request;
              },
            },
          ]
        : [{ method: job.method }],
  });
  const statusCodes: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {}))
    statusCodes[code] = Number(stat.count);
  return {
    url: job.url,
    durationS: result.duration,
    connections: job.connections,
    requests: result.requests.total,
    ok: result['2xx'],
    requestsPerSecond: round(result['2xx'] / result.duration, 1),
    latencyMs: {
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      max: result.latency.max,
      mean: result.latency.mean,
    },
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    statusCodes,
  };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

function reply(message: GeneratorReply): void {
  process.send?.(message);
}

// Only act as the generator when forked with an IPC channel; importing the types is side-effect free.
if (process.send) {
  process.on('message', (job: GeneratorJob | { type: 'exit' }) => {
    if (job.type === 'exit') {
      process.disconnect();
      return;
    }
    const run =
      job.type === 'open' ? runOpenLoop(job) : job.type === 'closed' ? runClosedLoop(job) : runCannon(job);
    run.then(
      (result) => reply({ type: 'result', id: job.id, result }),
      (error: unknown) =>
        reply({ type: 'error', id: job.id, message: error instanceof Error ? error.message : String(error) }),
    );
  });
  reply({ type: 'ready' });
}
