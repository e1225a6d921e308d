import { backoffDelayMs } from '../timing/backoff.ts';
import { sleep } from '../timing/sleep.ts';
import type { EventSink, RiskgateEvent } from './riskgate-event.ts';

/**
 * Emits `event` after its change committed, tried `tries` times (default 3) with the backoff
 * (100 ms doubling, jittered) between: its id is stable, so a try that did land and is tried
 * again is one event to a receiver. False when every try failed (the caller logs and counts it lost).
 */
export async function emitCommitted(
  events: EventSink,
  event: RiskgateEvent,
  options: { tries?: number; initialMs?: number } = {},
): Promise<boolean> {
  const tries = options.tries ?? 3;
  for (let failures = 0; ; ) {
    try {
      await events.emit(event);
      return true;
    } catch {
      failures++;
      if (failures >= tries) return false;
      await sleep(backoffDelayMs({ initialMs: options.initialMs ?? 100, maxMs: 1000 }, failures));
    }
  }
}
