/** One decision's timing as the riskgate process reported it in `Server-Timing`. Milliseconds. */
export interface DecisionTiming {
  /** `total;dur=`: the server's own measure of the decision, or undefined when absent. */
  totalMs: number | undefined;
  /**
   * The floor: the slowest call of the parallel fan-out, plus the calls made after evaluation
   * (the one-time code); 0 when the decision made none.
   */
  slowestUpstreamMs: number;
  /** How many upstream metrics the header named. */
  upstreamCalls: number;
}

/** Metrics of riskgate's `Server-Timing` that are not upstream calls (src/decide/decide-response.ts). */
const LOCAL_METRICS = new Set(['total', 'policy', 'queue']);
/** Upstream calls made after the policy evaluated, one after the fan-out: they add to the floor. */
const SEQUENTIAL_CALLS = new Set(['admin-otc']);

/**
 * Parses riskgate's `Server-Timing` (`total;dur=12.3, signals-newBrowser;dur=8.1, admin-user;dur=2.0,
 * policy;dur=0.1`): every metric other than `total` and `policy` is an upstream call; all run in
 * parallel but `admin-otc`, which follows the evaluation. Metrics without `dur` are ignored.
 * Returns undefined when the header is missing.
 */
export function parseServerTiming(header: string | string[] | undefined): DecisionTiming | undefined {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join(',') : header;
  let totalMs: number | undefined;
  let slowestParallelMs = 0;
  let sequentialMs = 0;
  let upstreamCalls = 0;
  for (const metric of text.split(',')) {
    const parts = metric.split(';');
    const name = parts[0]?.trim();
    if (!name) continue;
    let dur: number | undefined;
    for (let i = 1; i < parts.length; i++) {
      const param = parts[i]!.trim();
      if (param.startsWith('dur=')) {
        const value = Number(param.slice(4).replace(/^"|"$/g, ''));
        if (Number.isFinite(value)) dur = value;
      }
    }
    if (dur === undefined) continue;
    if (name === 'total') {
      totalMs = dur;
    } else if (SEQUENTIAL_CALLS.has(name)) {
      upstreamCalls++;
      sequentialMs += dur;
    } else if (!LOCAL_METRICS.has(name)) {
      upstreamCalls++;
      if (dur > slowestParallelMs) slowestParallelMs = dur;
    }
  }
  return { totalMs, slowestUpstreamMs: slowestParallelMs + sequentialMs, upstreamCalls };
}
