/** One decision's timing as the riskgate process reported it in `Server-Timing`. Milliseconds. */
export interface DecisionTiming {
  /** `total;dur=`: the server's own measure of the decision, or undefined when absent. */
  totalMs: number | undefined;
  /** The slowest upstream call (every metric but `total`); 0 when the decision made none. */
  slowestUpstreamMs: number;
  /** How many upstream metrics the header named. */
  upstreamCalls: number;
}

/**
 * Parses D's `Server-Timing` format (`total;dur=12.3, signals-newBrowser;dur=8.1, admin-user;dur=2.0`):
 * every metric other than `total` is an upstream call. Metrics without `dur` are ignored. Returns
 * undefined when the header is missing.
 */
export function parseServerTiming(header: string | string[] | undefined): DecisionTiming | undefined {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join(',') : header;
  let totalMs: number | undefined;
  let slowestUpstreamMs = 0;
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
    } else {
      upstreamCalls++;
      if (dur > slowestUpstreamMs) slowestUpstreamMs = dur;
    }
  }
  return { totalMs, slowestUpstreamMs, upstreamCalls };
}
