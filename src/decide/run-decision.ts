import { randomUUID } from 'node:crypto';
import type { OneTimeCode } from '../admin/admin-responses.ts';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import { type CompiledCounter, type CounterPlan, planCounters } from '../features/velocity-counters.ts';
import type {
  CompiledPolicy,
  PolicyAction,
  PolicyDecision,
  PolicyInput,
  PolicySignalName,
} from '../policy/policy-types.ts';
import { rolloutBucket } from '../policy-versions/policy-version-sync.ts';
import type { SnoozeReader } from '../snoozes/snooze-sync.ts';
import { checkSubject, type SubjectBindingMode, type SubjectCheck } from '../subject/subject-binding.ts';
import type { UpstreamResult } from '../upstream/upstream-result.ts';
import type { AdminPort, PolicySource } from './decide-ports.ts';
import type { DecideRequest } from './decide-request.ts';
import {
  type InputPorts,
  landInputs,
  policyInputOf,
  shadowOnlySignals,
  startInputs,
} from './decision-inputs.ts';
import { type CallTiming, unavailableReason } from './gather.ts';
import { toPolicyRequest } from './policy-request.ts';

/**
 * The /decide hot path: fetch what the active policy needs, all at once, under one deadline;
 * evaluate; fetch a one-time code if the policy asks for one. Everything that happens after the
 * answer (actions, decision log, metrics) is the caller's, from the returned `DecisionRun`.
 */

export interface RunDecisionDeps extends InputPorts {
  admin: AdminPort;
  policies: PolicySource;
  /** The whole decision's budget, milliseconds (RISKGATE_DEADLINE_MS). */
  deadlineMs: number;
  /** How the Admin user is checked against the account (src/subject/). Default `username`. */
  subjectBinding?: SubjectBindingMode;
  /**
   * The shadow policy (RISKGATE_SHADOW_POLICY_PATH): evaluated on the same inputs after the answer,
   * never acting. Inputs only it reads are fetched within the same deadline (`run.shadow.shadowOnly`).
   */
  shadow?: { current(): CompiledPolicy | undefined } | undefined;
  /** The rule snoozes' in-memory snapshot (src/snoozes/); absent: nothing is ever snoozed. */
  snoozes?: SnoozeReader | undefined;
  /**
   * The staged policy version (src/policy-versions/policy-version-sync.ts): in shadow it takes the
   * shadow's place; at a percentage, the accounts in its buckets are served it, with the active
   * policy in the shadow's place (so both verdicts are recorded), and fall back to the active
   * policy's verdict when the staged one fails to evaluate.
   */
  rollout?: { staged(): StagedPolicy | undefined } | undefined;
}

/** What `RunDecisionDeps.rollout` hands a decision. */
export interface StagedPolicy {
  version: { id: string };
  policy: CompiledPolicy;
  stage: 'shadow' | 'percent';
  /** Accounts whose bucket is below this are served the staged version. */
  basisPoints: number;
}

export type OneTimeCodeOutcome =
  | { status: 'done'; code: OneTimeCode }
  | { status: 'failed'; reason: string }
  | { status: 'skipped'; reason: string };

export interface DecisionRun {
  decisionId: string;
  receivedAt: Date;
  request: DecideRequest;
  policy: CompiledPolicy;
  input: PolicyInput;
  decision: PolicyDecision;
  calls: CallTiming[];
  /** Policy evaluation time, milliseconds. */
  evaluationMs: number;
  /** Set when the policy asked for a one-time code. */
  oneTimeCode?: OneTimeCodeOutcome;
  /** Whether the Admin user (and device) named are the account's (src/subject/subject-binding.ts). */
  subject: SubjectCheck;
  /**
   * Set when a staged version (at a percentage) served this account: `fellBack` when it failed to
   * evaluate and the active policy's verdict was answered instead.
   */
  staged?: { versionId: string; fellBack: boolean };
  /** The shadow policy and what it is evaluated on (after the answer); absent without one. */
  shadow?: { policy: CompiledPolicy; input: PolicyInput; shadowOnly: PolicySignalName[] };
  /** The velocity counters this decision applies to (active and shadow): counted once it is decided. */
  counters?: CounterPlan;
  elapsedMs: number;
  /**
   * `performance.now()` when the decision's deadline passes (RISKGATE_DEADLINE_MS from its
   * arrival): what is left of it bounds the action write after evaluation.
   */
  deadlineAtMs: number;
}

/** The counters of the active and the shadow policy, each once (a shared definition is one counter). */
function countersOf(policy: CompiledPolicy, shadow: CompiledPolicy | undefined): readonly CompiledCounter[] {
  const active = policy.velocityCounters ?? [];
  const candidate = shadow?.velocityCounters ?? [];
  if (candidate.length === 0) return active;
  const ids = new Set(active.map((c) => c.storeId));
  return [...active, ...candidate.filter((c) => !ids.has(c.storeId))];
}

/**
 * The policy that answers this account and the one evaluated in the shadow's place. Without a
 * staged version: the active policy and the file's shadow. A staged version in shadow, or at a
 * percentage for an account outside its buckets (or with no accountId): the active policy
 * answers, the staged one in the shadow's place. Inside its buckets: the staged one answers, the
 * active one in the shadow's place.
 */
export function pickPolicies(
  deps: RunDecisionDeps,
  accountId: string | undefined,
): { policy: CompiledPolicy; shadow: CompiledPolicy | undefined; stagedId?: string } {
  const active = deps.policies.current();
  const staged = deps.rollout?.staged();
  if (staged === undefined) return { policy: active, shadow: deps.shadow?.current() };
  if (
    staged.stage === 'percent' &&
    accountId !== undefined &&
    accountId !== '' &&
    rolloutBucket(accountId, staged.version.id) < staged.basisPoints
  )
    return { policy: staged.policy, shadow: active, stagedId: staged.version.id };
  return { policy: active, shadow: staged.policy };
}

/** Whether the policy itself failed (an engine error, a rule's expression), not an input it lacked. */
function failedToEvaluate(decision: PolicyDecision): boolean {
  return (
    decision.matchedRules.some((r) => r.error !== undefined) ||
    (decision.degraded?.rules.some((r) => r.reason === 'evaluation_error') ?? false)
  );
}

/** Floor of the one-time code's budget when the fan-out used the whole deadline, milliseconds. */
export const ONE_TIME_CODE_MIN_BUDGET_MS = 100;

/**
 * Runs one decision. Never rejects for upstream failures; they become unavailable inputs.
 * `arrivedAtMs` (`performance.now()` when riskgate read the request's headers) starts the deadline
 * there: the caller's budget includes the wait for the loop, authentication and the body, so under
 * load a decision that waited answers degraded in time rather than whole and late. Default: now.
 */
export async function runDecision(
  deps: RunDecisionDeps,
  request: DecideRequest,
  traceparent?: string,
  callerGone?: AbortSignal,
  arrivedAtMs?: number,
): Promise<DecisionRun> {
  const startedAt = performance.now();
  const deadlineMs = Math.max(0, deps.deadlineMs - (arrivedAtMs === undefined ? 0 : startedAt - arrivedAtMs));
  const receivedAt = new Date();
  const picked = pickPolicies(deps, request.accountId);
  let policy = picked.policy;
  let shadow = picked.shadow;
  const binding = deps.subjectBinding ?? 'username';
  const policyRequest = toPolicyRequest(request);
  const counters = countersOf(policy, shadow);
  const counterPlan =
    counters.length > 0 && deps.features !== undefined ? planCounters(counters, policyRequest) : undefined;
  const shadowOnly = shadowOnlySignals(policy, shadow);
  const inputs = {
    ports: deps,
    request,
    policy,
    shadow,
    bindsSubject: binding !== 'off',
    counterPlan,
    budgetMs: deadlineMs,
    nowMs: Date.now(),
    traceparent,
  };
  const deadlineAtMs = startedAt + deadlineMs;
  const started = startInputs(inputs, shadowOnly, { deadlineAtMs, signal: callerGone });
  const { draft, calls } = landInputs(started, await started.gathering);

  let input = policyInputOf(draft, policyRequest, receivedAt);
  if (deps.snoozes !== undefined) input.snoozes = deps.snoozes.forDecision();
  // What the policy in the shadow's place reads: the answer's inputs and those only it needed.
  let shadowInput =
    shadowOnly.length === 0
      ? input
      : { ...input, signals: { ...draft.values.signals, ...draft.shadowSignals } };
  const evaluationStartedAt = performance.now();
  let decision = policy.evaluate(input);
  let staged: DecisionRun['staged'];
  if (picked.stagedId !== undefined) {
    staged = { versionId: picked.stagedId, fellBack: false };
    if (shadow !== undefined && failedToEvaluate(decision)) {
      // The candidate's failure is its own: the control's verdict answers, the candidate's is recorded.
      staged.fellBack = true;
      [policy, shadow] = [shadow, policy];
      [input, shadowInput] = [shadowInput, input];
      decision = policy.evaluate(input);
    }
  }
  const evaluationMs = performance.now() - evaluationStartedAt;

  const { adminUnavailable, devices } = input;
  const run: DecisionRun = {
    decisionId: randomUUID(),
    receivedAt,
    request,
    policy,
    input,
    decision,
    calls,
    evaluationMs,
    elapsedMs: 0,
    deadlineAtMs,
    subject: checkSubject(
      binding,
      request,
      input.user,
      policy.requirements.adminDevices && adminUnavailable?.devices === undefined ? devices : undefined,
    ),
  };
  if (counterPlan !== undefined) run.counters = counterPlan;
  if (staged !== undefined) run.staged = staged;
  if (shadow !== undefined) run.shadow = { policy: shadow, input: shadowInput, shadowOnly };
  const otc = decision.actions.find((a) => a.type === 'one_time_code');
  if (otc !== undefined) {
    run.oneTimeCode = await oneTimeCode(deps, run, otc, traceparent, deadlineAtMs);
  }
  run.elapsedMs = performance.now() - startedAt;
  return run;
}

/**
 * The one-time code the policy asked for, after evaluation, with the rest of the deadline (at
 * least `ONE_TIME_CODE_MIN_BUDGET_MS`). Never for a user that is not (or may not be) the account's.
 */
async function oneTimeCode(
  deps: RunDecisionDeps,
  run: DecisionRun,
  action: PolicyAction,
  traceparent: string | undefined,
  deadlineAtMs: number,
): Promise<OneTimeCodeOutcome> {
  const { userId } = run.request;
  if (userId === undefined) return { status: 'skipped', reason: 'no_user_id' };
  if (run.subject.status === 'mismatch') return { status: 'skipped', reason: 'subject_mismatch' };
  if (run.subject.status === 'unverified') return { status: 'skipped', reason: 'subject_unverified' };
  const budget = Math.max(deadlineAtMs - performance.now(), ONE_TIME_CODE_MIN_BUDGET_MS);
  const result = await deps.admin
    .createOneTimeCode(
      userId,
      oneTimeCodeParams(action),
      traceparent === undefined ? { timeoutMs: budget } : { timeoutMs: budget, traceparent },
    )
    .catch((cause: unknown) => clientRejected<OneTimeCode>('admin-otc', cause));
  const outcome = result.ok ? 'ok' : unavailableReason(result.error);
  run.calls.push({ name: 'admin-otc', durationMs: result.durationMs, outcome });
  return result.ok ? { status: 'done', code: result.value } : { status: 'failed', reason: outcome };
}

function oneTimeCodeParams(action: PolicyAction): { length?: number; valid_secs?: number } {
  const params: { length?: number; valid_secs?: number } = {};
  if (action.length !== undefined) params.length = action.length;
  if (action.validSecs !== undefined) params.valid_secs = action.validSecs;
  return params;
}

/** A client must resolve; one that rejects anyway (a bug) becomes an internal failure of that call. */
function clientRejected<T>(name: string, cause: unknown): UpstreamResult<T> {
  const error = new UpstreamError(
    ErrorCode.INTERNAL,
    `${name}: the client rejected`,
    { upstream: 'admin' },
    { cause },
  );
  return { ok: false, error, durationMs: 0 };
}
