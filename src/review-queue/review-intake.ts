import { randomUUID } from 'node:crypto';
import type { DecisionForReview, ReviewSink } from '../decide/decide-ports.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { NewReviewCase, ReviewReason, ReviewStore } from './review-store.ts';

/**
 * Cases a decision opens by itself: its policy's `review: true` (on a rule that matched, or on the
 * verdict given), or the sample (a share of allowed logins, RISKGATE_REVIEW_SAMPLE_SHARE, to
 * estimate what the rules miss). Opening one never blocks or fails a decision: the decision's
 * after-answer work (src/decide/after-decision.ts) hands the case here, a bounded queue in memory,
 * written to the control database off the request path; what does not fit, or what the database
 * refuses, is dropped and counted (`riskgate_review_intake_dropped_total`), as the decision store
 * does.
 */

export interface ReviewIntakeOptions {
  store: ReviewStore;
  /** Share of allowed logins sampled into the queue, 0-1 (RISKGATE_REVIEW_SAMPLE_SHARE). Default 0. */
  sampleShare?: number | undefined;
  /** A case is due this long after it opens, ms (RISKGATE_REVIEW_SLA_HOURS). */
  slaMs: number;
  /** Most cases waiting to be written; past it a case is dropped and counted. Default 1000. */
  maxPending?: number | undefined;
  /** The service's clock. Default {@link systemClock}. */
  clock?: Clock | undefined;
  /** Draws the sample. Default `Math.random`. */
  random?: (() => number) | undefined;
  log: (line: Record<string, unknown>) => void;
}

/** Why a decision opens a case, or undefined (the hot path's whole cost when nothing asks). */
export function reviewReasonOf(
  d: DecisionForReview,
  sampleShare: number,
  random: () => number,
): { reason: ReviewReason; detail: string } | undefined {
  const marks = d.review;
  if (marks !== undefined) {
    // A loop, no allocation: most decisions match no marked rule.
    for (const r of d.matchedRules) {
      if (!marks.rules.has(r.id)) continue;
      const asked = d.matchedRules.filter((m) => marks.rules.has(m.id)).map((m) => m.id);
      return { reason: 'policy', detail: `rules ${asked.join(', ')} ask for review` };
    }
    if (marks.verdicts.has(d.verdict))
      return { reason: 'policy', detail: `verdict ${d.verdict} asks for review` };
  }
  if (sampleShare > 0 && d.verdict === 'allow' && random() < sampleShare) {
    return { reason: 'sample', detail: `sampled allowed login (share ${sampleShare})` };
  }
  return undefined;
}

export class ReviewIntake implements ReviewSink {
  readonly #o: ReviewIntakeOptions;
  readonly #pending: NewReviewCase[] = [];
  readonly #maxPending: number;
  readonly #sampleShare: number;
  readonly #random: () => number;
  readonly #clock: Clock;
  #writing: Promise<void> | undefined;
  #stopped = false;
  /** Cases this process opened. */
  opened = 0;
  /** Cases dropped: the queue was full, the database refused, or riskgate stopped first. */
  dropped = 0;

  constructor(o: ReviewIntakeOptions) {
    this.#o = o;
    this.#maxPending = o.maxPending ?? 1000;
    this.#sampleShare = o.sampleShare ?? 0;
    this.#random = o.random ?? Math.random;
    this.#clock = o.clock ?? systemClock;
  }

  /** Hands a decided login to the intake: a case when its policy or the sample asks. Never throws. */
  consider(d: DecisionForReview): void {
    const why = reviewReasonOf(d, this.#sampleShare, this.#random);
    if (why === undefined) return;
    if (this.#stopped || this.#pending.length >= this.#maxPending) {
      this.dropped++;
      return;
    }
    const openedMs = this.#clock.nowMs();
    this.#pending.push({
      id: randomUUID(),
      decisionId: d.decisionId,
      reason: why.reason,
      detail: why.detail,
      verdict: d.verdict,
      userId: d.userId ?? null,
      openedMs,
      openedBy: 'riskgate',
      dueMs: openedMs + this.#o.slaMs,
    });
    this.#writing ??= this.#drain();
  }

  /** Cases waiting to be written. */
  get pending(): number {
    return this.#pending.length;
  }

  /** Resolves once every case handed so far is written (or dropped). */
  async flush(): Promise<void> {
    while (this.#writing !== undefined) await this.#writing;
  }

  /**
   * Takes no more (what comes later is dropped and counted) and waits up to `waitMs` for what is
   * pending to be written; what is still pending then is dropped and counted.
   */
  async stop(waitMs: number): Promise<void> {
    this.#stopped = true;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, waitMs);
    });
    await Promise.race([this.flush(), timeout]);
    clearTimeout(timer);
    this.dropped += this.#pending.length;
    this.#pending.length = 0;
  }

  async #drain(): Promise<void> {
    try {
      for (let next = this.#pending.shift(); next !== undefined; next = this.#pending.shift()) {
        try {
          const { opened } = await this.#o.store.open(next);
          if (opened) this.opened++;
        } catch (error) {
          this.dropped++;
          this.#o.log({
            level: 'error',
            msg: 'review case not opened: the control database did not take it (counted in riskgate_review_intake_dropped_total)',
            decisionId: next.decisionId,
            reason: next.reason,
            error: (error as Error).message,
          });
        }
      }
    } finally {
      this.#writing = undefined;
    }
  }
}
