import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { type IpcReply, type IpcRequest, IpcRequests, replyTo } from '../ipc/ipc-requests.ts';
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
export const FEEDBACK_ANSWERED = 'riskgate:feedback-answered';

export interface FeedbackRemember {
  type: typeof FEEDBACK_REMEMBER;
  decisionId: string;
  keyId: string;
}
interface FeedbackLabel {
  type: typeof FEEDBACK_LABEL;
  decisionId: string;
  event: LabelEvent;
  operator: boolean;
}
interface FeedbackAnswered {
  type: typeof FEEDBACK_ANSWERED;
  decisionId: string;
  keyId: string;
}

/** A label, answered by an `IpcReply` whose result is the `LabelOutcome`. */
export type FeedbackLabelRequest = IpcRequest<FeedbackLabel>;
/** Whether a key was answered a decision (an outcome's check), answered with a boolean. */
export type FeedbackAnsweredRequest = IpcRequest<FeedbackAnswered>;
export type FeedbackMessage = FeedbackRemember | FeedbackLabelRequest | FeedbackAnsweredRequest;

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
  receive(m: FeedbackMessage, reply: (answer: IpcReply) => void): void {
    if (m.type === FEEDBACK_REMEMBER) this.#remember(m);
    else if (m.type === FEEDBACK_LABEL)
      this.#whenRemembered(m.decisionId, () =>
        reply(replyTo(m, () => this.#decisions.labelNow(m.decisionId, m.event, m.operator))),
      );
    else
      this.#whenRemembered(m.decisionId, () =>
        reply(replyTo(m, () => this.#decisions.get(m.decisionId)?.keyId === m.keyId)),
      );
  }

  #remember(m: FeedbackRemember): void {
    this.#decisions.remember(m.decisionId, m.keyId);
    const key = m.decisionId.toLowerCase();
    const waiters = this.#waiting.get(key);
    if (waiters === undefined) return;
    this.#waiting.delete(key);
    for (const wake of waiters) wake();
  }

  /** Calls `answer` at once when `decisionId` is remembered, else at its remember or after `missWaitMs`. */
  #whenRemembered(decisionId: string, answer: () => void): void {
    if (this.#decisions.get(decisionId) !== undefined) {
      answer();
      return;
    }
    // Not (yet) remembered: its remember may still be on its way from the worker that decided.
    const key = decisionId.toLowerCase();
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
  /** Sends to the primary (`process.send`): the remembers, and the requests of its own channel. */
  send: (message: FeedbackMessage) => boolean;
  /**
   * The worker's request channel to its primary, shared with its other requests. Default one of
   * its own over `send`, with `timeoutMs` (default 1000, as the IPC feature store's), fed by `receive`.
   */
  requests?: IpcRequests;
  timeoutMs?: number;
}

const unavailable = (why: string) =>
  new RiskgateError(ErrorCode.FEEDBACK_UNAVAILABLE, `The recent decisions are not available: ${why}.`);

/** In a worker: the primary's recent decisions. */
export class IpcRecentDecisions implements DecisionMemory {
  readonly #send: IpcRecentDecisionsOptions['send'];
  readonly #requests: IpcRequests;

  constructor(options: IpcRecentDecisionsOptions) {
    this.#send = options.send;
    this.#requests =
      options.requests ??
      new IpcRequests({ send: (m) => options.send(m as FeedbackMessage), timeoutMs: options.timeoutMs });
  }

  /** A reply from the primary (to this channel's requests); true when it was one. */
  receive(message: unknown): boolean {
    return this.#requests.receive(message);
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
    const message: FeedbackLabel = { type: FEEDBACK_LABEL, decisionId, event, operator };
    return this.#requests.request<LabelOutcome, FeedbackLabel>(message, unavailable);
  }

  answered(decisionId: string, keyId: string): Promise<boolean> {
    const message: FeedbackAnswered = { type: FEEDBACK_ANSWERED, decisionId, keyId };
    return this.#requests.request<boolean, FeedbackAnswered>(message, unavailable);
  }
}
