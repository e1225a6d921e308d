import type { ActionDispatcher, AppendCompanion } from '../actions/action-dispatcher.ts';
import { planActions } from '../actions/admin-actions.ts';
import { type DecisionLog, DISCARD_DECISION_LOG } from '../decision-log/decision-log.ts';
import { DECISION_LOG_SCHEMA_VERSION } from '../decision-log/decision-record.ts';
import type { LifecycleLog } from '../lifecycle/component.ts';
import type { LockoutSink, PlannedLockout } from '../lockouts/lockout-record.ts';
import type { PolicyAction } from '../policy/policy-types.ts';
import type { Clock } from '../timing/clock.ts';
import { type AskUserAnswer, type AskUserLink, AskUserStore, type LinkState } from './ask-user-store.ts';
import type { TokenCodec } from './ask-user-token.ts';

/**
 * What a "was this you?" answer does (docs/ask-user.md), in this order: the token is checked (its
 * mac, before any read), the answer recorded on the link's row (once: the store's conditional
 * UPDATE), then kept as an outcome of the decision (`ask_user`, `yes` or `no`: a label by
 * src/outcomes/outcome-labels.ts). A "no" whose link names lock-outs records the answer in the
 * outbox append that queues them, with their records (the decisions' own path,
 * src/decide/decide-actions.ts): the answer and its lock-outs commit together or not at all, so a
 * crash between them cannot use up the link and lose the lock-out. An answer never unlocks anyone.
 * A refusal changes nothing.
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
    let actionQueued = false;
    try {
      const open = answer === 'no' ? await this.#o.store.state(key, nowMs) : undefined;
      if (open?.state === 'open' && open.link.onNo.length > 0) {
        actionQueued = await this.#lockOut(open.link, nowMs);
        // Not queued: the append (and the answer in it) rolled back; what the link says now.
        recorded = actionQueued
          ? { state: 'answered', link: open.link }
          : await this.#afterRollback(key, nowMs);
      } else {
        recorded = await this.#o.store.answer(key, answer, nowMs);
      }
    } catch (error) {
      this.#o.log({ level: 'error', msg: 'ask-user answer not recorded', error: String(error) });
      return this.#refuse('unavailable');
    }
    if (recorded.state !== 'answered')
      return this.#refuse(recorded.state === 'unknown' ? 'invalid' : recorded.state);
    this.#writeOutcome(recorded.link, answer, nowMs);
    this.counts[answer]++;
    return { ok: true, answer, actionQueued };
  }

  /**
   * Why a "no" whose append did not commit was not recorded: another answer won the link, or it
   * expired meanwhile (the link says so), or the outbox refused (open still: unavailable, the user
   * may answer again; nothing changed).
   */
  async #afterRollback(key: string, nowMs: number): Promise<Exclude<LinkState, { state: 'open' }>> {
    const now = await this.#o.store.state(key, nowMs);
    if (now.state !== 'open') return now;
    this.counts.actionFailures++;
    this.#o.log({
      level: 'error',
      msg: 'ask-user "no": the outbox did not take its lock-out; nothing recorded, the link stays open',
      decisionId: now.link.decisionId,
    });
    throw new Error('the outbox did not take the lock-out');
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

  /**
   * Queues the link's lock-outs with their records and the answer, in one append; false when the
   * append did not commit (the link was answered meanwhile, or the outbox refused).
   */
  async #lockOut(link: AskUserLink, nowMs: number): Promise<boolean> {
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
    const records = this.#o.lockouts.companion(planned);
    const companion: AppendCompanion = {
      ...(records.specs !== undefined && { specs: records.specs }),
      async write(tx, writtenMs) {
        // Another answer first: fail the append, so nothing of this one is written.
        if (!(await AskUserStore.answerIn(tx, link.tokenKey, 'no', nowMs)))
          throw new Error('the link was answered meanwhile');
        await records.write(tx, writtenMs);
      },
      committed: () => records.committed?.(),
    };
    const results = await this.#o.actions().submit(
      plans.flatMap((p) => p.jobs),
      { companion },
    );
    // Deferred: this process holds the append and writes it when the store answers (the outbox's
    // own promise for a slow store, as for a decision's lock-out).
    return !results.some((r) => r === 'refused');
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
