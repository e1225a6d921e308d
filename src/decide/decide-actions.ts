import { ACTION_SUBMIT_MIN_BUDGET_MS } from '../actions/action-dispatcher.ts';
import { type ActionJob, type ActionPlan, planActions } from '../actions/admin-actions.ts';
import type { PlannedLockout } from '../lockouts/lockout-record.ts';
import type { PolicyDecision } from '../policy/policy-types.ts';
import type { DecideDeps } from './decide-deps.ts';
import { type ActionReport, actionReport, oneTimeCodeReport } from './decide-response.ts';
import type { DecisionRun } from './run-decision.ts';

/**
 * Reports every action of the decision: the one-time code as fetched, the others queued (they
 * start on a later turn, after this answer is written), deferred or skipped with the reason; a
 * lock-out the policy withheld because the first factor did not pass is reported skipped too, so
 * the caller sees it was warranted and not taken.
 */
export function startActions(
  deps: Pick<DecideDeps, 'actions' | 'lockouts'> & { decide: Pick<DecideDeps['decide'], 'admin'> },
  run: DecisionRun,
  traceparent: string | undefined,
): ActionReport[] | Promise<ActionReport[]> {
  const submitted = submitActions(deps, run, traceparent);
  if (Array.isArray(submitted)) return recordLockouts(deps, run, submitted);
  return submitted.then((reports) => recordLockouts(deps, run, reports));
}

/** The planned lock-outs not promised with the actions (submitActions wrote those), recorded now. */
function recordLockouts(
  deps: Pick<DecideDeps, 'lockouts'>,
  run: DecisionRun,
  reports: ActionReport[],
): ActionReport[] {
  if (deps.lockouts !== undefined) {
    const lockouts = plannedLockouts(run, reports).filter((l) => l.status !== 'queued');
    if (lockouts.length > 0) deps.lockouts.planned(lockouts);
  }
  return reports;
}

/**
 * The reports of the decision's actions; a promise of them only when something is submitted (most
 * decisions submit nothing: no async layer for them, issue 32).
 */
function submitActions(
  deps: Pick<DecideDeps, 'actions' | 'lockouts'>,
  run: DecisionRun,
  traceparent: string | undefined,
): ActionReport[] | Promise<ActionReport[]> {
  const { actions } = run.decision;
  const reports = withheldReports(run.decision.suppressedActions);
  if (actions.length === 0) return reports;
  const otc = actions.find((a) => a.type === 'one_time_code');
  if (otc !== undefined) reports.push(oneTimeCodeReport(run, otc));
  // The Admin user could not be read: it may not be the account's, so each action verifies it
  // first, once the Admin API answers (deferred, never taken on an unchecked identity).
  const unverified = run.subject.status === 'unverified';
  const targets = {
    decisionId: run.decisionId,
    userId: run.request.userId,
    deviceId: run.request.deviceId,
    traceparent,
    nowMs: run.receivedAt.getTime(),
    ...(unverified && { verifyAccountId: run.request.accountId }),
  };
  // Reports keep the plans' order: a submitted plan's slot is filled once the submit is answered.
  const submitted: { plan: ActionPlan; first: number; slot: number }[] = [];
  const jobs: ActionJob[] = [];
  for (const plan of planActions(actions, targets)) {
    if (plan.skipped !== undefined) {
      reports.push(actionReport(plan.action, 'skipped', plan.skipped));
      continue;
    }
    submitted.push({ plan, first: jobs.length, slot: reports.length });
    reports.push(
      unverified
        ? actionReport(plan.action, 'deferred', 'subject_unverified')
        : actionReport(plan.action, 'queued'),
    );
    jobs.push(...plan.jobs);
  }
  if (jobs.length === 0) return reports;
  // One submit for the decision: with the durable outbox, one group-committed write before the
  // answer says `queued`, waited for no longer than the decision's deadline allows.
  const timeoutMs = Math.max(ACTION_SUBMIT_MIN_BUDGET_MS, run.deadlineAtMs - performance.now());
  // The promised lock-outs' records (and events) in the same transaction as the actions.
  const promised = plannedLockouts(run, reports).filter((l) => l.status === 'queued');
  const companion = promised.length > 0 ? deps.lockouts?.companion(promised) : undefined;
  return deps.actions.submit(jobs, { timeoutMs, companion }).then((results) => {
    for (const { plan, first, slot } of submitted) {
      const own = results.slice(first, first + plan.jobs.length);
      if (own.includes('refused')) reports[slot] = actionReport(plan.action, 'failed', 'queue_refused');
      else if (own.includes('deferred'))
        reports[slot] = actionReport(plan.action, 'deferred', 'outbox_timeout');
    }
    return reports;
  });
}

/**
 * The lock-outs of a decision's reports, for their records: queued (or deferred: promised),
 * failed, or withheld (skipped for want of a passed first factor). A lock-out without a user id
 * has nobody to record.
 */
function plannedLockouts(run: DecisionRun, reports: readonly ActionReport[]): PlannedLockout[] {
  const userId = run.request.userId;
  if (userId === undefined) return [];
  const out: PlannedLockout[] = [];
  for (const r of reports) {
    if (r.type !== 'lock_out_user') continue;
    const status = r.status === 'skipped' ? 'withheld' : r.status === 'failed' ? 'failed' : 'queued';
    const action = run.decision.actions.find((a) => a.type === 'lock_out_user' && a.name === r.name);
    out.push({
      decisionId: run.decisionId,
      userId,
      accountId: run.request.accountId,
      rule: r.source,
      createdMs: run.receivedAt.getTime(),
      status,
      reason: status === 'queued' ? undefined : r.reason,
      durationMs: action?.durationMs,
      escalateWithinMs: action?.escalateWithinMs,
    });
  }
  return out;
}

/** The lock-outs withheld for want of a passed first factor, as `skipped` reports. */
function withheldReports(suppressed: PolicyDecision['suppressedActions']): ActionReport[] {
  const reports: ActionReport[] = [];
  if (suppressed !== undefined)
    for (const s of suppressed)
      if (s.reason === 'first_factor_not_passed')
        reports.push(actionReport({ type: s.type, source: s.source, name: s.name }, 'skipped', s.reason));
  return reports;
}
