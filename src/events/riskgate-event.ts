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
}

/** A sink for a riskgate with no receivers configured. */
export const NO_EVENTS: EventSink = { emit: async () => {} };
