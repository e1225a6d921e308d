import { LRUCache } from 'lru-cache';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { DecisionMemory, LabelEvent, LabelOutcome } from './decision-memory.ts';

/**
 * The decisions this process answered recently, for `POST /feedback`: which caller key made each
 * (only that key, or an operator, may label it) and its labels so far. In-process and bounded in
 * entries: the newest `maxDecisions` within `retentionMs`, the oldest forgotten first. With
 * RISKGATE_WORKERS > 1 the primary keeps one for all its workers (ipc-recent-decisions.ts). A
 * decision another replica answered (or one from before a restart, or pushed out) is unknown
 * here; the decision log keeps every label for good either way.
 */

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
  /** Where ages are read from. Default {@link systemClock}. */
  clock?: Pick<Clock, 'monotonicMs'>;
}

/** Label events kept per decision in memory (the decision log has all of them). */
export const MAX_LABEL_EVENTS = 16;

export class RecentDecisions implements DecisionMemory {
  readonly #decisions: LRUCache<string, RecentDecision>;

  constructor(options: RecentDecisionsOptions = {}) {
    const clock = options.clock ?? systemClock;
    this.#decisions = new LRUCache<string, RecentDecision>({
      max: options.maxDecisions ?? 100_000,
      ttl: options.retentionMs ?? 24 * 60 * 60 * 1000,
      ttlAutopurge: false,
      // A label does not make a decision young again: retention counts from the answer.
      updateAgeOnGet: false,
      // Read the clock at every set and get (a vDSO call): lru-cache's default keeps the time for
      // 1 ms behind a timer, and that timer, armed on nearly every decision at a low rate, woke the
      // event loop for a turn of its own per decision.
      ttlResolution: 0,
      perf: { now: () => clock.monotonicMs() },
    });
  }

  /** Records that the key `keyId` was answered `decisionId` (now: retention counts from here). */
  remember(decisionId: string, keyId: string): void {
    this.#decisions.set(compactId(decisionId), { keyId });
  }

  get(decisionId: string): RecentDecision | undefined {
    return this.#decisions.get(compactId(decisionId));
  }

  /**
   * Appends `event` to `decisionId`'s labels when its key asked for it, or any decision when
   * `operator` (an unknown one is labelled without being remembered).
   */
  labelNow(decisionId: string, event: LabelEvent, operator: boolean): LabelOutcome {
    const decision = this.get(decisionId);
    if (!operator && decision?.keyId !== event.labelledBy) return { labelled: false };
    if (decision === undefined) return { labelled: true, known: false, history: [event] };
    const previous = decision.labels?.at(-1);
    decision.labels ??= [];
    decision.labels.push(event);
    if (decision.labels.length > MAX_LABEL_EVENTS) decision.labels.shift();
    return { labelled: true, known: true, previous, history: decision.labels };
  }

  label(decisionId: string, event: LabelEvent, operator: boolean): Promise<LabelOutcome> {
    return Promise.resolve(this.labelNow(decisionId, event, operator));
  }

  answered(decisionId: string, keyId: string): Promise<boolean> {
    return Promise.resolve(this.get(decisionId)?.keyId === keyId);
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
export function compactId(uuid: string): string {
  // The canonical shape read in place (every answered decision passes here, issue 32); anything
  // else the way Buffer reads hex, whose result the fast path matches byte for byte.
  if (
    uuid.length !== 36 ||
    uuid.charCodeAt(8) !== DASH ||
    uuid.charCodeAt(13) !== DASH ||
    uuid.charCodeAt(18) !== DASH ||
    uuid.charCodeAt(23) !== DASH
  )
    return slowCompactId(uuid);
  const bytes: number[] = [];
  for (const at of BYTE_OFFSETS) {
    const hi = hexValue(uuid.charCodeAt(at));
    const lo = hexValue(uuid.charCodeAt(at + 1));
    if (hi < 0 || lo < 0) return slowCompactId(uuid);
    bytes.push((hi << 4) | lo);
  }
  return String.fromCharCode(...bytes);
}

/** Where each of a canonical UUID's 16 bytes starts (`8-4-4-4-12` hex digits). */
const BYTE_OFFSETS = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34] as const;
const DASH = 0x2d;

/** A hex digit's value (either case), or -1. */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

function slowCompactId(uuid: string): string {
  return Buffer.from(uuid.replaceAll('-', ''), 'hex').toString('latin1');
}
