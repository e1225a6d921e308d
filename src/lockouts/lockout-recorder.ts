import type { CompiledQuery } from 'kysely';
import type { ActionOutcome, AppendCompanion, DeliveryCompanion } from '../actions/action-dispatcher.ts';
import type { ActionSpec } from '../actions/admin-actions.ts';
import { emitCommitted } from '../events/emit-committed.ts';
import type { EventSink, RiskgateEvent } from '../events/riskgate-event.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { sleep } from '../timing/sleep.ts';
import { type LockoutSink, OPERATOR_UNLOCK_SUFFIX, type PlannedLockout } from './lockout-record.ts';
import { LockoutStore } from './lockout-store.ts';

type Item = { kind: 'planned'; lockout: PlannedLockout } | { kind: 'outcome'; outcome: ActionOutcome };

export interface LockoutRecorderOptions {
  store: LockoutStore;
  /** Told `lockout.created` (a lock-out queued) and `lockout.ended` (a temporary one ran out). */
  events: EventSink<ActionSpec>;
  log: (line: Record<string, unknown>) => void;
  /** Writes waiting at once; past it a write is dropped (counted, logged). Default 10 000. */
  maxQueued?: number;
  /** Tries of one write before it is dropped (logged). Default 5. */
  maxTries?: number;
  /** First wait after a failed write, milliseconds; doubles each try. Default 200. */
  retryDelayMs?: number;
  /** Wall time of the records, monotonic time and timers of the retries. Default: the system clock. */
  clock?: Clock;
}

/**
 * The lock-out records' writes. A promised lock-out's record and its `lockout.created` event are
 * written with its actions, in the outbox append's transaction (`companion`): they exist together
 * or not at all, and none is dropped under load. The rest goes off the hot path: a decision tells
 * the lock-outs it did not promise (withheld, failed: `planned`) and the outbox each final outcome
 * (`outcome`) without waiting, and one writer applies them in order from a bounded queue, each
 * write tried a bounded number of times; what it drops is counted and logged. The unlocks that end
 * temporary lock-outs are in the outbox, durable, and their gate (src/lockouts/unlock-gate.ts)
 * asks the outbox, not the records, whether the lock-out was applied.
 */
export class LockoutRecorder implements LockoutSink {
  readonly #o: Required<LockoutRecorderOptions>;
  #queue: Item[] = [];
  #writing: Promise<void> | undefined;
  #dropped = 0;

  constructor(options: LockoutRecorderOptions) {
    this.#o = { maxQueued: 10_000, maxTries: 5, retryDelayMs: 200, clock: systemClock, ...options };
  }

  /** Writes dropped: the queue was full, or a write failed every try. */
  get dropped(): number {
    return this.#dropped;
  }

  planned(lockouts: readonly PlannedLockout[]): void {
    for (const lockout of lockouts) this.#push({ kind: 'planned', lockout });
  }

  companion(lockouts: readonly PlannedLockout[]): AppendCompanion {
    const { events } = this.#o;
    const created = events.wants('lockout.created')
      ? lockouts.map((l) => lockoutEvent('lockout.created', l.decisionId, l.userId, l.rule))
      : [];
    // A sink over the outbox gives its entries for this transaction; another one is emitted after.
    const entries = created.map((e) => events.entries?.(e));
    return {
      specs: entries.flatMap((e) => e ?? []),
      write: async (tx, nowMs) => {
        const store = LockoutStore.within(tx);
        for (const l of lockouts) await store.add(l, nowMs);
      },
      // One insert each, unless one must read first (an escalation): then `write` runs.
      statements: (db, nowMs) => {
        const store = LockoutStore.within(db);
        const statements = lockouts.map((l) => store.addStatement(l, nowMs));
        return statements.every((s): s is CompiledQuery => s !== undefined) ? statements : undefined;
      },
      committed: () => {
        for (const [i, event] of created.entries()) {
          if (entries[i] !== undefined) continue;
          void emitCommitted(events, event).then((ok) => {
            if (!ok)
              this.#o.log({
                level: 'error',
                msg: 'lockout.created lost: not queued after retries',
                lockoutId: event.id,
              });
          });
        }
      },
    };
  }

  /**
   * The outbox's `delivery`: a lock's `locked` written in the transaction that completes its entry
   * (issue 32: one commit, not a second transaction after it), so the lock's `done` outcome comes
   * `recorded` and is not written again. Exactly when the entry is delivered: never before it, and
   * never left `queued` after it.
   */
  readonly delivery: DeliveryCompanion = {
    types: ['lock_out_user'],
    statement: (db, delivery, delivered) => LockoutStore.within(db).lockedStatement(delivery, delivered),
  };

  /**
   * An action's final outcome (the outbox's `onOutcome`); only lock-outs and unlocks are kept, and
   * not one whose record its completion wrote (`recorded`: `delivery`).
   */
  outcome(outcome: ActionOutcome, recorded = false): void {
    if (recorded) return;
    if (outcome.type === 'lock_out_user' || outcome.type === 'unlock_user')
      this.#push({ kind: 'outcome', outcome });
  }

  /** Resolves once what was told so far is written (or dropped), or after `timeoutMs`. */
  async flush(timeoutMs: number): Promise<void> {
    const { clock } = this.#o;
    const deadline = clock.monotonicMs() + timeoutMs;
    while (this.#writing !== undefined && clock.monotonicMs() < deadline) {
      await Promise.race([
        this.#writing,
        sleep(Math.max(1, deadline - clock.monotonicMs()), undefined, clock),
      ]);
    }
  }

  #push(item: Item): void {
    if (this.#queue.length >= this.#o.maxQueued) {
      this.#dropped++;
      this.#o.log({
        level: 'warn',
        msg: 'lock-out record dropped: the write queue is full',
        ...describe(item),
      });
      return;
    }
    this.#queue.push(item);
    this.#kick();
  }

  #kick(): void {
    this.#writing ??= this.#drain().finally(() => {
      this.#writing = undefined;
      // Told between the last write and now.
      if (this.#queue.length > 0) this.#kick();
    });
  }

  async #drain(): Promise<void> {
    // A turn later: the decision's answer goes out first.
    await new Promise((r) => setImmediate(r));
    for (let item = this.#queue.shift(); item !== undefined; item = this.#queue.shift()) {
      if (!isLockDone(item)) {
        await this.#write(item);
        continue;
      }
      // The lock-outs done one after another in the queue (a turn's completions): one statement.
      const run = [item.outcome];
      while (
        run.length < LOCKS_DONE_PER_STATEMENT &&
        this.#queue[0] !== undefined &&
        isLockDone(this.#queue[0])
      )
        run.push((this.#queue.shift() as Item & { kind: 'outcome' }).outcome);
      await this.#writeLocksDone(run);
    }
  }

  /**
   * `done` lock outcomes in one statement when it can (`LockoutStore.lockedAll`); each one it did
   * not set, or all of them when it failed, through `#write` as before (its tries, its drop count).
   * Safe in any grouping: each outcome only moves its own record from `queued`/`failed` to
   * `locked`, and is told at least once anyway.
   */
  async #writeLocksDone(outcomes: ActionOutcome[]): Promise<void> {
    let rest = outcomes;
    if (outcomes.length > 1) {
      try {
        rest = await this.#o.store.lockedAll(outcomes, this.#o.clock.nowMs());
      } catch {
        // Tried again one by one, each with its own tries.
      }
    }
    for (const outcome of rest) await this.#write({ kind: 'outcome', outcome });
  }

  async #write(item: Item): Promise<void> {
    for (let tries = 1; ; tries++) {
      try {
        await this.#apply(item);
        return;
      } catch (error) {
        if (tries >= this.#o.maxTries) {
          this.#dropped++;
          this.#o.log({
            level: 'error',
            msg: 'lock-out record not written',
            error: String(error),
            ...describe(item),
          });
          return;
        }
        await sleep(this.#o.retryDelayMs * 2 ** (tries - 1), undefined, this.#o.clock);
      }
    }
  }

  async #apply(item: Item): Promise<void> {
    const { store, events } = this.#o;
    const now = this.#o.clock.nowMs();
    if (item.kind === 'planned') {
      const l = item.lockout;
      await store.add(l, now);
      if (l.status === 'queued')
        await events.emit(lockoutEvent('lockout.created', l.decisionId, l.userId, l.rule));
      return;
    }
    const o = item.outcome;
    await store.applyOutcome(o, now);
    const scheduledEnd =
      o.type === 'unlock_user' &&
      o.status === 'done' &&
      o.reason === undefined &&
      !o.key.endsWith(OPERATOR_UNLOCK_SUFFIX);
    if (scheduledEnd)
      await events.emit(lockoutEvent('lockout.ended', o.decisionId, o.target, undefined, 'schedule'));
  }
}

/** Most lock outcomes set in one statement (far below either engine's parameter limit). */
const LOCKS_DONE_PER_STATEMENT = 200;

function isLockDone(item: Item): item is Item & { kind: 'outcome' } {
  return item.kind === 'outcome' && item.outcome.type === 'lock_out_user' && item.outcome.status === 'done';
}

/** A lock-out event; its id is the record's and the type's, so a retried emit is one event. */
export function lockoutEvent(
  type: 'lockout.created' | 'lockout.ended',
  id: string,
  userId: string,
  rule?: string,
  endedBy?: string,
): RiskgateEvent {
  return {
    id: `${type}:${id}`,
    type,
    at: new Date().toISOString(),
    data: {
      lockoutId: id,
      decisionId: id,
      userId,
      ...(rule !== undefined && { rule }),
      ...(endedBy !== undefined && { endedBy }),
    },
  };
}

function describe(item: Item): Record<string, unknown> {
  return item.kind === 'planned'
    ? { lockoutId: item.lockout.decisionId, userId: item.lockout.userId }
    : { actionId: item.outcome.key, status: item.outcome.status };
}
