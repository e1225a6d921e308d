import { createHash } from 'node:crypto';

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
  /**
   * Unique per event: receivers deduplicate on it (delivery is at least once). Sent as the
   * `webhook-id` header, so printable ASCII only: made of riskgate's own names and ids, and of
   * `eventIdPart` for anything an operator typed (a list value).
   */
  id: string;
  type: RiskgateEventType;
  /** When it happened (RFC 3339). */
  at: string;
  /** The event's facts: ids (decisionId, userId, list and entry), never a secret. */
  data: Record<string, unknown>;
}

/** `Entry`: what `entries` gives (the outbox's action specs for a sink over the outbox). */
export interface EventSink<Entry = unknown> {
  /** Queues `event` durably for every configured receiver; resolves once it is queued. */
  emit(event: RiskgateEvent): Promise<void>;
  /**
   * Whether an event of `type` goes anywhere: a caller on a hot path (each deny) builds none that
   * would be dropped.
   */
  wants(type: RiskgateEventType): boolean;
  /**
   * The outbox entries that carry `event` (a sink over the outbox: one delivery per receiver),
   * for a feature that writes them in its change's own transaction (`SubmitOptions.companion`)
   * instead of emitting after it. Undefined: this sink does not write to the outbox (emit after
   * the change commits). Empty when the event goes nowhere.
   */
  entries?(event: RiskgateEvent): readonly Entry[] | undefined;
}

/**
 * The part of an event id that stands for `text` an operator typed (a list value): 16 hex digits
 * of its SHA-256. The raw value may hold any character (U+202E, a CJK id), and an event id travels
 * as a header, which carries Latin-1 at most; the value itself is in the event's `data`.
 */
export function eventIdPart(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/** A sink for a riskgate with no receivers configured. */
export const NO_EVENTS: EventSink<never> = { emit: async () => {}, wants: () => false, entries: () => [] };

/**
 * A sink for the features started before the one that receives events (the webhooks start after
 * the outbox, which the lock-outs and lists precede): events go nowhere until `attach`.
 */
export function laterEventSink<Entry = unknown>(): EventSink<Entry> & {
  attach(target: EventSink<Entry>): void;
} {
  let target: EventSink<Entry> = NO_EVENTS;
  return {
    emit: (event) => target.emit(event),
    wants: (type) => target.wants(type),
    entries: (event) => target.entries?.(event),
    attach(sink) {
      target = sink;
    },
  };
}

/** A sink that keeps every event (tests). */
export function collectingEventSink(into: RiskgateEvent[]): EventSink<never> {
  return {
    emit: async (event) => void into.push(event),
    wants: () => true,
  };
}
