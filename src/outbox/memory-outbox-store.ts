import type { ActionSpec } from '../actions/admin-actions.ts';
import type {
  OutboxEntry,
  OutboxListFilter,
  OutboxStats,
  OutboxStatus,
  OutboxStore,
} from './outbox-store.ts';

/**
 * The outbox's store in this process's memory (RISKGATE_OUTBOX=memory): the same contract as the
 * SQLite and Redis stores (leases, per-user order, dead letters, operator retry and drop), so one
 * outbox engine serves every mode, but nothing outlives the process. A crash or a restart loses
 * what is not delivered; the outbox reports those failed (`process_crash` on a fatal error,
 * `shutdown` past the drain) when it still can, since no later process will deliver them.
 *
 * Bounded: past `maxPending` undelivered actions an append is refused (the answer says
 * `queue_refused`); only the newest `maxFinal` ended ones are kept for operators and deduplication.
 */

export interface MemoryOutboxStoreOptions {
  /** Undelivered actions held at once; an append past it is refused. Default 10 000. */
  maxPending?: number;
  /** Ended actions (delivered, dead, dropped) kept, the oldest forgotten first. Default 10 000. */
  maxFinal?: number;
}

/** An append refused because the memory store holds `maxPending` undelivered actions already. */
export class OutboxFullError extends Error {
  constructor(maxPending: number) {
    super(`the memory outbox holds ${maxPending} undelivered actions`);
    this.name = 'OutboxFullError';
  }
}

interface Slot {
  seq: number;
  spec: ActionSpec;
  status: OutboxStatus;
  attempts: number;
  createdAtMs: number;
  horizonStartMs: number;
  nextAttemptAtMs: number;
  updatedAtMs: number;
  lastError: string | undefined;
  reason: string | undefined;
  owner: string | undefined;
  leaseUntilMs: number;
}

function entryOf(s: Slot): OutboxEntry {
  return {
    spec: s.spec,
    status: s.status,
    attempts: s.attempts,
    createdAtMs: s.createdAtMs,
    horizonStartMs: s.horizonStartMs,
    nextAttemptAtMs: s.nextAttemptAtMs,
    updatedAtMs: s.updatedAtMs,
    lastError: s.lastError,
    reason: s.reason,
    owner: s.owner,
  };
}

export class MemoryOutboxStore implements OutboxStore {
  readonly durable = false;
  readonly #maxPending: number;
  readonly #maxFinal: number;
  readonly #slots = new Map<string, Slot>();
  /** Pending slots in append order (`seq`): the order claims look at them. */
  #pending = new Map<string, Slot>();
  /** Ended slots, least recently ended first (the order they are forgotten in). */
  readonly #final = new Map<string, Slot>();
  /** Ended slots whose outcome line is not confirmed, least recently ended first. */
  readonly #unlogged = new Map<string, Slot>();
  #seq = 0;
  #closed = false;

  constructor(options: MemoryOutboxStoreOptions = {}) {
    this.#maxPending = options.maxPending ?? 10_000;
    this.#maxFinal = options.maxFinal ?? 10_000;
  }

  async warnings(): Promise<string[]> {
    return [
      'RISKGATE_OUTBOX=memory: promised actions live in this process only; a crash or restart loses those not yet delivered',
    ];
  }

  async append(specs: readonly ActionSpec[], nowMs: number): Promise<boolean[]> {
    if (this.#closed) throw new Error('the outbox is closed');
    // All or nothing, as a store's transaction: the new ones must all fit.
    const fresh = new Set(specs.filter((s) => !this.#slots.has(s.id)).map((s) => s.id));
    if (this.#pending.size + fresh.size > this.#maxPending) throw new OutboxFullError(this.#maxPending);
    return specs.map((spec) => {
      if (this.#slots.has(spec.id)) return false;
      const slot: Slot = {
        seq: ++this.#seq,
        spec,
        status: 'pending',
        attempts: 0,
        createdAtMs: nowMs,
        horizonStartMs: nowMs,
        nextAttemptAtMs: nowMs,
        updatedAtMs: nowMs,
        lastError: undefined,
        reason: undefined,
        owner: undefined,
        leaseUntilMs: 0,
      };
      this.#slots.set(spec.id, slot);
      this.#pending.set(spec.id, slot);
      return true;
    });
  }

  async claim(owner: string, limit: number, nowMs: number, leaseMs: number): Promise<OutboxEntry[]> {
    const out: OutboxEntry[] = [];
    // Only the earliest pending entry of a user may be due: a later one never overtakes it.
    const seenUsers = new Set<string>();
    for (const slot of this.#pending.values()) {
      if (out.length >= limit) break;
      const user = slot.spec.orderingKey;
      if (seenUsers.has(user)) continue;
      seenUsers.add(user);
      if (slot.nextAttemptAtMs > nowMs || slot.leaseUntilMs > nowMs) continue;
      slot.owner = owner;
      slot.leaseUntilMs = nowMs + leaseMs;
      slot.attempts++;
      slot.updatedAtMs = nowMs;
      out.push(entryOf(slot));
    }
    return out;
  }

  /** The pending slot `id` leased by `owner`, if it is. */
  #held(id: string, owner: string): Slot | undefined {
    const slot = this.#pending.get(id);
    return slot?.owner === owner ? slot : undefined;
  }

  /** Ends a pending or dead slot: final, its line to be told, the oldest ended ones forgotten. */
  #end(slot: Slot, status: OutboxStatus, reason: string | undefined, nowMs: number): void {
    const id = slot.spec.id;
    slot.status = status;
    slot.reason = reason;
    slot.leaseUntilMs = 0;
    slot.updatedAtMs = nowMs;
    this.#pending.delete(id);
    this.#final.delete(id);
    this.#final.set(id, slot);
    this.#unlogged.delete(id);
    this.#unlogged.set(id, slot);
    for (const [oldId] of this.#final) {
      if (this.#final.size <= this.#maxFinal) break;
      this.#final.delete(oldId);
      this.#unlogged.delete(oldId);
      this.#slots.delete(oldId);
    }
  }

  async complete(id: string, owner: string, nowMs: number): Promise<boolean> {
    const slot = this.#held(id, owner);
    if (slot === undefined) return false;
    this.#end(slot, 'delivered', undefined, nowMs);
    return true;
  }

  async retryLater(
    id: string,
    owner: string,
    nextAttemptAtMs: number,
    lastError: string | undefined,
    countAttempt: boolean,
    nowMs: number,
  ): Promise<void> {
    const slot = this.#held(id, owner);
    if (slot === undefined) return;
    slot.owner = undefined;
    slot.leaseUntilMs = 0;
    slot.nextAttemptAtMs = nextAttemptAtMs;
    if (lastError !== undefined) slot.lastError = lastError;
    if (!countAttempt) slot.attempts--;
    slot.updatedAtMs = nowMs;
  }

  async deadLetter(id: string, owner: string, reason: string, nowMs: number): Promise<boolean> {
    const slot = this.#held(id, owner);
    if (slot === undefined) return false;
    this.#end(slot, 'dead', reason, nowMs);
    return true;
  }

  async unlogged(limit: number): Promise<OutboxEntry[]> {
    return [...this.#unlogged.values()].slice(0, limit).map(entryOf);
  }

  async markLogged(ids: readonly string[]): Promise<void> {
    for (const id of ids) this.#unlogged.delete(id);
  }

  async leaseOwners(nowMs: number): Promise<string[]> {
    const owners = new Set<string>();
    for (const slot of this.#pending.values()) {
      if (slot.owner !== undefined && slot.leaseUntilMs > nowMs) owners.add(slot.owner);
    }
    return [...owners];
  }

  async releaseOwner(owner: string, nowMs: number): Promise<number> {
    let released = 0;
    for (const slot of this.#pending.values()) {
      if (slot.owner !== owner) continue;
      slot.owner = undefined;
      slot.leaseUntilMs = 0;
      slot.nextAttemptAtMs = nowMs;
      slot.updatedAtMs = nowMs;
      released++;
    }
    return released;
  }

  async list(filter: OutboxListFilter): Promise<OutboxEntry[]> {
    const limit = filter.limit ?? 100;
    const out: OutboxEntry[] = [];
    // Newest first: slots are in append order, and an operator's retry keeps its place.
    const newestFirst = [...this.#slots.values()].sort((a, b) => b.seq - a.seq);
    for (const slot of newestFirst) {
      if (out.length >= limit) break;
      if (filter.status === undefined || slot.status === filter.status) out.push(entryOf(slot));
    }
    return out;
  }

  async get(id: string): Promise<OutboxEntry | undefined> {
    const slot = this.#slots.get(id);
    return slot === undefined ? undefined : entryOf(slot);
  }

  async stats(nowMs: number): Promise<OutboxStats> {
    let dead = 0;
    for (const slot of this.#final.values()) if (slot.status === 'dead') dead++;
    let oldest: number | undefined;
    for (const slot of this.#pending.values()) {
      if (oldest === undefined || slot.createdAtMs < oldest) oldest = slot.createdAtMs;
    }
    return {
      pending: this.#pending.size,
      dead,
      oldestPendingAgeMs: oldest === undefined ? 0 : Math.max(0, nowMs - oldest),
    };
  }

  async retry(id: string, nowMs: number): Promise<boolean> {
    const slot = this.#slots.get(id);
    if (slot === undefined || (slot.status !== 'dead' && slot.status !== 'dropped')) return false;
    slot.status = 'pending';
    slot.reason = undefined;
    slot.nextAttemptAtMs = nowMs;
    slot.horizonStartMs = nowMs;
    slot.owner = undefined;
    slot.leaseUntilMs = 0;
    slot.updatedAtMs = nowMs;
    this.#final.delete(id);
    this.#unlogged.delete(id);
    // Back among the pending in its original place: a user's order is the order of the answers.
    const pending = [...this.#pending.values(), slot].sort((a, b) => a.seq - b.seq);
    this.#pending = new Map(pending.map((s) => [s.spec.id, s]));
    return true;
  }

  async drop(id: string, reason: string, nowMs: number): Promise<boolean> {
    const slot = this.#slots.get(id);
    if (slot === undefined || (slot.status !== 'pending' && slot.status !== 'dead')) return false;
    slot.owner = undefined;
    this.#end(slot, 'dropped', reason, nowMs);
    return true;
  }

  async prune(beforeMs: number): Promise<number> {
    let pruned = 0;
    for (const [id, slot] of this.#final) {
      if (slot.updatedAtMs >= beforeMs || slot.status === 'dead') continue;
      this.#final.delete(id);
      this.#unlogged.delete(id);
      this.#slots.delete(id);
      pruned++;
    }
    return pruned;
  }

  async close(): Promise<void> {
    this.#closed = true;
  }
}
