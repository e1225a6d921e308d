import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import { planActions } from '../actions/admin-actions.ts';
import { type DecisionLog, DISCARD_DECISION_LOG } from '../decision-log/decision-log.ts';
import { DECISION_LOG_SCHEMA_VERSION } from '../decision-log/decision-record.ts';
import type { LifecycleLog } from '../lifecycle/component.ts';
import type { LockoutSink, PlannedLockout } from '../lockouts/lockout-record.ts';
import type { PolicyAction } from '../policy/policy-types.ts';
import type { Clock } from '../timing/clock.ts';
import type { AskUserAnswer, AskUserLink, AskUserStore, LinkState } from './ask-user-store.ts';
import type { TokenCodec } from './ask-user-token.ts';

/**
 * What a "was this you?" answer does (docs/ask-user.md), in this order: the token is checked (its
 * mac, before any read), the answer recorded on the link's row (once: the store's conditional
 * UPDATE), then kept as an outcome of the decision (`ask_user`, `yes` or `no`: a label by
 * src/outcomes/outcome-labels.ts), and a "no" queues the lock-outs the policy named, through the
 * outbox with their records (the decisions' own path, src/decide/decide-actions.ts). An answer
 * never unlocks anyone. A refusal changes nothing.
 */

/** Who reported an answer, in the decision log and the decision store (`reported_by`). */
export const ASK_USER_REPORTER = 'ask-user';

export type PeekResult = { ok: true; link: AskUserLink } | { ok: false; reason: Refusal };
export type AnswerResult =
  | { ok: true; answer: AskUserAnswer; actionQueued: boolean }
  | { ok: false; reason: Refusal };
export type Refusal = 'used' | 'expired' | 'invalid' | 'unavailable';

/** Counts of what the answers did (metrics). */
export interface AnswerCounts {
  yes: number;
  no: number;
  refused: number;
  /** "No" answers whose lock-out the outbox did not take (logged; the label was kept). */
  actionFailures: number;
}

export class AskUserAnswers {
  readonly counts: AnswerCounts = { yes: 0, no: 0, refused: 0, actionFailures: 0 };
  readonly #o: AskUserAnswersOptions;

  constructor(o: AskUserAnswersOptions) {
    this.#o = o;
  }

  /** The link's state, changing nothing (a GET: a mail scanner's prefetch must not answer). */
  async peek(token: string): Promise<PeekResult> {
    const key = this.#o.codec?.verify(token);
    if (key === undefined) return this.#refuse('invalid');
    let state: LinkState;
    try {
      state = await this.#o.store.state(key, this.#o.clock.nowMs());
    } catch {
      return this.#refuse('unavailable');
    }
    if (state.state === 'open') return { ok: true, link: state.link };
    return this.#refuse(state.state === 'unknown' ? 'invalid' : state.state);
  }

  /** Records `answer` once; a "no" takes the policy's lock-outs. */
  async answer(token: string, answer: AskUserAnswer): Promise<AnswerResult> {
    const key = this.#o.codec?.verify(token);
    if (key === undefined) return this.#refuse('invalid');
    // The answer is a label kept in the decision log: with it off, it would be lost.
    if (this.#o.decisionLog === DISCARD_DECISION_LOG) return this.#refuse('unavailable');
    const nowMs = this.#o.clock.nowMs();
    let recorded: Awaited<ReturnType<AskUserStore['answer']>>;
    try {
      recorded = await this.#o.store.answer(key, answer, nowMs);
    } catch (error) {
      this.#o.log({ level: 'error', msg: 'ask-user answer not recorded', error: String(error) });
      return this.#refuse('unavailable');
    }
    if (recorded.state !== 'answered')
      return this.#refuse(recorded.state === 'unknown' ? 'invalid' : recorded.state);
    const { link } = recorded;
    this.#writeOutcome(link, answer, nowMs);
    this.counts[answer]++;
    const actionQueued = answer === 'no' && (await this.#lockOut(link, nowMs));
    return { ok: true, answer, actionQueued };
  }

  #refuse(reason: Refusal): { ok: false; reason: Refusal } {
    this.counts.refused++;
    return { ok: false, reason };
  }

  #writeOutcome(link: AskUserLink, answer: AskUserAnswer, nowMs: number): void {
    const at = new Date(nowMs).toISOString();
    this.#o.decisionLog.write({
      kind: 'outcome',
      schemaVersion: DECISION_LOG_SCHEMA_VERSION,
      at,
      decisionId: link.decisionId,
      type: 'ask_user',
      value: answer,
      occurredAt: at,
      reportedBy: ASK_USER_REPORTER,
      reportedAs: 'user',
    });
  }

  /** Queues the link's lock-outs with their records; false when there were none or the outbox refused. */
  async #lockOut(link: AskUserLink, nowMs: number): Promise<boolean> {
    if (link.onNo.length === 0) return false;
    const actions: PolicyAction[] = link.onNo.map((a) => ({
      type: 'lock_out_user',
      source: 'askUser.onNo',
      name: a.name,
      ...(a.durationMs !== undefined && { durationMs: a.durationMs }),
      ...(a.escalateWithinMs !== undefined && { escalateWithinMs: a.escalateWithinMs }),
    }));
    const plans = planActions(actions, {
      decisionId: link.decisionId,
      userId: link.userId,
      deviceId: undefined,
      nowMs,
    });
    const planned: PlannedLockout[] = actions.map((a) => ({
      decisionId: link.decisionId,
      userId: link.userId,
      accountId: link.accountId,
      rule: a.source,
      createdMs: nowMs,
      status: 'queued',
      durationMs: a.durationMs,
      escalateWithinMs: a.escalateWithinMs,
    }));
    try {
      const results = await this.#o.actions().submit(
        plans.flatMap((p) => p.jobs),
        { companion: this.#o.lockouts.companion(planned) },
      );
      if (!results.some((r) => r === 'refused' || r === 'deferred')) return true;
    } catch {
      // Counted and logged below: the answer stands, its lock-out was not queued.
    }
    this.counts.actionFailures++;
    this.#o.log({
      level: 'error',
      msg: 'ask-user "no": lock-out not queued by the outbox (the label was kept)',
      decisionId: link.decisionId,
    });
    return false;
  }
}

export interface AskUserAnswersOptions {
  store: AskUserStore;
  /** Undefined without RISKGATE_ASK_USER_SECRET: every token is invalid. */
  codec: TokenCodec | undefined;
  /** The outbox (started after this component's store: read when a "no" comes). */
  actions: () => Pick<ActionDispatcher, 'submit'>;
  lockouts: Pick<LockoutSink, 'companion'>;
  /** Where the answer is kept as an outcome (teed into the decision store). */
  decisionLog: DecisionLog;
  clock: Clock;
  log: LifecycleLog;
}
