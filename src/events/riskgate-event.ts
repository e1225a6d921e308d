/**
 * Events riskgate tells others about (signed webhooks, src/webhooks/): a lock-out, an unlock, a
 * list change, and optionally each deny or challenge. An emitted event is delivered at least once:
 * `emit` resolves once it is durably queued (in the outbox), so a feature that promised a change
 * emits before answering.
 */

export type RiskgateEventType =
  | 'lockout.created'
  | 'lockout.ended'
  | 'list.entry_added'
  | 'list.entry_removed'
  | 'decision.denied'
  | 'decision.challenged';

export interface RiskgateEvent {
  /** Unique per event: receivers deduplicate on it (delivery is at least once). */
  id: string;
  type: RiskgateEventType;
  /** When it happened (RFC 3339). */
  at: string;
  /** The event's facts: ids (decisionId, userId, list and entry), never a secret. */
  data: Record<string, unknown>;
}

export interface EventSink {
  /** Queues `event` durably for every configured receiver; resolves once it is queued. */
  emit(event: RiskgateEvent): Promise<void>;
  /**
   * Whether an event of `type` goes anywhere: a caller on a hot path (each deny) builds none that
   * would be dropped.
   */
  wants(type: RiskgateEventType): boolean;
}

/** A sink for a riskgate with no receivers configured. */
export const NO_EVENTS: EventSink = { emit: async () => {}, wants: () => false };

/**
 * A sink for the features started before the one that receives events (the webhooks start after
 * the outbox, which the lock-outs and lists precede): events go nowhere until `attach`.
 */
export function laterEventSink(): EventSink & { attach(target: EventSink): void } {
  let target = NO_EVENTS;
  return {
    emit: (event) => target.emit(event),
    wants: (type) => target.wants(type),
    attach(sink) {
      target = sink;
    },
  };
}

/** A sink that keeps every event (tests). */
export function collectingEventSink(into: RiskgateEvent[]): EventSink {
  return {
    emit: async (event) => void into.push(event),
    wants: () => true,
  };
}
