import { randomUUID } from 'node:crypto';
import type { Context } from 'hono';
import { storeChanges } from '../audit/audited-change.ts';
import { operatorNameOf } from '../edge/caller-auth.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { RouteEdge } from '../lifecycle/component.ts';
import type { LockoutView } from '../lockouts/lockout-record.ts';
import type { LockoutOperations } from '../lockouts/lockout-routes.ts';
import { roleAllows } from '../operators/operator.ts';
import type { Label } from '../replay/replay-labels.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type {
  DispositionInput,
  OpenCase,
  ReviewCaseDetail,
  ReviewCaseView,
  ReviewList,
  ReviewView,
} from './review-api.ts';
import type { ReviewCase, ReviewFilter, ReviewNote, ReviewStore } from './review-store.ts';

/**
 * The review queue's reads and changes, as the endpoints and the console's Review page share them
 * (docs/review-queue.md). A change is audited first (`edge.recordChange`: refused, 503, when the
 * trail cannot take it, and nothing changes), then made in the control database; a store that
 * does not answer is a 503 `RG_ERR_DATABASE_UNAVAILABLE`, never an empty queue.
 */

export interface ReviewOperationsDeps {
  store: ReviewStore;
  /** A case is due this long after it opens, ms (RISKGATE_REVIEW_SLA_HOURS). */
  slaMs: number;
  /**
   * Records a disposition's label as the console's label form does (src/feedback/record-label.ts:
   * the decision log's `feedback` line, which the rule report counts).
   */
  label(input: { decisionId: string; label: Label; note?: string | undefined; c: Context }): Promise<unknown>;
  /** A decision's verdict, user and account, from the decision store; undefined when it has none. */
  decision(id: string): Promise<ReviewedDecision | undefined>;
  /** The lock-outs' unlock (`POST /lockouts/{id}/unlock`); undefined without lock-outs. */
  lockouts?: LockoutOperations | undefined;
  /** Waits (bounded) until a label just recorded is what the next read sees. */
  settle?: (() => Promise<void>) | undefined;
  /** The service's clock. Default {@link systemClock}. */
  clock?: Clock | undefined;
}

/** What the queue reads of a case's decision. */
export interface ReviewedDecision {
  verdict: string;
  userId: string | undefined;
  accountId?: string | undefined;
}

export interface ReviewOperations {
  nowMs(): number;
  list(c: Context, view: ReviewView, limit: number): Promise<ReviewList>;
  /** Claims the open case due first for the operator of `c` (audited); null when none is open. */
  claimNext(c: Context, edge: RouteEdge): Promise<ReviewCaseView | null>;
  /** One case with its notes (404 when there is none). */
  get(id: string): Promise<ReviewCaseDetail>;
  /** The case of a decision, if it has one. */
  ofDecision(decisionId: string): Promise<ReviewCaseView | undefined>;
  /** Opens a case by hand (audited); the decision's case when it has one already. */
  open(
    c: Context,
    edge: RouteEdge,
    input: OpenCase,
  ): Promise<{ opened: boolean; reviewCase: ReviewCaseView }>;
  /** Closes a case with a disposition: fraud and legit become the decision's label. 409 when closed. */
  dispose(c: Context, edge: RouteEdge, id: string, input: DispositionInput): Promise<ReviewCaseView>;
  /** Adds a note (audited). */
  note(c: Context, edge: RouteEdge, id: string, text: string): Promise<ReviewCaseDetail>;
  /** Unlocks the lock-out the case's decision drove (the lock-outs' unlock, audited there). */
  unlock(c: Context, edge: RouteEdge, id: string, reason: string): Promise<LockoutView>;
  /**
   * Locks the case's user out (the lock-outs' own path: audited, through the outbox, its record
   * keyed by the case's decision). 409 when the case's decision has no user or a lock-out already.
   */
  lockOut(c: Context, edge: RouteEdge, id: string, reason: string): Promise<LockoutView>;
  /**
   * Gives a claimed case back to the queue (audited): its assignee's own, or any case for an
   * admin (403 otherwise); 409 when it is not claimed (or changed meanwhile).
   */
  release(c: Context, edge: RouteEdge, id: string): Promise<ReviewCaseView>;
  /**
   * Claims a case for analyst `to` (audited): an open case, or one the caller holds; an admin's,
   * any case not closed (403 otherwise); 409 when closed (or changed meanwhile). To its assignee,
   * it is answered as it is and nothing is recorded.
   */
  assign(c: Context, edge: RouteEdge, id: string, to: string): Promise<ReviewCaseView>;
}

const { answer: fromReviewStore, audited } = storeChanges(
  ErrorCode.DATABASE_UNAVAILABLE,
  'The review queue database',
);

const iso = (ms: number) => new Date(ms).toISOString();

export function reviewCaseView(r: ReviewCase, nowMs: number): ReviewCaseView {
  return {
    id: r.id,
    decisionId: r.decisionId,
    reason: r.reason,
    detail: r.detail,
    verdict: r.verdict,
    userId: r.userId,
    status: r.status,
    openedAt: iso(r.openedMs),
    openedBy: r.openedBy,
    dueAt: iso(r.dueMs),
    overdue: r.status !== 'closed' && r.dueMs < nowMs,
    assignee: r.assignee,
    claimedAt: r.claimedMs === null ? null : iso(r.claimedMs),
    disposition: r.disposition,
    closedAt: r.closedMs === null ? null : iso(r.closedMs),
    closedBy: r.closedBy,
  };
}

function noteView(n: ReviewNote) {
  return { id: n.id, author: n.author, at: iso(n.atMs), text: n.text };
}

/** Whether the operator of `c` may change a case another analyst holds (an admin). */
function actsForOthers(c: Context): boolean {
  const role = c.get('principal').operator?.role;
  return role !== undefined && roleAllows(role, 'admin');
}

function notYours(r: ReviewCaseView, what: string): RiskgateError {
  return new RiskgateError(
    ErrorCode.FORBIDDEN,
    `Review case ${r.id} is claimed by ${r.assignee ?? 'nobody'}: ${what} another analyst's case takes an admin.`,
  );
}

function changedMeanwhile(r: ReviewCaseView): RiskgateError {
  return new RiskgateError(
    ErrorCode.CONFLICT,
    `Review case ${r.id} changed meanwhile (closed, claimed or released by someone else); nothing was done.`,
  );
}

function caseNotFound(id: string): RiskgateError {
  return new RiskgateError(ErrorCode.NOT_FOUND, `No review case ${JSON.stringify(id.slice(0, 64))}.`);
}

function filterOf(view: ReviewView, who: string, nowMs: number, limit: number): ReviewFilter {
  switch (view) {
    case 'mine':
      return { status: 'claimed', assignee: who, limit };
    case 'overdue':
      return { overdueAtMs: nowMs, limit };
    default:
      return { status: view, limit };
  }
}

export function reviewOperations(deps: ReviewOperationsDeps): ReviewOperations {
  const clock = deps.clock ?? systemClock;
  const now = () => clock.nowMs();
  const get = async (id: string): Promise<ReviewCaseDetail> => {
    const found = await fromReviewStore(deps.store.get(id));
    if (found === undefined) throw caseNotFound(id);
    return { ...reviewCaseView(found.reviewCase, now()), notes: found.notes.map(noteView) };
  };
  return {
    nowMs: now,
    async list(c, view, limit) {
      const nowMs = now();
      const [cases, stats] = await fromReviewStore(
        Promise.all([
          deps.store.list(filterOf(view, operatorNameOf(c), nowMs, limit)),
          deps.store.stats(nowMs),
        ]),
      );
      return {
        items: cases.map((r) => reviewCaseView(r, nowMs)),
        queue: {
          open: stats.open,
          claimed: stats.claimed,
          overdue: stats.overdue,
          oldestOpenAgeSeconds:
            stats.oldestOpenMs === undefined ? 0 : Math.max(0, (nowMs - stats.oldestOpenMs) / 1000),
        },
      };
    },
    async claimNext(c, edge) {
      const who = operatorNameOf(c);
      const nowMs = now();
      // The target names the queue (the case is not known yet).
      const change = { action: 'review.claim_next', target: 'review-queue' } as const;
      const claimed = await audited(c, edge, change, () => deps.store.claimNext(who, nowMs));
      return claimed === undefined ? null : reviewCaseView(claimed, nowMs);
    },
    get,
    async ofDecision(decisionId) {
      const found = await fromReviewStore(deps.store.ofDecision(decisionId));
      return found === undefined ? undefined : reviewCaseView(found, now());
    },
    async open(c, edge, input) {
      const decision = await deps.decision(input.decisionId);
      if (decision === undefined) {
        throw new RiskgateError(
          ErrorCode.NOT_FOUND,
          `The decision store has no decision ${input.decisionId}: a case reviews a stored decision.`,
        );
      }
      const change = {
        action: 'review.open',
        target: input.decisionId,
        detail: input.note === undefined ? {} : { note: input.note },
      } as const;
      const openedMs = now();
      const who = operatorNameOf(c);
      const result = await audited(c, edge, change, () =>
        deps.store.open({
          id: randomUUID(),
          decisionId: input.decisionId,
          reason: 'manual',
          detail: input.note ?? `sent to review by ${who}`,
          verdict: decision.verdict,
          userId: decision.userId ?? null,
          openedMs,
          openedBy: who,
          dueMs: openedMs + deps.slaMs,
        }),
      );
      return { opened: result.opened, reviewCase: reviewCaseView(result.reviewCase, openedMs) };
    },
    async dispose(c, edge, id, input) {
      const existing: ReviewCaseView = await get(id);
      if (existing.status === 'closed') throw alreadyClosed(existing);
      await edge.recordChange(c, {
        action: 'review.disposition',
        target: id,
        detail: {
          decisionId: existing.decisionId,
          disposition: input.disposition,
          ...(input.note && { note: input.note }),
        },
      });
      // The label first: a close that then fails leaves the case open (try again; the same label
      // again changes nothing), never a case closed whose label was lost.
      if (input.disposition !== 'unsure') {
        await deps.label({ decisionId: existing.decisionId, label: input.disposition, note: input.note, c });
      }
      const nowMs = now();
      const who = operatorNameOf(c);
      const closed = await fromReviewStore(
        (async () => {
          if (input.note !== undefined) {
            await deps.store.addNote({
              id: randomUUID(),
              caseId: id,
              author: who,
              atMs: nowMs,
              text: input.note,
            });
          }
          return deps.store.close(id, input.disposition, who, nowMs);
        })(),
      );
      if (closed === undefined) throw alreadyClosed(existing);
      await deps.settle?.();
      return reviewCaseView(closed, nowMs);
    },
    async note(c, edge, id, text) {
      await get(id);
      const change = { action: 'review.note', target: id, detail: { text } } as const;
      const added = await audited(c, edge, change, () =>
        deps.store.addNote({ id: randomUUID(), caseId: id, author: operatorNameOf(c), atMs: now(), text }),
      );
      if (!added) throw caseNotFound(id);
      return get(id);
    },
    async unlock(c, edge, id, reason) {
      const existing = await get(id);
      if (deps.lockouts === undefined) {
        throw new RiskgateError(ErrorCode.NOT_FOUND, 'The lock-outs are not running in this riskgate.');
      }
      // A decision's lock-out record is keyed by the decision's id (src/lockouts/lockout-tables.ts).
      return deps.lockouts.unlock(c, edge, existing.decisionId, reason);
    },
    async lockOut(c, edge, id, reason) {
      const existing = await get(id);
      if (deps.lockouts === undefined) {
        throw new RiskgateError(ErrorCode.NOT_FOUND, 'The lock-outs are not running in this riskgate.');
      }
      if (existing.userId === null) {
        throw new RiskgateError(
          ErrorCode.CONFLICT,
          `Review case ${id}'s decision names no Admin user: there is nobody to lock out.`,
        );
      }
      const accountId = (await deps.decision(existing.decisionId))?.accountId;
      return deps.lockouts.lockOut(c, edge, {
        decisionId: existing.decisionId,
        userId: existing.userId,
        accountId,
        reason,
      });
    },
    async release(c, edge, id) {
      const existing = await get(id);
      if (existing.status !== 'claimed' || existing.assignee === null) {
        throw new RiskgateError(
          ErrorCode.CONFLICT,
          `Review case ${id} is ${existing.status}, not claimed: there is no claim to release.`,
        );
      }
      if (existing.assignee !== operatorNameOf(c) && !actsForOthers(c)) throw notYours(existing, 'releasing');
      const from = existing.assignee;
      const change = { action: 'review.release', target: id, detail: { from } } as const;
      const released = await audited(c, edge, change, () => deps.store.release(id, from));
      if (released === undefined) throw changedMeanwhile(existing);
      return reviewCaseView(released, now());
    },
    async assign(c, edge, id, to) {
      const existing = await get(id);
      if (existing.status === 'closed') throw alreadyClosed(existing);
      if (existing.assignee === to) return existing;
      const from = existing.assignee;
      if (from !== null && from !== operatorNameOf(c) && !actsForOthers(c))
        throw notYours(existing, 'reassigning');
      const change = { action: 'review.assign', target: id, detail: { from, to } } as const;
      const nowMs = now();
      const assigned = await audited(c, edge, change, () => deps.store.assign(id, from, to, nowMs));
      if (assigned === undefined) throw changedMeanwhile(existing);
      return reviewCaseView(assigned, nowMs);
    },
  };
}

function alreadyClosed(r: ReviewCaseView): RiskgateError {
  return new RiskgateError(
    ErrorCode.CONFLICT,
    `Review case ${r.id} is closed already (${r.disposition ?? 'no disposition'} by ${r.closedBy ?? 'unknown'}).`,
  );
}
