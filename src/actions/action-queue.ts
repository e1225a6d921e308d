import { LRUCache } from 'lru-cache';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { backoffDelayMs } from '../timing/backoff.ts';
import { settlesWithin } from '../timing/with-timeout.ts';
import type { ActionJob } from './admin-actions.ts';

// Jobs are made where actions are planned (admin-actions.ts); re-exported for the queue's callers.
export type { ActionJob };

/**
 * Runs Admin actions after the answer has gone out: bounded concurrency, bounded retries with
 * exponential backoff and jitter (honouring `Retry-After`), at most once per key (decision +
 * action + target), drained on shutdown. Every job ends in exactly one `onOutcome`: done, or
 * failed with the reason; nothing is dropped silently.
 */

/** How a decision submits its actions. */
export interface SubmitOptions {
  /**
   * How long the decision can wait for its actions to be held, milliseconds (what is left of its
   * deadline). Past it a durable outbox answers `deferred` rather than hold the answer. Default:
   * the store's own timeout.
   */
  timeoutMs?: number | undefined;
}

/**
 * Least time a decision gives its action write, milliseconds, when the fan-out used its whole
 * deadline: a healthy store answers well within it, so only a stalled one defers.
 */
export const ACTION_SUBMIT_MIN_BUDGET_MS = 100;

/**
 * Where a decision's actions go: the in-memory {@link ActionQueue}, or the durable outbox
 * (src/outbox/). `submit` resolves once the jobs are held as the implementation promises (in
 * memory, or durably written), so the answer can say `queued` truthfully; or, with the outbox,
 * once `options.timeoutMs` passed, with the jobs the store has not acknowledged `deferred`.
 */
export interface ActionDispatcher {
  submit(jobs: readonly ActionJob[], options?: SubmitOptions): Promise<EnqueueResult[]>;
  /** Actions held and not yet final, in this process's view. */
  readonly size: number;
  /** Stops taking jobs and lets the ones in flight finish for up to `timeoutMs`. */
  drain(timeoutMs: number): Promise<void>;
  /** A process about to die: stop now (the memory queue reports its jobs failed with `reason`). */
  abandon(reason: string): void;
}

export interface ActionOutcome {
  key: string;
  decisionId: string;
  type: string;
  target: string;
  status: 'done' | 'failed';
  attempts: number;
  /** Why it failed: the last error code, `queue_full`, `shutdown`, `process_crash`. */
  reason?: string;
  /** From enqueue to outcome, milliseconds. */
  elapsedMs: number;
}

export interface ActionQueueOptions {
  /** Attempts in flight at once. Default 4. */
  concurrency?: number;
  /** Attempts per job, the first included. Default 6. */
  maxAttempts?: number;
  /** First retry delay, milliseconds; doubles each retry. Default 200. */
  baseDelayMs?: number;
  /** Longest retry delay, milliseconds (also caps a `Retry-After`). Default 10 000. */
  maxDelayMs?: number;
  /** Timeout of one attempt, milliseconds. Default 5000. */
  attemptTimeoutMs?: number;
  /** Jobs waiting (queued or between retries) before new ones are refused as failed. Default 10 000. */
  maxPending?: number;
  /** Keys remembered for deduplication after their outcome. Default 100 000. */
  rememberKeys?: number;
  /** Called once per job with its final outcome. Must not throw. */
  onOutcome: (outcome: ActionOutcome) => void;
  /** Jitter source in [0, 1). Default `Math.random`. */
  random?: () => number;
}

/** Failures worth another attempt: the request may succeed later (the durable outbox's too). */
export const RETRYABLE_ACTION_FAILURES: ReadonlySet<string> = new Set([
  ErrorCode.UPSTREAM_TIMEOUT,
  ErrorCode.UPSTREAM_UNREACHABLE,
  ErrorCode.UPSTREAM_RATE_LIMITED,
  ErrorCode.UPSTREAM_SERVER_ERROR,
  ErrorCode.UPSTREAM_MALFORMED_RESPONSE,
  ErrorCode.TOKEN_UNAVAILABLE,
  ErrorCode.DEADLINE_EXCEEDED,
  ErrorCode.INTERNAL,
  // The Admin route's breaker is open: wait for its next probe (retryAfterMs), then try again.
  ErrorCode.CIRCUIT_OPEN,
]);

/** Why an action whose subject turned out not to be the account's was dropped (never carried out). */
export const SUBJECT_MISMATCH_REASON = 'subject_mismatch';

interface Entry {
  job: ActionJob;
  attempts: number;
  enqueuedAt: number;
  retryTimer?: NodeJS.Timeout;
  /** The Admin API's own last failure, reported when the breaker's refusals use up the attempts. */
  lastUpstreamCode?: string;
}

/**
 * What became of a submitted job: `queued` (held as promised), `duplicate` (its key was seen),
 * `refused` (not held: a full or closing queue, a store that failed), or `deferred` (the durable
 * outbox's store did not answer in time: this process holds it and writes it when the store
 * answers; a crash before then loses it, and a shutdown reports it failed).
 */
export type EnqueueResult = 'queued' | 'duplicate' | 'refused' | 'deferred';

/** The final outcome of an action (the in-memory queue's and the outbox's alike). */
export function actionOutcome(
  action: Pick<ActionOutcome, 'key' | 'decisionId' | 'type' | 'target'>,
  status: 'done' | 'failed',
  attempts: number,
  elapsedMs: number,
  reason?: string,
): ActionOutcome {
  const outcome: ActionOutcome = {
    key: action.key,
    decisionId: action.decisionId,
    type: action.type,
    target: action.target,
    status,
    attempts,
    elapsedMs,
  };
  if (reason !== undefined) outcome.reason = reason;
  return outcome;
}

export class ActionQueue implements ActionDispatcher {
  readonly #o: Required<Omit<ActionQueueOptions, 'onOutcome'>> & Pick<ActionQueueOptions, 'onOutcome'>;
  readonly #ready: Entry[] = [];
  readonly #waiting = new Set<Entry>();
  readonly #running = new Set<Entry>();
  readonly #seen: LRUCache<string, true>;
  readonly #shutdown = new AbortController();
  #closing = false;
  /** Reason a job enqueued while closing is refused with. */
  #closingReason = 'shutdown';
  #idleWaiters: (() => void)[] = [];
  #pumpScheduled = false;

  constructor(options: ActionQueueOptions) {
    this.#o = {
      concurrency: 4,
      maxAttempts: 6,
      baseDelayMs: 200,
      maxDelayMs: 10_000,
      attemptTimeoutMs: 5000,
      maxPending: 10_000,
      rememberKeys: 100_000,
      random: Math.random,
      ...options,
    };
    this.#seen = new LRUCache({ max: this.#o.rememberKeys });
  }

  /** Jobs queued, between retries, or running. */
  get size(): number {
    return this.#ready.length + this.#waiting.size + this.#running.size;
  }

  /** In memory, at once: never `deferred`. */
  async submit(jobs: readonly ActionJob[], _options?: SubmitOptions): Promise<EnqueueResult[]> {
    return jobs.map((job) => this.enqueue(job));
  }

  /**
   * Accepts a job; attempts start on a later turn, so the caller's answer goes out first. A key
   * seen before is a `duplicate` and does nothing. A full or closing queue `refused`s the job and
   * reports it failed at once.
   */
  enqueue(job: ActionJob): EnqueueResult {
    if (this.#seen.has(job.key)) return 'duplicate';
    this.#seen.set(job.key, true);
    const entry: Entry = { job, attempts: 0, enqueuedAt: performance.now() };
    if (this.#closing || this.#ready.length + this.#waiting.size >= this.#o.maxPending) {
      this.#finish(entry, 'failed', this.#closing ? this.#closingReason : 'queue_full');
      return 'refused';
    }
    this.#ready.push(entry);
    this.#schedulePump();
    return 'queued';
  }

  /**
   * Stops accepting jobs and waits for the queued ones, retries included, for up to `timeoutMs`.
   * What is left then is cancelled and reported failed with reason `shutdown`.
   */
  async drain(timeoutMs: number): Promise<void> {
    this.#closing = true;
    if (this.size > 0) {
      await settlesWithin(new Promise<void>((resolve) => this.#idleWaiters.push(resolve)), timeoutMs);
    }
    this.#shutdown.abort();
    for (const entry of [...this.#ready, ...this.#waiting, ...this.#running]) {
      clearTimeout(entry.retryTimer);
      this.#finish(entry, 'failed', 'shutdown');
    }
    this.#ready.length = 0;
    this.#waiting.clear();
    this.#running.clear();
  }

  /**
   * Ends every job at once, reported failed with `reason` (e.g. `process_crash`): for a process
   * about to die, which cannot wait for retries but must leave a line for each action it promised.
   * Stops accepting jobs; attempts in flight are aborted and their late results ignored.
   * Returns how many jobs it ended.
   */
  abandon(reason: string): number {
    this.#closing = true;
    this.#closingReason = reason;
    this.#shutdown.abort();
    const entries = [...this.#ready, ...this.#waiting, ...this.#running];
    this.#ready.length = 0;
    this.#waiting.clear();
    this.#running.clear();
    for (const entry of entries) {
      clearTimeout(entry.retryTimer);
      this.#finish(entry, 'failed', reason);
    }
    this.#checkIdle();
    return entries.length;
  }

  #schedulePump(): void {
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = true;
    setImmediate(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#running.size < this.#o.concurrency && this.#ready.length > 0) {
      const entry = this.#ready.shift()!;
      this.#running.add(entry);
      void this.#attempt(entry);
    }
  }

  async #attempt(entry: Entry): Promise<void> {
    entry.attempts++;
    let failure: { code: string; retryAfterMs?: number | undefined } | undefined;
    try {
      const result = await entry.job.attempt({
        timeoutMs: this.#o.attemptTimeoutMs,
        signal: this.#shutdown.signal,
      });
      if (!result.ok) {
        failure = { code: result.error.code, retryAfterMs: result.error.retryAfterMs };
        if (result.error.code !== ErrorCode.CIRCUIT_OPEN) entry.lastUpstreamCode = result.error.code;
      }
    } catch {
      failure = { code: ErrorCode.INTERNAL }; // an attempt must resolve; a bug is retried like a 500
    }
    if (!this.#running.delete(entry)) return; // cancelled by drain meanwhile
    if (failure === undefined) this.#finish(entry, 'done');
    else if (
      !RETRYABLE_ACTION_FAILURES.has(failure.code) ||
      entry.attempts >= this.#o.maxAttempts ||
      this.#shutdown.signal.aborted
    ) {
      this.#finish(
        entry,
        'failed',
        failure.code === ErrorCode.CIRCUIT_OPEN
          ? (entry.lastUpstreamCode ?? failure.code)
          : failure.code === ErrorCode.SUBJECT_MISMATCH
            ? SUBJECT_MISMATCH_REASON
            : failure.code,
      );
    } else {
      this.#waiting.add(entry);
      entry.retryTimer = setTimeout(
        () => {
          this.#waiting.delete(entry);
          this.#ready.push(entry);
          this.#pump();
        },
        this.#retryDelay(entry.attempts, failure.retryAfterMs),
      );
    }
    this.#pump();
    this.#checkIdle();
  }

  /** The upstream layer's backoff (never shorter than `Retry-After`), capped at `maxDelayMs`. */
  #retryDelay(attempts: number, retryAfterMs: number | undefined): number {
    const policy = { initialMs: this.#o.baseDelayMs, maxMs: this.#o.maxDelayMs, random: this.#o.random };
    return Math.min(this.#o.maxDelayMs, backoffDelayMs(policy, attempts, retryAfterMs));
  }

  #finish(entry: Entry, status: 'done' | 'failed', reason?: string): void {
    const elapsedMs = performance.now() - entry.enqueuedAt;
    this.#o.onOutcome(actionOutcome(entry.job, status, entry.attempts, elapsedMs, reason));
  }

  #checkIdle(): void {
    if (this.size > 0 || this.#idleWaiters.length === 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }
}
