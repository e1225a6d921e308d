import type { LifecycleLog } from '../lifecycle/component.ts';
import type { Clock, ClockTimer } from '../timing/clock.ts';
import type { AskUserStore } from './ask-user-store.ts';

/**
 * The "was this you?" links' retention (docs/ask-user.md): a link is kept `keepExpiredMs` past its
 * expiry (its page says "expired" rather than "invalid" to a user who clicks late), then deleted.
 * Bounded: every `everyMs` a round deletes at most `batch` rows a statement and `maxBatches`
 * statements, the ones that expired first; what a round leaves, the next takes. A round that fails
 * (the control database did not answer) is counted and logged, and the next one tries again. The
 * answers themselves are kept elsewhere (the decision's outcome, the audit of its lock-out): a
 * pruned row only stops a stale link from being told apart from a forged one.
 */
export interface AskUserPruningOptions {
  store: Pick<AskUserStore, 'pruneExpired'>;
  clock: Clock;
  log: LifecycleLog;
  /** How long a link is kept past its expiry, ms. Default 7 days. */
  keepExpiredMs?: number | undefined;
  /** Time between rounds, ms (the first one comes this long after start). Default 10 minutes. */
  everyMs?: number | undefined;
  /** Most rows one statement deletes. Default 500. */
  batch?: number | undefined;
  /** Most statements one round runs. Default 20. */
  maxBatches?: number | undefined;
}

/** What the pruning did, for the metrics. */
export interface AskUserPruningCounts {
  /** Links deleted past their expiry and its keep. */
  pruned: number;
  /** Rounds that failed (the control database did not answer). */
  failures: number;
}

export class AskUserPruning {
  readonly counts: AskUserPruningCounts = { pruned: 0, failures: 0 };
  readonly #o: Required<AskUserPruningOptions>;
  #timer: ClockTimer | undefined;
  #round: Promise<void> | undefined;
  #stopped = false;

  constructor(o: AskUserPruningOptions) {
    this.#o = {
      ...o,
      keepExpiredMs: o.keepExpiredMs ?? 7 * 24 * 3_600_000,
      everyMs: o.everyMs ?? 10 * 60_000,
      batch: o.batch ?? 500,
      maxBatches: o.maxBatches ?? 20,
    };
  }

  /** Schedules the rounds. */
  start(): void {
    this.#schedule();
  }

  /** One round now: deletes what expired before now minus the keep, bounded; how many it deleted. */
  async prune(): Promise<number> {
    const { store, clock, batch, maxBatches, keepExpiredMs } = this.#o;
    const beforeMs = clock.nowMs() - keepExpiredMs;
    let deleted = 0;
    try {
      for (let i = 0; i < maxBatches && !this.#stopped; i++) {
        const n = await store.pruneExpired(beforeMs, batch);
        deleted += n;
        this.counts.pruned += n;
        if (n < batch) break;
      }
    } catch (error) {
      this.counts.failures++;
      this.#o.log({
        level: 'warn',
        msg: 'ask-user: expired links not pruned this round (the control database did not answer)',
        error: String(error),
      });
    }
    return deleted;
  }

  /** No more rounds; waits up to `waitMs` for the one running (it stops after its statement). */
  async stop(waitMs: number): Promise<void> {
    this.#stopped = true;
    const { clock } = this.#o;
    clock.clearTimeout(this.#timer);
    if (this.#round === undefined) return;
    let timer: ClockTimer | undefined;
    await Promise.race([this.#round, new Promise<void>((r) => (timer = clock.setTimeout(r, waitMs)))]);
    clock.clearTimeout(timer);
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = this.#o.clock.setTimeout(() => {
      this.#round = this.prune().then(() => {
        this.#round = undefined;
        this.#schedule();
      });
    }, this.#o.everyMs);
    this.#timer.unref();
  }
}
