import { withTimeout } from '../timing/with-timeout.ts';
import type {
  CounterOp,
  CounterReadings,
  FeatureStore,
  HistoryEvent,
  HistoryReading,
} from './feature-store.ts';
import type { MemoryFeatureStore } from './memory-feature-store.ts';

/**
 * The embedded feature store with RISKGATE_WORKERS > 1: the counters and history live in the
 * primary's memory, and every worker reads and counts there over the cluster's IPC channel. Kept
 * per worker instead, a stuffing burst spread over N workers would count 1/N of itself on each.
 */

export const FEATURES_REQUEST = 'riskgate:features';
export const FEATURES_REPLY = 'riskgate:features-result';

type Operation =
  | { op: 'readCounters'; ops: CounterOp[]; nowMs: number }
  | { op: 'recordCounters'; ops: CounterOp[]; nowMs: number }
  | { op: 'recordHistory'; events: HistoryEvent[]; cursorMs: number }
  | { op: 'readHistory'; userKey: string; nowMs: number }
  | { op: 'holdFollowerLease'; owner: string; ttlMs: number }
  | { op: 'followerCursor' };

export type FeaturesRequest = { type: typeof FEATURES_REQUEST; id: number } & Operation;
export interface FeaturesReply {
  type: typeof FEATURES_REPLY;
  id: number;
  result?: unknown;
  error?: string;
}

/** In the primary: answers one worker's request from the store. */
export function answerFeaturesRequest(store: MemoryFeatureStore, m: FeaturesRequest): FeaturesReply {
  try {
    let result: unknown;
    switch (m.op) {
      case 'readCounters':
        result = store.readCountersNow(m.ops, m.nowMs);
        break;
      case 'recordCounters':
        store.recordCountersNow(m.ops, m.nowMs);
        break;
      case 'recordHistory':
        store.recordHistoryNow(m.events, m.cursorMs);
        break;
      case 'readHistory':
        result = store.readHistoryNow(m.userKey, m.nowMs);
        break;
      case 'holdFollowerLease':
        result = store.holdFollowerLeaseNow(m.owner, m.ttlMs);
        break;
      case 'followerCursor':
        result = store.followerCursorNow();
        break;
    }
    return { type: FEATURES_REPLY, id: m.id, result };
  } catch (error) {
    return { type: FEATURES_REPLY, id: m.id, error: String(error) };
  }
}

export interface IpcFeatureStoreOptions {
  /** Sends to the primary (`process.send`). */
  send: (message: FeaturesRequest) => boolean;
  /** Longest wait for the primary, milliseconds. Default 1000 (a decision stops waiting sooner). */
  timeoutMs?: number;
}

/** In a worker: the primary's store. Feed it the primary's replies with `receive`. */
export class IpcFeatureStore implements FeatureStore {
  readonly kind = 'ipc';
  readonly durable = false;
  readonly followerCheckpoint = undefined;
  readonly #send: IpcFeatureStoreOptions['send'];
  readonly #timeoutMs: number;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #nextId = 1;

  constructor(options: IpcFeatureStoreOptions) {
    this.#send = options.send;
    this.#timeoutMs = options.timeoutMs ?? 1000;
  }

  /** A reply from the primary; true when it was one of this store's. */
  receive(message: unknown): boolean {
    const m = message as Partial<FeaturesReply> | null;
    if (m?.type !== FEATURES_REPLY || typeof m.id !== 'number') return false;
    const waiter = this.#pending.get(m.id);
    this.#pending.delete(m.id);
    if (m.error !== undefined) waiter?.reject(new Error(m.error));
    else waiter?.resolve(m.result);
    return true;
  }

  #call<T>(operation: Operation): Promise<T> {
    const id = this.#nextId++;
    const reply = new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: (v) => resolve(v as T), reject });
      let sent = false;
      try {
        sent = this.#send({ type: FEATURES_REQUEST, id, ...operation });
      } catch {
        sent = false;
      }
      if (!sent) {
        this.#pending.delete(id);
        reject(new Error('the IPC channel to the primary is closed'));
      }
    });
    return withTimeout(reply, {
      timeoutMs: this.#timeoutMs,
      onTimeout: () => {
        // A reply after this is dropped by receive().
        this.#pending.delete(id);
        return new Error(`the primary did not answer within ${this.#timeoutMs} ms`);
      },
      ref: false,
    });
  }

  readCounters(ops: readonly CounterOp[], nowMs: number): Promise<CounterReadings> {
    return this.#call({ op: 'readCounters', ops: [...ops], nowMs });
  }

  recordCounters(ops: readonly CounterOp[], nowMs: number): Promise<void> {
    return this.#call({ op: 'recordCounters', ops: [...ops], nowMs });
  }

  recordHistory(events: readonly HistoryEvent[], cursorMs: number): Promise<void> {
    return this.#call({ op: 'recordHistory', events: [...events], cursorMs });
  }

  readHistory(userKey: string, nowMs: number): Promise<HistoryReading> {
    return this.#call({ op: 'readHistory', userKey, nowMs });
  }

  holdFollowerLease(owner: string, ttlMs: number): Promise<boolean> {
    return this.#call({ op: 'holdFollowerLease', owner, ttlMs });
  }

  followerCursor(): Promise<number | undefined> {
    return this.#call({ op: 'followerCursor' });
  }

  close(): Promise<void> {
    for (const [, w] of this.#pending) w.reject(new Error('the feature store is closed'));
    this.#pending.clear();
    return Promise.resolve();
  }
}
