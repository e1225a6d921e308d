import { LRUCache } from 'lru-cache';
import type { Label } from '../replay/replay-labels.ts';

/**
 * The decisions this process answered recently, for `POST /feedback`: which caller key made each
 * (only that key, or an operator, may label it) and its labels so far. In-process and bounded in
 * entries: the newest `maxDecisions` within `retentionMs`, the oldest forgotten first. A decision
 * this process did not answer (another replica or worker, before a restart, or pushed out) is
 * unknown here; the decision log keeps every label for good either way.
 */

/** One label given to a decision: what, by which key (its id, never the key), when. */
export interface LabelEvent {
  label: Label;
  labelledBy: string;
  at: string;
}

export interface RecentDecision {
  /** The id of the caller key that asked for the decision (one shared string per key). */
  keyId: string;
  /**
   * Oldest first; the newest is the current label. At most `MAX_LABEL_EVENTS` are kept here.
   * Undefined until the first label: most decisions are never labelled.
   */
  labels?: LabelEvent[];
}

export interface RecentDecisionsOptions {
  /** Most decisions remembered. Default 100,000 (about 14 MB: 140 bytes each, measured). */
  maxDecisions?: number;
  /** How long a decision is remembered, milliseconds. Default 24 h. */
  retentionMs?: number;
}

/** Label events kept per decision in memory (the decision log has all of them). */
export const MAX_LABEL_EVENTS = 16;

export class RecentDecisions {
  readonly #decisions: LRUCache<string, RecentDecision>;

  constructor(options: RecentDecisionsOptions = {}) {
    this.#decisions = new LRUCache<string, RecentDecision>({
      max: options.maxDecisions ?? 100_000,
      ttl: options.retentionMs ?? 24 * 60 * 60 * 1000,
      ttlAutopurge: false,
      // A label does not make a decision young again: retention counts from the answer.
      updateAgeOnGet: false,
    });
  }

  /** Records that the key `keyId` was answered `decisionId` (now: retention counts from here). */
  remember(decisionId: string, keyId: string): void {
    this.#decisions.set(compactId(decisionId), { keyId });
  }

  get(decisionId: string): RecentDecision | undefined {
    return this.#decisions.get(compactId(decisionId));
  }

  /** Appends `event` to a remembered decision's labels; returns them (oldest first). */
  label(decision: RecentDecision, event: LabelEvent): readonly LabelEvent[] {
    decision.labels ??= [];
    decision.labels.push(event);
    if (decision.labels.length > MAX_LABEL_EVENTS) decision.labels.shift();
    return decision.labels;
  }

  get size(): number {
    return this.#decisions.size;
  }
}

/**
 * A UUID's 16 bytes as a fresh 16-character string: the map's key. The id strings riskgate is
 * handed (crypto.randomUUID's) keep about 420 bytes more of heap alive each than a flat copy
 * (measured: 582 against 158 bytes per remembered decision), and the bytes fold letter case.
 */
function compactId(uuid: string): string {
  return Buffer.from(uuid.replaceAll('-', ''), 'hex').toString('latin1');
}
