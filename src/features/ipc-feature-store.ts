import { type IpcReply, type IpcRequest, type IpcRequests, replyTo } from '../ipc/ipc-requests.ts';
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

type Operation =
  | { op: 'readCounters'; ops: CounterOp[]; nowMs: number }
  | { op: 'recordCounters'; ops: CounterOp[]; nowMs: number }
  | { op: 'recordHistory'; events: HistoryEvent[]; cursorMs: number }
  | { op: 'readHistory'; userKey: string; nowMs: number }
  | { op: 'holdFollowerLease'; owner: string; ttlMs: number }
  | { op: 'followerCursor' };

type FeaturesMessage = { type: typeof FEATURES_REQUEST } & Operation;
export type FeaturesRequest = IpcRequest<FeaturesMessage>;

/** In the primary: answers one worker's request from the store. */
export function answerFeaturesRequest(store: MemoryFeatureStore, m: FeaturesRequest): IpcReply {
  return replyTo(m, () => {
    switch (m.op) {
      case 'readCounters':
        return store.readCountersNow(m.ops, m.nowMs);
      case 'recordCounters':
        return store.recordCountersNow(m.ops, m.nowMs);
      case 'recordHistory':
        return store.recordHistoryNow(m.events, m.cursorMs);
      case 'readHistory':
        return store.readHistoryNow(m.userKey, m.nowMs);
      case 'holdFollowerLease':
        return store.holdFollowerLeaseNow(m.owner, m.ttlMs);
      case 'followerCursor':
        return store.followerCursorNow();
    }
  });
}

export interface IpcFeatureStoreOptions {
  /** The worker's request channel to its primary (its timeout: default 1000 ms, a decision stops waiting sooner). */
  requests: IpcRequests;
}

/** In a worker: the primary's store, over the worker's request channel. */
export class IpcFeatureStore implements FeatureStore {
  readonly kind = 'ipc';
  readonly durable = false;
  readonly followerCheckpoint = undefined;
  readonly #requests: IpcRequests;

  constructor(options: IpcFeatureStoreOptions) {
    this.#requests = options.requests;
  }

  #call<T>(operation: Operation): Promise<T> {
    const message: FeaturesMessage = { type: FEATURES_REQUEST, ...operation };
    return this.#requests.request<T, FeaturesMessage>(message, (why) => new Error(why));
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
    return Promise.resolve();
  }
}
