import { randomUUID } from 'node:crypto';
import type { OneTimeCode } from '../admin/admin-responses.ts';
import type { AdminDevice, AdminUser } from '../admin/admin-schemas.ts';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import type { FeatureReader } from '../features/feature-reader.ts';
import { DEFAULT_HISTORY_MAX_LAG_SECONDS, type HistoryFeatures } from '../features/history-features.ts';
import { type CompiledCounter, type CounterPlan, planCounters } from '../features/velocity-counters.ts';
import type {
  AdminReadSettings,
  CompiledPolicy,
  PolicyAction,
  PolicyDecision,
  PolicyInput,
  PolicySignalName,
  SignalOutcome,
} from '../policy/policy-types.ts';
import { checkSubject, type SubjectBindingMode, type SubjectCheck } from '../subject/subject-binding.ts';
import type { CallOptions, UpstreamResult } from '../upstream/upstream-result.ts';
import type { AdminPort, PolicySource, SignalFetcher } from './decide-ports.ts';
import type { DecideRequest } from './decide-request.ts';
import { toPolicyRequest } from './policy-request.ts';
import { applicability, buildSignalQuery, MISSING_IDENTIFIERS } from './signal-queries.ts';

/**
 * The /decide hot path: fetch what the active policy needs, all at once, under one deadline;
 * evaluate; fetch a one-time code if the policy asks for one. Everything that happens after the
 * answer (actions, decision log, metrics) is the caller's, from the returned `DecisionRun`.
 */

export interface RunDecisionDeps {
  signals: SignalFetcher;
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
  /**
   * Velocity counters and event history (src/features/). Without it, a policy that reads them sees
   * them unavailable (`not_configured`) and nothing is counted.
   */
  features?: FeatureReader | undefined;
}

/** Reason of a feature read when riskgate runs without a feature store. */
export const FEATURES_NOT_CONFIGURED = 'not_configured';

/** One upstream call (or step) of a decision, for Server-Timing, metrics and the decision log. */
export interface CallTiming {
  /** `signals-<name>`, `admin-user`, `admin-devices`, `admin-otc`. */
  name: string;
  durationMs: number;
  /** `ok`, or why not: `timeout`, `deadline`, an `RG_ERR_*` code. */
  outcome: string;
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

/** Floor of the one-time code's budget when the fan-out used the whole deadline, milliseconds. */
export const ONE_TIME_CODE_MIN_BUDGET_MS = 100;

/** The reason an upstream failure is reported under (`SignalOutcome.reason`). */
export function unavailableReason(error: UpstreamError): string {
  if (error.code === ErrorCode.UPSTREAM_TIMEOUT) return 'timeout';
  if (error.code === ErrorCode.DEADLINE_EXCEEDED) return 'deadline';
  if (error.code === ErrorCode.CIRCUIT_OPEN) return 'circuit_open';
  return error.code;
}

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
  const policy = deps.policies.current();
  const { requirements, signalSettings } = policy;
  const shadowPolicy = deps.shadow?.current();
  // Signals only the shadow reads: fetched beside the others, kept out of the active decision.
  const shadowSignals: PolicyInput['signals'] = {};
  const shadowOnly: PolicySignalName[] =
    shadowPolicy === undefined
      ? []
      : [...shadowPolicy.requirements.signals].filter((s) => !requirements.signals.has(s));

  const controller = new AbortController();
  const signal = controller.signal;
  // The caller hung up: nobody will read the answer, so the fan-out stops now (as at the deadline).
  if (callerGone !== undefined) {
    if (callerGone.aborted) controller.abort();
    else callerGone.addEventListener('abort', () => controller.abort(), { once: true, signal });
  }
  const signals: PolicyInput['signals'] = {};
  const calls: CallTiming[] = [];
  let user: AdminUser | undefined;
  let devices: AdminDevice[] = [];
  const adminUnavailable: { user?: string; devices?: string } = {};
  const featuresUnavailable: { velocity?: string; history?: string } = {};
  let velocity: Record<string, number> | undefined;
  let history: HistoryFeatures | undefined;

  // One map, one promise and one timer per decision: the whole fan-out join.
  const inFlight = new Map<string, (reason: string) => void>();
  let closed = false;
  let release!: () => void;
  const allSettled = new Promise<void>((resolve) => {
    release = resolve;
  });
  const settle = (name: string) => {
    inFlight.delete(name);
    if (inFlight.size === 0 && !closed) {
      closed = true;
      release();
    }
  };
  /**
   * Starts a call: records its timing and hands its result to `onResult`, unless the deadline (or
   * `ownTimeoutMs`, when given) came first, in which case `onUnavailable` marks it unavailable with
   * `deadline` (or `timeout`) and a late result is ignored.
   */
  const start = <T>(
    name: string,
    call: Promise<UpstreamResult<T>>,
    onResult: (r: UpstreamResult<T>) => void,
    onUnavailable: (reason: string) => void,
    ownTimeoutMs?: number,
  ) => {
    inFlight.set(name, onUnavailable);
    let timer: NodeJS.Timeout | undefined;
    const handle = (result: UpstreamResult<T>) => {
      if (closed || !inFlight.has(name)) return;
      if (timer !== undefined) clearTimeout(timer);
      const outcome = result.ok ? 'ok' : unavailableReason(result.error);
      calls.push({ name, durationMs: result.durationMs, outcome });
      onResult(result);
      settle(name);
    };
    if (ownTimeoutMs !== undefined && ownTimeoutMs < deadlineMs) {
      timer = setTimeout(() => {
        if (closed || !inFlight.has(name)) return;
        calls.push({ name, durationMs: performance.now() - startedAt, outcome: 'timeout' });
        onUnavailable('timeout');
        settle(name);
      }, ownTimeoutMs);
    }
    call.then(handle, (cause: unknown) => handle(failed<T>(name, cause, performance.now() - startedAt)));
  };

  // A call's own timeout may exceed the deadline: the deadline then ends it, reported as such.
  const adminTimeout = (settings: AdminReadSettings | undefined) => settings?.timeoutMs ?? deadlineMs;
  const now = Date.now();
  const deadlineAt = now + deadlineMs;
  /**
   * A call's options. `deadlineAt` is the earlier of the decision's deadline and the call's own
   * timeout from now: a client only retries (or waits out a Retry-After) when that fits before it,
   * so a signal's timeout bounds the whole call, a retry included, not each attempt.
   */
  const options = (timeoutMs: number): CallOptions => {
    const callDeadlineAt = Math.min(deadlineAt, now + timeoutMs);
    return traceparent === undefined
      ? { signal, deadlineAt: callDeadlineAt, timeoutMs }
      : { signal, deadlineAt: callDeadlineAt, timeoutMs, traceparent };
  };

  const fetchSignal = (
    name: PolicySignalName,
    into: PolicyInput['signals'],
    settings: CompiledPolicy['signalSettings'][PolicySignalName],
    label: string,
  ) => {
    const applies = applicability(name, request);
    if (applies !== 'ok') {
      into[name] = { status: 'unavailable', reason: applies };
      return;
    }
    const timeoutMs = settings?.timeoutMs ?? deadlineMs;
    start(
      label,
      deps.signals(name, buildSignalQuery(name, request, settings?.params), options(timeoutMs)),
      (result) => {
        (into as Record<PolicySignalName, SignalOutcome>)[name] = result.ok
          ? { status: 'ok', response: result.value }
          : { status: 'unavailable', reason: unavailableReason(result.error) };
      },
      (reason) => {
        into[name] = { status: 'unavailable', reason };
      },
    );
  };
  for (const name of requirements.signals)
    fetchSignal(name, signals, signalSettings[name], `signals-${name}`);
  for (const name of shadowOnly) {
    fetchSignal(name, shadowSignals, shadowPolicy?.signalSettings[name], `shadow-signals-${name}`);
  }
  // Admin reads go through the client's shared cache, which bounds a caller by the deadline signal
  // alone: their own timeout is enforced here. With subject binding the user is read even when the
  // policy does not use it: riskgate must know whose account it would act on.
  const binding = deps.subjectBinding ?? 'username';
  const needsUser = requirements.adminUser || shadowPolicy?.requirements.adminUser === true;
  if (needsUser || (binding !== 'off' && request.userId !== undefined)) {
    if (request.userId === undefined) adminUnavailable.user = MISSING_IDENTIFIERS;
    else {
      const timeoutMs = adminTimeout(policy.adminSettings?.user);
      start(
        'admin-user',
        deps.admin.getUserCached(request.userId, options(timeoutMs)),
        (r) => {
          if (r.ok) user = r.value;
          else adminUnavailable.user = unavailableReason(r.error);
        },
        (reason) => {
          adminUnavailable.user = reason;
        },
        timeoutMs,
      );
    }
  }
  if (requirements.adminDevices || shadowPolicy?.requirements.adminDevices === true) {
    if (request.userId === undefined) adminUnavailable.devices = MISSING_IDENTIFIERS;
    else {
      const timeoutMs = adminTimeout(policy.adminSettings?.devices);
      start(
        'admin-devices',
        deps.admin.getUserDevicesCached(request.userId, undefined, options(timeoutMs)),
        (r) => {
          if (r.ok) devices = r.value.devices;
          else adminUnavailable.devices = unavailableReason(r.error);
        },
        (reason) => {
          adminUnavailable.devices = reason;
        },
        timeoutMs,
      );
    }
  }

  // Velocity and history: the feature store, under the same deadline, each with its own timeout.
  const policyRequest = toPolicyRequest(request);
  const counters = countersOf(policy, shadowPolicy);
  const counterPlan =
    counters.length > 0 && deps.features !== undefined ? planCounters(counters, policyRequest) : undefined;
  const features = deps.features;
  if (requirements.velocity || shadowPolicy?.requirements.velocity === true) {
    if (features === undefined || counterPlan === undefined)
      featuresUnavailable.velocity = FEATURES_NOT_CONFIGURED;
    else {
      const timeoutMs =
        policy.featureSettings?.velocity?.timeoutMs ??
        shadowPolicy?.featureSettings?.velocity?.timeoutMs ??
        deadlineMs;
      start(
        'velocity',
        features.readVelocity(counterPlan, now),
        (r) => {
          if (r.ok) velocity = r.value;
          else featuresUnavailable.velocity = unavailableReason(r.error);
        },
        (reason) => {
          featuresUnavailable.velocity = reason;
        },
        timeoutMs,
      );
    }
  }
  if (requirements.history || shadowPolicy?.requirements.history === true) {
    const settings = policy.featureSettings?.history ?? shadowPolicy?.featureSettings?.history;
    if (features === undefined || features.historyConfigured === false)
      featuresUnavailable.history = FEATURES_NOT_CONFIGURED;
    else if (request.userId === undefined) featuresUnavailable.history = MISSING_IDENTIFIERS;
    else {
      start(
        'history',
        features.readHistory(
          request.userId,
          now,
          settings?.maxLagMs ?? DEFAULT_HISTORY_MAX_LAG_SECONDS * 1000,
        ),
        (r) => {
          if (r.ok) history = r.value;
          else featuresUnavailable.history = unavailableReason(r.error);
        },
        (reason) => {
          featuresUnavailable.history = reason;
        },
        settings?.timeoutMs ?? deadlineMs,
      );
    }
  }

  if (inFlight.size > 0) {
    const timer = setTimeout(() => {
      if (closed) return;
      closed = true;
      controller.abort();
      const at = performance.now() - startedAt;
      for (const [name, onUnavailable] of inFlight) {
        onUnavailable('deadline');
        calls.push({ name, durationMs: at, outcome: 'deadline' });
      }
      release();
    }, deadlineMs);
    await allSettled;
    clearTimeout(timer);
  }

  const input: PolicyInput = { signals, user, devices, request: policyRequest, now: receivedAt };
  if (adminUnavailable.user !== undefined || adminUnavailable.devices !== undefined) {
    input.adminUnavailable = adminUnavailable;
  }
  if (velocity !== undefined) input.velocity = velocity;
  if (history !== undefined) input.history = history;
  if (featuresUnavailable.velocity !== undefined || featuresUnavailable.history !== undefined) {
    input.featuresUnavailable = featuresUnavailable;
  }
  const evaluationStartedAt = performance.now();
  const decision = policy.evaluate(input);
  const evaluationMs = performance.now() - evaluationStartedAt;

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
    deadlineAtMs: startedAt + deadlineMs,
    subject: checkSubject(
      binding,
      request,
      user,
      requirements.adminDevices && adminUnavailable.devices === undefined ? devices : undefined,
    ),
  };
  if (counterPlan !== undefined) run.counters = counterPlan;
  if (shadowPolicy !== undefined) {
    run.shadow = {
      policy: shadowPolicy,
      input: shadowOnly.length === 0 ? input : { ...input, signals: { ...signals, ...shadowSignals } },
      shadowOnly,
    };
  }
  const otc = decision.actions.find((a) => a.type === 'one_time_code');
  if (otc !== undefined) {
    if (request.userId === undefined) run.oneTimeCode = { status: 'skipped', reason: 'no_user_id' };
    else if (run.subject.status === 'mismatch' || run.subject.status === 'unverified') {
      // Never a code for a user that is not (or may not be) the account's.
      run.oneTimeCode = {
        status: 'skipped',
        reason: `subject_${run.subject.status === 'mismatch' ? 'mismatch' : 'unverified'}`,
      };
    } else {
      const budget = Math.max(deadlineMs - (performance.now() - startedAt), ONE_TIME_CODE_MIN_BUDGET_MS);
      const result = await deps.admin
        .createOneTimeCode(
          request.userId,
          oneTimeCodeParams(otc),
          traceparent === undefined ? { timeoutMs: budget } : { timeoutMs: budget, traceparent },
        )
        .catch((cause: unknown) => failed<OneTimeCode>('admin-otc', cause, 0));
      const outcome = result.ok ? 'ok' : unavailableReason(result.error);
      calls.push({ name: 'admin-otc', durationMs: result.durationMs, outcome });
      run.oneTimeCode = result.ok
        ? { status: 'done', code: result.value }
        : { status: 'failed', reason: outcome };
    }
  }
  run.elapsedMs = performance.now() - startedAt;
  return run;
}

function oneTimeCodeParams(action: PolicyAction): { length?: number; valid_secs?: number } {
  const params: { length?: number; valid_secs?: number } = {};
  if (action.length !== undefined) params.length = action.length;
  if (action.validSecs !== undefined) params.valid_secs = action.validSecs;
  return params;
}

/** A client must resolve; one that rejects anyway (a bug) becomes an internal failure of that call. */
function failed<T>(name: string, cause: unknown, durationMs: number): UpstreamResult<T> {
  const upstream = name.startsWith('admin') ? 'admin' : 'signals';
  const error = new UpstreamError(
    ErrorCode.INTERNAL,
    `${name}: the client rejected`,
    { upstream },
    { cause },
  );
  return { ok: false, error, durationMs };
}
