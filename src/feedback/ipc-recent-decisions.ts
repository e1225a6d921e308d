import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { withTimeout } from '../timing/with-timeout.ts';
import type { DecisionMemory, LabelEvent, LabelOutcome } from './decision-memory.ts';
import type { RecentDecisions } from './recent-decisions.ts';

/**
 * The recent decisions with RISKGATE_WORKERS > 1: kept in the primary's memory, so feedback with
 * a caller key works whichever worker's socket the kernel hands it to (each worker binds the port
 * itself). A worker's /decide sends `remember` without waiting (about 2 µs a message, measured:
 * nothing worth batching, and sent at once it leaves before the answer does); `POST /feedback`
 * asks the primary and waits for its answer, at most `timeoutMs`.
 *
 * IPC is ordered per worker only: a label sent through worker B may reach the primary before the
 * remember of worker A that decided, when the caller is quick. The primary, finding a decision
 * unknown, so waits up to `missWaitMs` for its remember before it answers (a miss only: a known
 * decision, whoever's, is answered at once).
 */

export const FEEDBACK_REMEMBER = 'riskgate:feedback-remember';
export const FEEDBACK_LABEL = 'riskgate:feedback-label';
export const FEEDBACK_LABELLED = 'riskgate:feedback-labelled';

export interface FeedbackRemember {
  type: typeof FEEDBACK_REMEMBER;
  decisionId: string;
  keyId: string;
}
export interface FeedbackLabelRequest {
  type: typeof FEEDBACK_LABEL;
  id: number;
  decisionId: string;
  event: LabelEvent;
  operator: boolean;
}
export interface FeedbackLabelled {
  type: typeof FEEDBACK_LABELLED;
  id: number;
  outcome: LabelOutcome;
}
export type FeedbackMessage = FeedbackRemember | FeedbackLabelRequest;

export interface PrimaryRecentDecisionsOptions {
  /**
   * Longest wait, on a label of a decision not (yet) remembered, for the deciding worker's
   * remember, milliseconds. Default 200: past any IPC reordering (the remember left before the
   * answer the caller labels), below the workers' `timeoutMs`, so a true miss is a 404, never a 503.
   */
  missWaitMs?: number;
}

/** In the primary: the decisions every worker remembers, labelled for any worker. */
export class PrimaryRecentDecisions {
  readonly #decisions: RecentDecisions;
  readonly #missWaitMs: number;
  /** Labels waiting for their decision's remember, by lower-case decision id. */
  readonly #waiting = new Map<string, (() => void)[]>();

  constructor(decisions: RecentDecisions, options: PrimaryRecentDecisionsOptions = {}) {
    this.#decisions = decisions;
    this.#missWaitMs = options.missWaitMs ?? 200;
  }

  /** One worker's message; `reply` gets the answer to a label (perhaps after `missWaitMs`). */
  receive(m: FeedbackMessage, reply: (answer: FeedbackLabelled) => void): void {
    if (m.type === FEEDBACK_REMEMBER) this.#remember(m);
    else this.#label(m, reply);
  }

  #remember(m: FeedbackRemember): void {
    this.#decisions.remember(m.decisionId, m.keyId);
    const key = m.decisionId.toLowerCase();
    const waiters = this.#waiting.get(key);
    if (waiters === undefined) return;
    this.#waiting.delete(key);
    for (const wake of waiters) wake();
  }

  #label(m: FeedbackLabelRequest, reply: (answer: FeedbackLabelled) => void): void {
    const answer = () => {
      const outcome = this.#decisions.labelNow(m.decisionId, m.event, m.operator);
      reply({ type: FEEDBACK_LABELLED, id: m.id, outcome });
    };
    if (this.#decisions.get(m.decisionId) !== undefined) {
      answer();
      return;
    }
    // Not (yet) remembered: its remember may still be on its way from the worker that decided.
    const key = m.decisionId.toLowerCase();
    let done = false;
    const wake = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      answer();
    };
    const timer = setTimeout(() => {
      const rest = this.#waiting.get(key)?.filter((w) => w !== wake) ?? [];
      if (rest.length === 0) this.#waiting.delete(key);
      else this.#waiting.set(key, rest);
      wake();
    }, this.#missWaitMs);
    timer.unref();
    this.#waiting.set(key, [...(this.#waiting.get(key) ?? []), wake]);
  }
}

export interface IpcRecentDecisionsOptions {
  /** Sends to the primary (`process.send`). */
  send: (message: FeedbackMessage) => boolean;
  /** Longest wait for the primary's answer to a label, milliseconds. Default 1000 (as the IPC feature store's). */
  timeoutMs?: number;
}

/** In a worker: the primary's recent decisions. Feed it the primary's replies with `receive`. */
export class IpcRecentDecisions implements DecisionMemory {
  readonly #send: IpcRecentDecisionsOptions['send'];
  readonly #timeoutMs: number;
  readonly #pending = new Map<number, (outcome: LabelOutcome) => void>();
  #nextId = 1;

  constructor(options: IpcRecentDecisionsOptions) {
    this.#send = options.send;
    this.#timeoutMs = options.timeoutMs ?? 1000;
  }

  /** A reply from the primary; true when it was one of these. */
  receive(message: unknown): boolean {
    const m = message as Partial<FeedbackLabelled> | null;
    if (m?.type !== FEEDBACK_LABELLED || typeof m.id !== 'number' || m.outcome === undefined) return false;
    this.#pending.get(m.id)?.(m.outcome);
    this.#pending.delete(m.id);
    return true;
  }

  remember(decisionId: string, keyId: string): void {
    try {
      this.#send({ type: FEEDBACK_REMEMBER, decisionId, keyId });
    } catch {
      // The channel is closing (the primary is gone, this worker stops): the decision is answered
      // anyway; only a caller-key label of it will be refused.
    }
  }

  label(decisionId: string, event: LabelEvent, operator: boolean): Promise<LabelOutcome> {
    const id = this.#nextId++;
    const unavailable = (why: string) =>
      new RiskgateError(ErrorCode.FEEDBACK_UNAVAILABLE, `The recent decisions are not available: ${why}.`);
    const reply = new Promise<LabelOutcome>((resolve, reject) => {
      this.#pending.set(id, resolve);
      let sent = false;
      try {
        sent = this.#send({ type: FEEDBACK_LABEL, id, decisionId, event, operator });
      } catch {
        sent = false;
      }
      if (!sent) {
        this.#pending.delete(id);
        reject(unavailable('the IPC channel to the primary is closed'));
      }
    });
    return withTimeout(reply, {
      timeoutMs: this.#timeoutMs,
      onTimeout: () => {
        // A reply after this is dropped by receive().
        this.#pending.delete(id);
        return unavailable(`the primary did not answer within ${this.#timeoutMs} ms`);
      },
      ref: false,
    });
  }
}
