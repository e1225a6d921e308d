/**
 * The work riskgate has queued behind its answers: actions in the outbox not yet delivered (or not
 * yet acknowledged by its store) and decisions waiting for the decision store. A closed loop that
 * ends with these queued has been answered with CPU the queued work will take later: the overload
 * scenario's capacity probe (bench/overload-scenario.ts) waits for them and counts that CPU.
 */

import { DECISION_STORE_PENDING_GAUGE } from '../src/decision-store/decision-store-gauges.ts';
import { OUTBOX_GAUGES } from '../src/outbox/outbox-gauges.ts';

/** The gauges of `GET /metrics` whose sum is the backlog (each named once beside its component). */
export const BACKLOG_GAUGES: readonly string[] = [
  OUTBOX_GAUGES.pending,
  OUTBOX_GAUGES.deferred,
  DECISION_STORE_PENDING_GAUGE,
];

/**
 * The sum of `BACKLOG_GAUGES` in a Prometheus text (every sample of each: a cluster's per-worker
 * gauges are summed). An absent gauge counts as 0 (the decision store off has none).
 */
export function backlogOf(metricsText: string): number {
  let sum = 0;
  for (const line of metricsText.split('\n')) {
    if (line.startsWith('#')) continue;
    const name = /^[a-z_]+/.exec(line)?.[0];
    if (name === undefined || !BACKLOG_GAUGES.includes(name)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) sum += value;
  }
  return sum;
}

/**
 * riskgate's backlog at `origin` (its `/metrics`, an operator endpoint: `opsKey` is one of its
 * `RISKGATE_OPS_KEYS`); undefined when it does not answer within `timeoutMs`.
 */
export async function readBacklog(
  origin: string,
  opsKey: string,
  timeoutMs = 2000,
): Promise<number | undefined> {
  try {
    const response = await fetch(`${origin}/metrics`, {
      headers: { authorization: `Bearer ${opsKey}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!response.ok) return undefined;
    return backlogOf(await response.text());
  } catch {
    return undefined;
  }
}
