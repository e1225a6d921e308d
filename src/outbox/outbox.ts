import { hostname } from 'node:os';
import {
  type ActionDispatcher,
  type ActionOutcome,
  type AppendCompanion,
  actionOutcome,
  type DeliveryCompanion,
  type EnqueueResult,
  RETRYABLE_ACTION_FAILURES,
  SUBJECT_MISMATCH_REASON,
  type SubmitOptions,
} from '../actions/action-dispatcher.ts';
import {
  type ActionAdmin,
  type ActionJob,
  type ActionSpec,
  attemptAction,
  type WebhookPoster,
} from '../actions/admin-actions.ts';
import type { FileWatermark } from '../database/file-watermark.ts';
import { isRefusedRow } from '../database/refused-row.ts';
import { isProcessAlive } from '../database/state-lock.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { StoreTimeoutError, withDeadline } from '../store/store-deadline.ts';
import { backoffDelayMs } from '../timing/backoff.ts';
import { type Clock, type ClockTimer, systemClock } from '../timing/clock.ts';
import { sleep } from '../timing/sleep.ts';
import { settlesWithin } from '../timing/with-timeout.ts';
import {
  type DeliveryRecord,
  type OutboxEntry,
  type OutboxStats,
  type OutboxStore,
  WEBHOOK_ACTION_TYPE,
} from './outbox-store.ts';

/**
 * The outbox, riskgate's one action engine: every Admin action a decision promises is written to
 * the store before the answer says `queued`, then delivered from the store by whichever riskgate
 * process leases it:
 * retried with exponential backoff and jitter over a long horizon (honouring `Retry-After`),
 * waiting out an open breaker without spending attempts, one user's actions in order, and ended in
 * exactly one final outcome (`done`, or `failed` once dead-lettered). A process that stops or dies
 * leaves what it has not delivered in the store for the next one.
 *
 * A store that does not answer within the decision's deadline (a stalled database) never holds the
 * answer: the actions are `deferred`, held in a bounded buffer of this process and written when
 * the store answers again (a write that timed out may land late: the id makes it once). Deferred
 * actions still unwritten at shutdown are reported failed (`shutdown`), never dropped silently.
 *
 * Over the memory store (RISKGATE_OUTBOX=memory) nothing is left for a next process: a shutdown
 * also waits for the retries due within its grace period, and what it (or a fatal error) leaves
 * undelivered is reported failed (`shutdown`, `process_crash`).
 */

export interface OutboxOptions {
  store: OutboxStore;
  admin: ActionAdmin;
  /** Carries out the webhook deliveries (`postWebhook`); none: they are dead-lettered. */
  webhooks?: WebhookPoster | undefined;
  /**
   * Told each final outcome (a decision log line, metrics). `recorded`: the `delivery` companion's
   * rows for it were written with its completion (nothing of it is left to write). Must not throw.
   */
  onOutcome: (outcome: ActionOutcome, recorded: boolean) => void;
  /**
   * Rows another feature keeps in step with a delivery (a lock-out's `locked`), written in the
   * completion's transaction by a store that can (`OutboxStore.deliveryRecords`). Default: none.
   */
  delivery?: DeliveryCompanion | undefined;
  /** Told when the store fails (a write refused, a claim failed). */
  onError?: (error: unknown) => void;
  /**
   * Resolves once the outcome lines told so far are written (the decision log's flush): only then
   * are they marked logged in the store, so a crash in between has them told again at the next
   * start (at least once; a consumer dedupes by `key`). Default: at once.
   */
  flushOutcomes?: () => Promise<void>;
  /**
   * Attempts in flight at once in this process. Default 4. Webhook deliveries take at most all
   * but one (at least one), so a slow receiver never holds an Admin action back.
   */
  concurrency?: number;
  /** Timeout of one attempt, milliseconds. Default 5000. */
  attemptTimeoutMs?: number;
  /** First retry delay, milliseconds; doubles each retry. Default 500. */
  baseDelayMs?: number;
  /** Longest retry delay, milliseconds. Default 60 000. */
  maxDelayMs?: number;
  /**
   * How long an action is retried before it is dead-lettered, milliseconds. Default 24 h. A
   * webhook delivery's is shorter when `webhooks.retryHorizonMs` is.
   */
  horizonMs?: number;
  /** How often the store is looked at for entries due (others' retries, expired leases), ms. Default 1000. */
  pollMs?: number;
  /**
   * How long a submit, or a completion with nothing queued behind it, waits for others to share
   * its claim, milliseconds. Default 50 (issue 32: at 200/s each wake-up of the SQLite thread
   * costs several times a back-to-back transaction; bench/RESULTS.md, "the control file's thread
   * per transaction at a low rate").
   */
  claimDelayMs?: number;
  /**
   * The store's SQLite file (src/database/file-watermark.ts): while a poll found nothing pending
   * and nothing was written to the file since, by any process, a poll has nothing to claim and
   * skips its queries (issue 32: an idle riskgate near no CPU), up to `quietFullPollMs`. Default:
   * none (every poll queries).
   */
  watermark?: FileWatermark | undefined;
  /** Longest a quiet outbox goes without a poll that queries the store, ms. Default 10 000. */
  quietFullPollMs?: number;
  /** This process's name on its leases. Default `<hostname>:<pid>:<random>`. */
  owner?: string;
  /**
   * Wall time for what is stored (due times, the horizon), monotonic time for this process's
   * waits, and the timers (src/timing/clock.ts). Default: the system clock.
   */
  clock?: Clock;
  /** Jitter source in [0, 1). Default `Math.random`. */
  random?: () => number;
  /**
   * Actions held in this process while the store does not answer in time; past it a submit is
   * `refused`. Default 10 000.
   */
  maxDeferred?: number;
  /** Timeout of a submit that names none, and of each write of the deferred actions, ms. Default 2000. */
  submitTimeoutMs?: number;
  /**
   * Asked before each attempt of an entry whose spec is `scheduledUnlock` (a temporary lock-out's
   * end, src/lockouts/): run it, skip it (ended done with the reason, no call made), or wait
   * (given back, due in `waitMs`, the attempt not counted). A rejection is retried as a failed
   * attempt. Default: every attempt runs.
   */
  beforeAttempt?: (spec: ActionSpec, store: Pick<OutboxStore, 'get'>) => Promise<AttemptGate>;
}

/** What `OutboxOptions.beforeAttempt` says of an attempt. */
export type AttemptGate = { run: true } | { skip: string } | { waitMs: number };

/** Deferred actions written to the store per round of writes (a submit's are never split). */
const DEFERRED_BATCH = 100;

/** One deferred submit: its specs and its companion go to the store together, or not at all. */
interface DeferredSubmit {
  specs: readonly ActionSpec[];
  companion: AppendCompanion | undefined;
}

/** An attempt that succeeded, its completion waiting for the next claim (`Outbox.#claimAndStart`). */
interface Completing {
  id: string;
  webhook: boolean;
  nowMs: number;
  record: DeliveryRecord | undefined;
  resolve: (completed: boolean) => void;
  reject: (error: unknown) => void;
}

/** The lease owners of the outboxes running in this process now. */
const LIVE_OWNERS = new Set<string>();

/**
 * Whether `owner` (`<host>:<pid>:…`) is a process of this host that no longer exists. One naming
 * this very pid but none of this process's outboxes is from an earlier life of the pid: in a
 * container every riskgate is pid 1, so "pid 1 is alive" kept a crashed life's leases until they
 * ran out.
 */
function isGone(owner: string): boolean {
  const [host, pid] = owner.split(':');
  if (host !== hostname()) return false;
  if (Number(pid) === process.pid) return !LIVE_OWNERS.has(owner);
  return !isProcessAlive(Number(pid));
}

export class Outbox implements ActionDispatcher {
  readonly #o: Required<
    Omit<OutboxOptions, 'onError' | 'flushOutcomes' | 'webhooks' | 'beforeAttempt' | 'watermark' | 'delivery'>
  > &
    Pick<
      OutboxOptions,
      'onError' | 'flushOutcomes' | 'webhooks' | 'beforeAttempt' | 'watermark' | 'delivery'
    >;
  #toConfirm: string[] = [];
  /**
   * Outcome lines written, their confirmation carried by the next claim (issue 32: a message to
   * the SQLite thread of its own per batch before); a poll comes within `pollMs`.
   */
  #toMark: string[] = [];
  /** Attempts that succeeded, completed with the next claim: the one that fills their slots. */
  #completing: Completing[] = [];
  /** Told and not yet confirmed logged: never told twice by this process. */
  readonly #told = new Set<string>();
  #confirming: Promise<void> | undefined;
  readonly #running = new Map<string, AbortController>();
  /** Of `#running`, the webhook deliveries. */
  #runningWebhooks = 0;
  #stats: OutboxStats = { pending: 0, dead: 0, oldestPendingAgeMs: 0 };
  #attemptsStarted = 0;
  #closing = false;
  #claiming = false;
  /** The last claim filled every free slot: more may be due, a completion's slot is wanted now. */
  #backlog = false;
  /**
   * Entries this process appended and has not claimed yet, by ordering key: a completion with one
   * of its key behind it is sent at once (that user's next action waits for it), any other rides
   * with the next claim. Entries claimed elsewhere are forgotten when the store has nothing pending
   * beyond what runs here (`#refreshStats`).
   */
  readonly #queuedKeys = new Map<string, number>();
  /** A completion waiting for the next claim has an action of its user behind it. */
  #completingUrgent = false;
  /** A poll found a claim running: one more claim is due when it ends. */
  #wokenWhileClaiming = false;
  #timer: ClockTimer | undefined;
  /** Monotonic time at which `#timer` fires. */
  #timerAt = 0;
  #idleWaiters: (() => void)[] = [];
  #lastPruneMs = 0;
  #lastHousekeepingMs = 0;
  /** The store's file as it was before the last poll that found nothing to do; undefined: poll. */
  #quietMark: string | undefined;
  /** Polls skipped, the store quiet (its file untouched since a poll that found nothing), since start. */
  quietPolls = 0;
  /** Actions the store has not acknowledged in time, by id, until it does. */
  readonly #deferred = new Map<string, { spec: ActionSpec; atMs: number; submit: DeferredSubmit }>();
  #deferredTimer: ClockTimer | undefined;
  #writingDeferred = false;
  #deferredFailures = 0;

  constructor(options: OutboxOptions) {
    this.#o = {
      concurrency: 4,
      attemptTimeoutMs: 5000,
      baseDelayMs: 500,
      maxDelayMs: 60_000,
      horizonMs: 24 * 60 * 60 * 1000,
      pollMs: 1000,
      claimDelayMs: 50,
      quietFullPollMs: 10_000,
      owner: `${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`,
      clock: systemClock,
      random: Math.random,
      maxDeferred: 10_000,
      submitTimeoutMs: 2000,
      ...options,
    };
  }

  /**
   * Starts delivering, what earlier processes left included. Leases of processes of this host that
   * are gone (a crash, a SIGKILL) are ended first, so their actions go out now rather than when
   * the lease runs out; other hosts' leases run out by themselves.
   */
  start(): void {
    LIVE_OWNERS.add(this.#o.owner);
    void this.#releaseDeadOwners().finally(() => {
      void this.#refreshStats();
      this.#wake();
    });
  }

  async #releaseDeadOwners(): Promise<void> {
    try {
      const now = this.#o.clock.nowMs();
      for (const owner of await this.#o.store.leaseOwners(now)) {
        if (owner !== this.#o.owner && isGone(owner)) await this.#o.store.releaseOwner(owner, now);
      }
    } catch (error) {
      this.#o.onError?.(error);
    }
  }

  /** Pending in the store (refreshed at each poll), for the queue-size gauge. */
  get size(): number {
    return this.#stats.pending;
  }

  /** The store's counts at the last poll: pending, dead, oldest pending age. */
  get stats(): OutboxStats {
    return this.#stats;
  }

  /** Actions held in this process until the store acknowledges them (`deferred` answers). */
  get deferred(): number {
    return this.#deferred.size;
  }

  /** Attempts started by this process. */
  get attemptsStarted(): number {
    return this.#attemptsStarted;
  }

  get store(): OutboxStore {
    return this.#o.store;
  }

  async submit(jobs: readonly ActionJob[], options: SubmitOptions = {}): Promise<EnqueueResult[]> {
    if (this.#closing) return jobs.map(() => 'refused');
    const { companion } = options;
    // A companion's own entries (its event's deliveries) go in the same append, after the jobs'.
    const written = [...jobs.map((j) => j.spec), ...(companion?.specs ?? [])];
    const appending = this.#o.store.append(written, this.#o.clock.nowMs(), companion && [companion]);
    let added: boolean[];
    try {
      added = await withDeadline(
        appending,
        options.timeoutMs ?? this.#o.submitTimeoutMs,
        'the outbox append',
      );
    } catch (error) {
      this.#o.onError?.(error);
      // No answer in time: held here, never promised as queued. Refused: not written, not promised;
      // the answer says the action failed (queue_refused).
      return error instanceof StoreTimeoutError
        ? this.#defer({ specs: written, companion }, appending).slice(0, jobs.length)
        : jobs.map(() => 'refused');
    }
    companion?.committed?.();
    for (const [i, spec] of written.entries()) if (added[i] === true) this.#queued(spec.orderingKey, 1);
    this.#stats = { ...this.#stats, pending: this.#stats.pending + added.filter(Boolean).length };
    this.#wake();
    return added.slice(0, jobs.length).map((a) => (a ? 'queued' : 'duplicate'));
  }

  #defer(submit: DeferredSubmit, appending: Promise<boolean[]>): EnqueueResult[] {
    const { specs } = submit;
    if (this.#closing || this.#deferred.size + specs.length > this.#o.maxDeferred) {
      return specs.map(() => 'refused');
    }
    const atMs = this.#o.clock.monotonicMs();
    for (const spec of specs) this.#deferred.set(spec.id, { spec, atMs, submit });
    // The write that timed out may still be answered: then these are in the store.
    appending.then(
      () => this.#deferredWritten([submit]),
      () => {},
    );
    this.#writeDeferredLater(0);
    return specs.map(() => 'deferred');
  }

  #deferredWritten(submits: readonly DeferredSubmit[]): void {
    let written = 0;
    for (const submit of submits) {
      let mine = 0;
      for (const spec of submit.specs)
        if (this.#deferred.delete(spec.id)) {
          mine++;
          this.#queued(spec.orderingKey, 1);
        }
      // Told once: by whichever write of it landed first.
      if (mine > 0) submit.companion?.committed?.();
      written += mine;
    }
    if (written === 0) return;
    this.#stats = { ...this.#stats, pending: this.#stats.pending + written };
    this.#wake();
  }

  /** Writes the deferred actions in `delayMs`, unless a write is already due. */
  #writeDeferredLater(delayMs: number): void {
    if (this.#deferredTimer !== undefined || this.#deferred.size === 0) return;
    this.#deferredTimer = this.#o.clock.setTimeout(() => {
      this.#deferredTimer = undefined;
      void this.#writeDeferred();
    }, delayMs);
    this.#deferredTimer.unref();
  }

  /**
   * One round of writes of up to DEFERRED_BATCH deferred actions (at most one round in flight),
   * then the next: at once after a success, after a backoff bounded by `pollMs` after a failure.
   * One append per submit (the store still commits a turn's appends together): each submit's
   * result is its own, and one the database refuses ends alone (failed, `queue_refused`), never
   * holding the others back or taking them down with it.
   */
  async #writeDeferred(timeoutMs = this.#o.submitTimeoutMs): Promise<void> {
    if (this.#writingDeferred || this.#deferred.size === 0) return;
    this.#writingDeferred = true;
    // Whole submits, oldest first, up to about DEFERRED_BATCH actions.
    const submits = new Set<DeferredSubmit>();
    let count = 0;
    for (const { submit } of this.#deferred.values()) {
      if (count >= DEFERRED_BATCH) break;
      if (submits.has(submit)) continue;
      submits.add(submit);
      count += submit.specs.length;
    }
    const nowMs = this.#o.clock.nowMs();
    const results = await Promise.allSettled(
      [...submits].map(async (submit) => {
        try {
          await withDeadline(
            this.#o.store.append(submit.specs, nowMs, submit.companion && [submit.companion]),
            timeoutMs,
            'the outbox append',
          );
        } catch (error) {
          this.#o.onError?.(error);
          if (!isRefusedRow(error)) throw error;
          // Tried again, it would be refused again: ended now, and said so.
          this.#endDeferred(submit, 'queue_refused');
          return;
        }
        this.#deferredWritten([submit]);
      }),
    );
    this.#writingDeferred = false;
    const failed = results.some((r) => r.status === 'rejected');
    this.#deferredFailures = failed ? this.#deferredFailures + 1 : 0;
    if (this.#closing) return;
    this.#writeDeferredLater(
      this.#deferredFailures === 0 ? 0 : Math.min(this.#o.pollMs, 50 * 2 ** this.#deferredFailures),
    );
  }

  /** Ends the deferred actions of `submit` still held, each reported failed with `reason`. */
  #endDeferred(submit: DeferredSubmit, reason: string): void {
    const now = this.#o.clock.monotonicMs();
    for (const spec of submit.specs) {
      const held = this.#deferred.get(spec.id);
      if (held?.submit !== submit) continue;
      this.#deferred.delete(spec.id);
      this.#o.onOutcome(
        actionOutcome({ ...spec, key: spec.id }, 'failed', 0, now - held.atMs, reason),
        false,
      );
    }
  }

  /** Ends every deferred action still unwritten, reported failed with `reason`. */
  #failDeferred(reason: string): void {
    this.#o.clock.clearTimeout(this.#deferredTimer);
    const now = this.#o.clock.monotonicMs();
    for (const { spec, atMs } of this.#deferred.values()) {
      this.#o.onOutcome(actionOutcome({ ...spec, key: spec.id }, 'failed', 0, now - atMs, reason), false);
    }
    this.#deferred.clear();
  }

  /**
   * Stops claiming, lets the attempts in flight finish for up to `timeoutMs`, then aborts the rest
   * and gives them back to the store (not counted): everything undelivered waits for the next
   * process, and nothing is reported failed. Over the memory store there is no next process: the
   * retries due within `timeoutMs` are made too, and what is left is reported failed (`shutdown`).
   */
  async drain(timeoutMs: number): Promise<void> {
    const deadline = this.#o.clock.monotonicMs() + timeoutMs;
    // What the store has not acknowledged is written first, while there is time.
    while (this.#deferred.size > 0 && this.#o.clock.monotonicMs() < deadline) {
      if (this.#writingDeferred) await sleep(20);
      else await this.#writeDeferred(Math.max(1, deadline - this.#o.clock.monotonicMs()));
      if (this.#deferredFailures > 0) await sleep(50);
    }
    // Deliver what is due now (the last answers' actions too) within the grace period; what is
    // waiting for a retry, or still running at the end, stays in the store for the next process.
    while (this.#o.clock.monotonicMs() < deadline) {
      if (this.#running.size === 0 && !this.#claiming) {
        let started = 0;
        try {
          started = await this.#claimAndStart();
        } catch (error) {
          this.#o.onError?.(error);
        }
        if (started === 0) {
          const waitMs = await this.#untilNextRetry(deadline);
          if (waitMs === undefined) break;
          await new Promise<void>((r) => this.#o.clock.setTimeout(r, waitMs));
          continue;
        }
      }
      await settlesWithin(
        new Promise<void>((resolve) => this.#idleWaiters.push(resolve)),
        Math.max(0, Math.min(20, deadline - this.#o.clock.monotonicMs())),
        { clock: this.#o.clock },
      );
    }
    this.#closing = true;
    this.#o.clock.clearTimeout(this.#timer);
    // No claim comes now: the completions waiting for one are sent alone (their attempts end).
    void this.#settleCarried();
    this.#failDeferred('shutdown');
    const aborted = [...this.#running.values()];
    for (const c of aborted) c.abort();
    // Each aborted attempt gives its entry back as it settles.
    if (this.#running.size > 0) {
      await settlesWithin(new Promise<void>((resolve) => this.#idleWaiters.push(resolve)), 1000, {
        ref: false,
        clock: this.#o.clock,
      });
    }
    await this.#endUndelivered('shutdown');
    await this.#confirmed();
    // Stopped: its leases are another outbox's to end, like a dead process's.
    LIVE_OWNERS.delete(this.#o.owner);
  }

  /**
   * A process about to die: stop at once; a durable store keeps every undelivered action, and
   * what dies with the process (the deferred ones the store never acknowledged; everything in the
   * memory store) is reported failed with `reason`.
   */
  async abandon(reason: string): Promise<void> {
    this.#closing = true;
    this.#o.clock.clearTimeout(this.#timer);
    // Only what this process held dies with it; the store keeps the rest.
    this.#failDeferred(reason);
    for (const c of this.#running.values()) c.abort();
    await this.#settleCarried();
    await this.#endUndelivered(reason);
    // Stopped: its leases are another outbox's to end, like a dead process's.
    LIVE_OWNERS.delete(this.#o.owner);
  }

  /**
   * How long a shutdown waits for the memory store's next retry, milliseconds; undefined when it
   * should not: a durable store keeps them for the next process, or none is due before `deadline`
   * (monotonic time).
   */
  async #untilNextRetry(deadline: number): Promise<number | undefined> {
    if (this.#o.store.durable) return undefined;
    const newestFirst = await this.#o.store.list({ status: 'pending', limit: Number.MAX_SAFE_INTEGER });
    // Only each user's oldest pending action can be due: the others wait for it, not for a time.
    const heads = new Map<string, number>();
    for (const e of newestFirst.reverse()) {
      if (!heads.has(e.spec.orderingKey)) heads.set(e.spec.orderingKey, e.nextAttemptAtMs);
    }
    if (heads.size === 0) return undefined;
    const waitMs = Math.max(1, Math.min(...heads.values()) - this.#o.clock.nowMs());
    return waitMs < deadline - this.#o.clock.monotonicMs() ? waitMs : undefined;
  }

  /**
   * Ends every undelivered entry of a store that does not outlive this process, each reported
   * failed with `reason` (dropped in the store, so an attempt still settling cannot end it again).
   * Nothing to do with a durable store: the next process delivers them.
   */
  async #endUndelivered(reason: string): Promise<void> {
    const { store } = this.#o;
    if (store.durable) return;
    try {
      const now = this.#o.clock.nowMs();
      for (const entry of await store.list({ status: 'pending', limit: Number.MAX_SAFE_INTEGER })) {
        if (await store.drop(entry.spec.id, reason, now)) {
          this.#o.onOutcome(outcomeOf(entry, 'failed', now, reason), false);
        }
      }
    } catch (error) {
      this.#o.onError?.(error);
    }
  }

  /** Looks at the store now (an operator made an entry due). */
  nudge(): void {
    this.#wake();
  }

  /**
   * Polls within `delayMs` (default `claimDelayMs`): the submits and finished attempts of a burst share one
   * claim instead of a store transaction each (the claim was most of the outbox's CPU), at the
   * price of up to `claimDelayMs` before an action starts.
   */
  #wake(delayMs = this.#o.claimDelayMs): void {
    if (this.#closing) return;
    // Something happened here (a submit, a nudge, an attempt's end): the woken poll asks the store.
    this.#quietMark = undefined;
    const at = this.#o.clock.monotonicMs() + delayMs;
    if (this.#timer !== undefined && this.#timerAt <= at) return;
    this.#schedule(delayMs);
  }

  #schedule(delayMs: number): void {
    this.#o.clock.clearTimeout(this.#timer);
    this.#timerAt = this.#o.clock.monotonicMs() + delayMs;
    this.#timer = this.#o.clock.setTimeout(() => {
      this.#timer = undefined;
      void this.#poll();
    }, delayMs);
    this.#timer.unref();
  }

  async #poll(): Promise<void> {
    if (this.#closing) return;
    if (this.#claiming) {
      // Woken (a submit, a finished attempt) during a claim that may not have seen it: claim again
      // as soon as this one ends, not at the next poll interval.
      this.#wokenWhileClaiming = true;
      return;
    }
    if (this.#quiet()) {
      this.quietPolls++;
      this.#schedule(this.#o.pollMs);
      return;
    }
    this.#claiming = true;
    this.#wokenWhileClaiming = false;
    let claimed = 0;
    let nothingToDo = false;
    // The housekeeping reads (counts, untold lines, pruning) once per poll interval, not after
    // every attempt: under a deny-heavy burst they cost more than the deliveries. Only a poll that
    // housekeeps can find the outbox quiet, so only it takes the file's mark (two `stat`s: taken
    // on every wake-up, they were the main thread's one `statx` per decision at 200/s).
    const startedMs = this.#o.clock.nowMs();
    const housekeeping = startedMs - this.#lastHousekeepingMs >= this.#o.pollMs;
    const mark = housekeeping ? this.#o.watermark?.mark() : undefined;
    const free = this.#freeSlots();
    try {
      claimed = await this.#claimAndStart();
      if (housekeeping) {
        this.#lastHousekeepingMs = startedMs;
        const counted = await this.#refreshStats();
        await this.#pruneNowAndThen();
        const untold = await this.#tellUnlogged();
        nothingToDo = counted && claimed === 0 && this.#stats.pending === 0 && untold === 0;
      }
    } catch (error) {
      this.#o.onError?.(error);
    } finally {
      this.#claiming = false;
    }
    // Quiet: nothing pending, running, deferred or untold, as of `mark` (taken before the claim).
    // (Nothing completing or unconfirmed either: `#running` holds the attempts completing.)
    this.#quietMark =
      nothingToDo && !this.#wokenWhileClaiming && this.#running.size === 0 && this.#deferred.size === 0
        ? mark
        : undefined;
    if (this.#closing) return;
    // A full claim may leave more due now, and a wake-up during the claim may have something the
    // claim did not see: look again as a wake-up would (10 ms, so a burst shares the claim; not 0,
    // which under a steady stream of submits claims back to back for users whose next action is
    // still running). Otherwise at the next poll. A wake-up due sooner is kept, never pushed back.
    // Completions that came during the claim wait for nothing more: their slots are free now.
    this.#backlog = claimed === free && free > 0;
    const delayMs =
      this.#completing.length > 0 && (this.#backlog || this.#completingUrgent)
        ? 0
        : this.#backlog || this.#wokenWhileClaiming
          ? 10
          : this.#completing.length > 0
            ? this.#o.claimDelayMs
            : this.#o.pollMs;
    if (this.#timer === undefined || this.#timerAt > this.#o.clock.monotonicMs() + delayMs)
      this.#schedule(delayMs);
  }

  /**
   * Whether this poll has nothing to claim without asking the store: the last poll found nothing
   * pending (so no due time or lease can pass), nothing runs or waits here, and nobody wrote to the
   * store's file since. At most `quietFullPollMs` apart a poll queries anyway (a store that fails).
   */
  #quiet(): boolean {
    return (
      this.#quietMark !== undefined &&
      this.#running.size === 0 &&
      this.#toMark.length === 0 &&
      this.#deferred.size === 0 &&
      this.#o.clock.nowMs() - this.#lastHousekeepingMs < this.#o.quietFullPollMs &&
      this.#o.watermark?.unchangedSince(this.#quietMark) === true
    );
  }

  /** Attempt slots free, those of the attempts completing with the next claim included. */
  #freeSlots(): number {
    return this.#o.concurrency - this.#running.size + this.#completing.length;
  }

  /**
   * Claims what is due into the free attempt slots and starts it; how many were started. The
   * completions and the confirmed outcome lines waiting go with the claim (`settleAndClaim`: one
   * message to the SQLite thread), ahead of it, so it sees the completed entries: a user's next
   * action is taken in the same turn. `claim` false (a shutdown) sends only those.
   */
  async #claimAndStart(claim = true): Promise<number> {
    const completing = this.#completing;
    const logged = this.#toMark;
    this.#completing = [];
    this.#completingUrgent = false;
    this.#toMark = [];
    const free = claim ? this.#o.concurrency - this.#running.size + completing.length : 0;
    if (free <= 0 && completing.length === 0 && logged.length === 0) return 0;
    const now = this.#o.clock.nowMs();
    // The lease outlasts the longest attempt (a webhook's has its own timeout).
    const leaseMs = Math.max(this.#o.attemptTimeoutMs, this.#o.webhooks?.timeoutMs ?? 0) + 5000;
    // Webhooks (up to all slots but one) and Admin actions, oldest first; then, the webhook lane
    // full, the Admin actions alone: a burst of deliveries to a slow receiver never holds them.
    const webhooks = this.#runningWebhooks - completing.filter((c) => c.webhook).length;
    const webhookRoom = Math.max(1, this.#o.concurrency - 1) - webhooks;
    const mixedLimit = Math.max(0, Math.min(free, webhookRoom));
    const { owner, store } = this.#o;
    const claimed =
      completing.length === 0 && logged.length === 0
        ? mixedLimit > 0
          ? await store.claim(owner, mixedLimit, now, leaseMs)
          : []
        : await this.#settleAndClaim(completing, logged, { limit: mixedLimit, nowMs: now, leaseMs });
    if (claimed.length === mixedLimit && free > mixedLimit)
      claimed.push(...(await store.claim(owner, free - mixedLimit, now, leaseMs, { skipWebhooks: true })));
    for (const entry of claimed) {
      this.#queued(entry.spec.orderingKey, -1);
      void this.#attempt(entry);
    }
    return claimed.length;
  }

  /**
   * The completions and marks carried, then the claim, in one call to the store; the claimed
   * entries. When nothing landed, each completing attempt reports the failure (its lease runs out,
   * it is tried again) and the marks stay unconfirmed, as a failed `markLogged` leaves them.
   */
  async #settleAndClaim(
    completing: readonly Completing[],
    logged: string[],
    claim: { limit: number; nowMs: number; leaseMs: number },
  ): Promise<OutboxEntry[]> {
    try {
      const settled = await this.#o.store.settleAndClaim({
        owner: this.#o.owner,
        completed: completing.map((c) => ({ id: c.id, nowMs: c.nowMs, record: c.record })),
        logged,
        ...claim,
      });
      for (const [i, c] of completing.entries()) c.resolve(settled.completed[i]!);
      if (settled.logged) for (const id of logged) this.#told.delete(id);
      for (const error of settled.errors) this.#o.onError?.(error);
      return settled.claimed;
    } catch (error) {
      for (const c of completing) c.reject(error);
      if (completing.length === 0) this.#o.onError?.(error);
      return [];
    }
  }

  /**
   * Completes `entry`'s successful attempt with the next claim, woken at once (its slot is free),
   * with its delivery's `record` when it has one (written in the same transaction).
   */
  #complete(entry: OutboxEntry, nowMs: number, record?: DeliveryRecord): Promise<boolean> {
    const { id, type } = entry.spec;
    // Closing: no claim comes.
    if (this.#closing) return this.#o.store.complete(id, this.#o.owner, nowMs, record);
    return new Promise((resolve, reject) => {
      this.#completing.push({ id, webhook: type === WEBHOOK_ACTION_TYPE, nowMs, record, resolve, reject });
      // Wanted at once when the user's next action waits behind it, or the last claim left
      // entries due; otherwise it rides with the next submit's claim.
      const urgent = this.#queuedKeys.has(entry.spec.orderingKey) || this.#backlog;
      this.#completingUrgent ||= urgent;
      this.#wake(urgent ? 0 : this.#o.claimDelayMs);
    });
  }

  /** The rows kept in step with `spec`'s delivery, when the store writes them with its completion. */
  #recordOf({ spec, createdAtMs }: OutboxEntry): DeliveryRecord | undefined {
    const companion = this.#o.delivery;
    if (companion === undefined || this.#o.store.deliveryRecords !== true) return undefined;
    return companion.types.includes(spec.type) ? { spec, createdAtMs, companion } : undefined;
  }

  /** What waits for a claim that no longer comes (a shutdown): the completions and the marks, now. */
  async #settleCarried(): Promise<void> {
    try {
      await this.#claimAndStart(false);
    } catch (error) {
      this.#o.onError?.(error);
    }
  }

  #queued(key: string, by: number): void {
    const n = (this.#queuedKeys.get(key) ?? 0) + by;
    if (n > 0) this.#queuedKeys.set(key, n);
    else this.#queuedKeys.delete(key);
  }

  /** Whether the counts were read. */
  async #refreshStats(): Promise<boolean> {
    try {
      this.#stats = await this.#o.store.stats(this.#o.clock.nowMs());
      if (this.#stats.pending <= this.#running.size) this.#queuedKeys.clear();
      return true;
    } catch (error) {
      this.#o.onError?.(error);
      return false;
    }
  }

  async #pruneNowAndThen(): Promise<void> {
    const now = this.#o.clock.nowMs();
    if (now - this.#lastPruneMs < 10 * 60 * 1000) return;
    this.#lastPruneMs = now;
    // Delivered and dropped entries are kept two days for operators (GET /actions) and for
    // deduplication of a late retry of the same decision.
    await this.#o.store.prune(now - 2 * 24 * 60 * 60 * 1000);
  }

  async #attempt(entry: OutboxEntry): Promise<void> {
    const { spec } = entry;
    const controller = new AbortController();
    this.#running.set(spec.id, controller);
    const webhook = spec.type === WEBHOOK_ACTION_TYPE;
    if (webhook) this.#runningWebhooks++;
    this.#attemptsStarted++;
    let failure: { code: string; retryAfterMs?: number | undefined } | undefined;
    let gate: AttemptGate = { run: true };
    try {
      if (spec.scheduledUnlock !== undefined && this.#o.beforeAttempt !== undefined)
        gate = await this.#o.beforeAttempt(spec, this.#o.store);
      const result =
        'run' in gate
          ? await attemptAction(
              spec,
              this.#o.admin,
              this.#o.webhooks,
            )({
              timeoutMs: this.#o.attemptTimeoutMs,
              signal: controller.signal,
            })
          : undefined;
      if (result?.ok === false)
        failure = { code: result.error.code, retryAfterMs: result.error.retryAfterMs };
    } catch {
      failure = { code: ErrorCode.INTERNAL };
    }
    // A completion goes with the claim that fills this slot (`#complete`): no wake-up of its own.
    let claimedAfter = failure === undefined && !('waitMs' in gate);
    try {
      if (failure === undefined && !('run' in gate)) await this.#settleGated(entry, gate);
      else await this.#settle(entry, failure, controller.signal.aborted);
    } catch (error) {
      // The store failed: the lease runs out and the entry is tried again; nothing is lost.
      this.#o.onError?.(error);
      claimedAfter = false;
    } finally {
      this.#running.delete(spec.id);
      if (webhook) this.#runningWebhooks--;
      if (this.#running.size === 0) {
        const waiters = this.#idleWaiters;
        this.#idleWaiters = [];
        for (const w of waiters) w();
      }
      // A freed slot is filled at once, not after the 10 ms a submit waits: one user's next
      // action waits for this one to end (per-user order), so each cycle's delay adds up along
      // a user's queue (issue 32: the lock-out delay). The attempts settled in one turn (their
      // completions one batch in the store) still share the one claim; a completion was already
      // sent with it.
      if (!this.#closing && !claimedAfter) this.#wake(0);
    }
  }

  async #settle(
    entry: OutboxEntry,
    failure: { code: string; retryAfterMs?: number | undefined } | undefined,
    aborted: boolean,
  ): Promise<void> {
    const { spec } = entry;
    const { store, owner } = this.#o;
    const now = this.#o.clock.nowMs();
    if (failure === undefined) {
      const record = this.#recordOf(entry);
      if (await this.#complete(entry, now, record)) this.#outcome(entry, 'done', now, undefined, record);
      return;
    }
    if (aborted) {
      // Shutdown: back to the store at once, the attempt not counted.
      await store.retryLater(spec.id, owner, now, failure.code, false, now);
      return;
    }
    if (failure.code === ErrorCode.CIRCUIT_OPEN) {
      // The Admin route is known down: wait for the breaker's next probe, spending no attempt.
      await store.retryLater(
        spec.id,
        owner,
        now + Math.max(100, failure.retryAfterMs ?? 1000),
        entry.lastError,
        false,
        now,
      );
      return;
    }
    if (failure.code === ErrorCode.SUBJECT_MISMATCH) {
      // Verified late, and not the account's user: never carried out (dropped, not for an operator).
      if (await store.drop(spec.id, SUBJECT_MISMATCH_REASON, now))
        this.#outcome(entry, 'failed', now, SUBJECT_MISMATCH_REASON);
      return;
    }
    // Failures that will not change end it; an attempt cut short by a caller's abort is tried again.
    if (!RETRYABLE_ACTION_FAILURES.has(failure.code) && failure.code !== ErrorCode.ABORTED) {
      if (await store.deadLetter(spec.id, owner, failure.code, now))
        this.#outcome(entry, 'failed', now, failure.code);
      return;
    }
    const delay = Math.min(
      this.#o.maxDelayMs,
      backoffDelayMs(
        { initialMs: this.#o.baseDelayMs, maxMs: this.#o.maxDelayMs, random: this.#o.random },
        entry.attempts,
        failure.retryAfterMs,
      ),
    );
    if (now + delay - entry.horizonStartMs > this.#horizonOf(spec)) {
      await this.#deadLetter(entry, `horizon_exhausted:${failure.code}`, now);
      return;
    }
    await store.retryLater(spec.id, owner, now + delay, failure.code, true, now);
  }

  /**
   * How long `spec` is retried: the outbox's horizon, or a webhook's own budget when shorter. A
   * stream (a receiver's events of one user or list) waits behind its oldest pending event, so one
   * the receiver refuses must give way after its budget, not after a day.
   */
  #horizonOf(spec: ActionSpec): number {
    const budget = spec.type === WEBHOOK_ACTION_TYPE ? this.#o.webhooks?.retryHorizonMs : undefined;
    return budget === undefined ? this.#o.horizonMs : Math.min(budget, this.#o.horizonMs);
  }

  /** An attempt its gate skipped (done, no call made) or put off (not counted). */
  async #settleGated(entry: OutboxEntry, gate: { skip: string } | { waitMs: number }): Promise<void> {
    const { store, owner } = this.#o;
    const now = this.#o.clock.nowMs();
    if ('skip' in gate) {
      if (await this.#complete(entry, now)) this.#outcome(entry, 'done', now, gate.skip);
      return;
    }
    await store.retryLater(entry.spec.id, owner, now + gate.waitMs, entry.lastError, false, now);
  }

  async #deadLetter(entry: OutboxEntry, reason: string, now: number): Promise<void> {
    if (await this.#o.store.deadLetter(entry.spec.id, this.#o.owner, reason, now)) {
      this.#outcome(entry, 'failed', now, reason);
    }
  }

  #outcome(
    entry: OutboxEntry,
    status: 'done' | 'failed',
    now: number,
    reason?: string,
    record?: DeliveryRecord,
  ): void {
    this.#o.onOutcome(outcomeOf(entry, status, now, reason), record !== undefined);
    this.#confirmLater(entry.spec.id);
  }

  /** Tells the final outcome of `entry` ended elsewhere (an operator's drop over HTTP). */
  reportFinal(entry: OutboxEntry): void {
    // Told again (a crash before its line was confirmed), or ended elsewhere: its records too.
    this.#o.onOutcome(finalOutcomeOf(entry, this.#o.clock.nowMs()), false);
    this.#confirmLater(entry.spec.id);
  }

  #confirmLater(id: string): void {
    this.#told.add(id);
    this.#toConfirm.push(id);
    this.#confirming ??= (async () => {
      // Let the lines of this turn join the batch, then wait for them to be written.
      await new Promise((r) => setImmediate(r));
      const ids = this.#toConfirm;
      this.#toConfirm = [];
      try {
        await this.#o.flushOutcomes?.();
        if (this.#closing) {
          await this.#o.store.markLogged(ids);
          for (const id of ids) this.#told.delete(id);
        } else {
          // With the next claim, within `pollMs`: a crash before it has these lines told again
          // at the next start, as it would between the write and a mark of their own.
          this.#toMark.push(...ids);
          this.#wake(this.#o.pollMs);
        }
      } catch (error) {
        this.#o.onError?.(error);
      } finally {
        this.#confirming = undefined;
        if (this.#toConfirm.length > 0) this.#confirmLater(this.#toConfirm.pop()!);
      }
    })();
  }

  /**
   * Final entries whose line was never confirmed: ended by a process of this host that is gone,
   * or more than 30 s ago (long enough for a live process, here or elsewhere, to confirm its own),
   * or by an operator's CLI. Told now, so every final outcome has its line.
   */
  /** Tells the final outcomes no process logged; how many unlogged entries it read. */
  async #tellUnlogged(): Promise<number> {
    const now = this.#o.clock.nowMs();
    const unlogged = await this.#o.store.unlogged(100);
    for (const e of unlogged) {
      if (e.owner === this.#o.owner || this.#told.has(e.spec.id)) continue;
      if (now - e.updatedAtMs > 30_000 || e.owner === undefined || isGone(e.owner)) this.reportFinal(e);
    }
    return unlogged.length;
  }

  /** Waits for the outcome lines told so far to be confirmed (shutdown). */
  async #confirmed(): Promise<void> {
    while (this.#confirming !== undefined) await this.#confirming;
    await this.#settleCarried();
  }
}

/** The final outcome line of `entry`. */
export function outcomeOf(
  entry: OutboxEntry,
  status: 'done' | 'failed',
  nowMs: number,
  reason?: string,
): ActionOutcome {
  const { spec } = entry;
  return actionOutcome({ ...spec, key: spec.id }, status, entry.attempts, nowMs - entry.createdAtMs, reason);
}

/** The outcome line of an entry that is final in the store (delivered, dead or dropped). */
export function finalOutcomeOf(entry: OutboxEntry, nowMs: number): ActionOutcome {
  return entry.status === 'delivered'
    ? outcomeOf(entry, 'done', nowMs)
    : outcomeOf(entry, 'failed', nowMs, entry.reason ?? entry.status);
}
