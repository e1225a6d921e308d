import type { ActionSpec } from '../actions/admin-actions.ts';
import type { RiskgateDatabase } from '../database/database.ts';
import {
  type AppendCompanion,
  type ClaimOptions,
  dueAtMs,
  type OutboxEntry,
  type OutboxListFilter,
  type OutboxStats,
  type OutboxStatus,
  type OutboxStore,
  type SettleAndClaim,
  type SettledClaim,
  settleThenClaim,
  WEBHOOK_ACTION_TYPE,
} from './outbox-store.ts';

/**
 * The outbox's store in this process's memory (RISKGATE_OUTBOX=memory): the same contract as the
 * database store (leases, per-user order, dead letters, operator retry and drop), so one
 * outbox engine serves every mode, but nothing outlives the process. A crash or a restart loses
 * what is not delivered; the outbox reports those failed (`process_crash` on a fatal error,
 * `shutdown` past the drain) when it still can, since no later process will deliver them.
 *
 * Bounded: past `maxPending` undelivered actions an append is refused (the answer says
 * `queue_refused`); only the newest `maxFinal` ended ones are kept for operators and deduplication.
 *
 * A claim looks only at what is due: each user's pending actions are a queue whose head alone can
 * be due, and the heads wait in a heap by due time (the next attempt, or the end of a lease),
 * earliest first. A full store in an Admin outage (10 000
 * actions waiting for their retries) costs a claim one look at the heap, not a walk of them all.
 */

export interface MemoryOutboxStoreOptions {
  /** Undelivered actions held at once; an append past it is refused. Default 10 000. */
  maxPending?: number;
  /** Ended actions (delivered, dead, dropped) kept, the oldest forgotten first. Default 10 000. */
  maxFinal?: number;
  /**
   * Where an append's companions write their rows (a lock-out's record), in a transaction of
   * their own: not atomic with the entries, which live in memory. None: an append with
   * companions is refused.
   */
  database?: RiskgateDatabase | undefined;
}

/** An append refused because the memory store holds `maxPending` undelivered actions already. */
export class OutboxFullError extends Error {
  constructor(maxPending: number) {
    super(`the memory outbox holds ${maxPending} undelivered actions`);
    this.name = 'OutboxFullError';
  }
}

/** An entry as the store keeps it: what a reader sees, and its place, lease and heap version. */
interface Slot extends OutboxEntry {
  /** Append order: a user's actions go in this order. */
  seq: number;
  leaseUntilMs: number;
  /** Bumped whenever its due time changes or it stops being due: older heap items are stale. */
  version: number;
}

/** A head of a user's queue in the heap: due at `atMs`, valid while `version` is the slot's. */
interface DueItem {
  slot: Slot;
  atMs: number;
  version: number;
}

/** Earliest due first; the older action first at the same time. */
function before(a: DueItem, b: DueItem): boolean {
  return a.atMs < b.atMs || (a.atMs === b.atMs && a.slot.seq < b.slot.seq);
}

/** A binary min-heap of due items. */
class DueHeap {
  items: DueItem[] = [];

  push(item: DueItem): void {
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(a[i]!, a[parent]!)) break;
      [a[i], a[parent]] = [a[parent]!, a[i]!];
      i = parent;
    }
  }

  peek(): DueItem | undefined {
    return this.items[0];
  }

  pop(): DueItem | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last !== undefined) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let min = i;
        if (l < a.length && before(a[l]!, a[min]!)) min = l;
        if (r < a.length && before(a[r]!, a[min]!)) min = r;
        if (min === i) break;
        [a[i], a[min]] = [a[min]!, a[i]!];
        i = min;
      }
    }
    return top;
  }
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
  readonly #database: RiskgateDatabase | undefined;
  readonly #slots = new Map<string, Slot>();
  readonly #pending = new Map<string, Slot>();
  /** Each user's pending slots in append order (`seq`): only the head may be due. */
  readonly #queues = new Map<string, Slot[]>();
  #due = new DueHeap();
  /** Ended slots, least recently ended first (the order they are forgotten in). */
  readonly #final = new Map<string, Slot>();
  /** Ended slots whose outcome line is not confirmed, least recently ended first. */
  readonly #unlogged = new Map<string, Slot>();
  #seq = 0;
  #closed = false;

  constructor(options: MemoryOutboxStoreOptions = {}) {
    this.#maxPending = options.maxPending ?? 10_000;
    this.#maxFinal = options.maxFinal ?? 10_000;
    this.#database = options.database;
  }

  async warnings(): Promise<string[]> {
    return [
      'RISKGATE_OUTBOX=memory: promised actions live in this process only; a crash or restart loses those not yet delivered',
    ];
  }

  async append(
    specs: readonly ActionSpec[],
    nowMs: number,
    companions: readonly AppendCompanion[] = [],
  ): Promise<boolean[]> {
    if (this.#closed) throw new Error('the outbox is closed');
    // All or nothing, as a store's transaction: the new ones must all fit.
    const fresh = new Set(specs.filter((s) => !this.#slots.has(s.id)).map((s) => s.id));
    if (this.#pending.size + fresh.size > this.#maxPending) throw new OutboxFullError(this.#maxPending);
    if (companions.length > 0) {
      const database = this.#database;
      if (database === undefined) throw new Error('the memory outbox has no database for the companion rows');
      await database.db.transaction().execute(async (tx) => {
        for (const c of companions) await c.write(tx, nowMs);
      });
    }
    return specs.map((spec) => {
      if (this.#slots.has(spec.id)) return false;
      const atMs = dueAtMs(spec, nowMs);
      const slot: Slot = {
        seq: ++this.#seq,
        spec,
        status: 'pending',
        attempts: 0,
        createdAtMs: atMs,
        horizonStartMs: atMs,
        nextAttemptAtMs: atMs,
        updatedAtMs: nowMs,
        lastError: undefined,
        reason: undefined,
        owner: undefined,
        leaseUntilMs: 0,
        version: 0,
      };
      this.#slots.set(spec.id, slot);
      this.#pending.set(spec.id, slot);
      const queue = this.#queues.get(spec.orderingKey);
      if (queue === undefined) this.#queues.set(spec.orderingKey, [slot]);
      else queue.push(slot);
      this.#reschedule(slot);
      return true;
    });
  }

  async claim(
    owner: string,
    limit: number,
    nowMs: number,
    leaseMs: number,
    options: ClaimOptions = {},
  ): Promise<OutboxEntry[]> {
    const out: OutboxEntry[] = [];
    const passedOver: DueItem[] = [];
    for (let top = this.#due.peek(); top !== undefined && top.atMs <= nowMs; top = this.#due.peek()) {
      if (out.length >= limit) break;
      this.#due.pop();
      const { slot } = top;
      if (top.version !== slot.version || !this.#isHead(slot)) continue; // stale
      if (this.#blockedUntil(slot) > nowMs) {
        // An operator's retry put it ahead of its user's entry in flight: due when that one ends.
        this.#reschedule(slot);
        continue;
      }
      if (options.skipWebhooks === true && slot.spec.type === WEBHOOK_ACTION_TYPE) {
        passedOver.push(top);
        continue;
      }
      slot.owner = owner;
      slot.leaseUntilMs = nowMs + leaseMs;
      slot.attempts++;
      slot.updatedAtMs = nowMs;
      // Due again when the lease runs out (its owner died), unless it is given back or ended first.
      this.#reschedule(slot);
      out.push(entryOf(slot));
    }
    for (const item of passedOver) this.#due.push(item);
    return out;
  }

  /** Whether `slot` is pending and first of its user's queue: the one of its user that may be due. */
  #isHead(slot: Slot): boolean {
    return slot.status === 'pending' && this.#queues.get(slot.spec.orderingKey)?.[0] === slot;
  }

  /**
   * Until when another entry of `slot`'s user is leased (0: none): a user's entries never run
   * side by side, even when an operator's retry puts an older one back ahead of one in flight.
   */
  #blockedUntil(slot: Slot): number {
    let until = 0;
    for (const other of this.#queues.get(slot.spec.orderingKey) ?? []) {
      if (other !== slot && other.leaseUntilMs > until) until = other.leaseUntilMs;
    }
    return until;
  }

  /** Reschedules the head of `slot`'s user's queue when it is another slot (`slot`'s lease changed). */
  #rescheduleHeadBeside(slot: Slot): void {
    const head = this.#queues.get(slot.spec.orderingKey)?.[0];
    if (head !== undefined && head !== slot) this.#reschedule(head);
  }

  /** Puts `slot` in the heap at its due time if it is a head (its older heap items go stale). */
  #reschedule(slot: Slot): void {
    slot.version++;
    if (!this.#isHead(slot)) return;
    this.#due.push({
      slot,
      atMs: Math.max(slot.nextAttemptAtMs, slot.leaseUntilMs, this.#blockedUntil(slot)),
      version: slot.version,
    });
    // Stale items (ended leases, earlier due times) are dropped once they outnumber the live ones.
    if (this.#due.items.length > 4 * this.#queues.size + 1000) {
      const heap = new DueHeap();
      for (const item of this.#due.items) {
        if (item.version === item.slot.version && this.#isHead(item.slot)) heap.push(item);
      }
      this.#due = heap;
    }
  }

  /** The pending slot `id` leased by `owner`, if it is. */
  #held(id: string, owner: string): Slot | undefined {
    const slot = this.#pending.get(id);
    return slot?.owner === owner ? slot : undefined;
  }

  /** Ends a pending or dead slot: final, its line to be told, the oldest ended ones forgotten. */
  #end(slot: Slot, status: OutboxStatus, reason: string | undefined, nowMs: number): void {
    const id = slot.spec.id;
    if (slot.status === 'pending') this.#leaveQueue(slot);
    slot.status = status;
    slot.reason = reason;
    slot.leaseUntilMs = 0;
    slot.updatedAtMs = nowMs;
    slot.version++;
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

  /** Takes a pending slot out of its user's queue; the next one, if it is now the head, is due. */
  #leaveQueue(slot: Slot): void {
    const user = slot.spec.orderingKey;
    const queue = this.#queues.get(user);
    if (queue === undefined) return;
    const at = queue.indexOf(slot);
    if (at >= 0) queue.splice(at, 1);
    if (queue.length === 0) this.#queues.delete(user);
    // The head is due now, or (when `slot` was a leased entry behind it) no longer held back.
    else if (at >= 0) this.#reschedule(queue[0]!);
  }

  async complete(id: string, owner: string, nowMs: number): Promise<boolean> {
    const slot = this.#held(id, owner);
    if (slot === undefined) return false;
    this.#end(slot, 'delivered', undefined, nowMs);
    return true;
  }

  settleAndClaim(step: SettleAndClaim): Promise<SettledClaim> {
    return settleThenClaim(this, step);
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
    this.#reschedule(slot);
    this.#rescheduleHeadBeside(slot);
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
      this.#reschedule(slot);
      this.#rescheduleHeadBeside(slot);
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
    this.#pending.set(id, slot);
    // Back in its user's queue in its original place: a user's order is the order of the answers.
    const user = slot.spec.orderingKey;
    const queue = this.#queues.get(user) ?? [];
    this.#queues.set(user, queue);
    const at = queue.findIndex((s) => s.seq > slot.seq);
    queue.splice(at < 0 ? queue.length : at, 0, slot);
    this.#reschedule(slot);
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
