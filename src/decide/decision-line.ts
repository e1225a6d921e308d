import { DECISION_LOG_SCHEMA_VERSION } from '../decision-log/decision-record.ts';
import type { DecideResponse } from './decide-response.ts';
import type { DecisionRun } from './run-decision.ts';

/**
 * A decision's line in the decision log. It holds what replaying the decision offline needs
 * (src/replay/): the request, every input the policy saw (signal envelopes, Admin user and devices,
 * what was unavailable and why), the policy revision, the outcome with its explanation, and the
 * timings. One-time codes are secrets: only whether one was issued is kept.
 */

export interface DecisionLine {
  kind: 'decision';
  schemaVersion: typeof DECISION_LOG_SCHEMA_VERSION;
  decisionId: string;
  /** When the request arrived (RFC 3339); the policy's `now`. */
  at: string;
  request: DecisionRun['request'];
  policy: { name: string; revision: string };
  inputs: {
    signals: DecisionRun['input']['signals'];
    user: DecisionRun['input']['user'];
    devices: DecisionRun['input']['devices'];
    adminUnavailable: DecisionRun['input']['adminUnavailable'];
    /** Counter values and history features as the policy read them (absent when it read none). */
    velocity?: DecisionRun['input']['velocity'];
    history?: DecisionRun['input']['history'];
    featuresUnavailable?: DecisionRun['input']['featuresUnavailable'];
    /** Inputs of rows kept by name (src/policy/inputs/input-row.ts `valueRow`); absent when none. */
    extra?: DecisionRun['input']['extra'];
  };
  outcome: Omit<DecisionRun['decision'], 'policy' | 'actions'>;
  actions: DecideResponse['actions'];
  degraded: boolean;
  /** The shadow policy's outcome on the same inputs (RISKGATE_SHADOW_POLICY_PATH); it took no action. */
  shadow?: ShadowOutcome;
  /**
   * Set when a policy version staged at a percentage served this account (its bucket): `fellBack`
   * when it failed to evaluate and the active version's verdict answered (then in `policy`, the
   * staged one's in `shadow`). Otherwise `shadow` holds the active version's verdict.
   */
  staged?: { versionId: string; fellBack: boolean };
  timings: {
    /** From the request's arrival to the answer, milliseconds. */
    totalMs: number;
    evaluationMs: number;
    calls: DecisionRun['calls'];
  };
}

export interface ShadowOutcome {
  policy: { name: string; revision: string };
  verdict: string;
  score: number;
  rules: string[];
  /** Inputs fetched only for the shadow (`signals.<name>`): in `inputs`, unseen by the active policy. */
  shadowOnlyInputs?: string[];
}

/**
 * The decision line of `run`, answered with `response` after `totalMs`. Built field by field in the
 * line's order, optional members assigned only when present (no spread of a temporary object per
 * member): one is built for every decision (issue 32).
 */
export function decisionLine(
  run: DecisionRun,
  response: DecideResponse,
  totalMs: number,
  shadow?: ShadowOutcome,
): DecisionLine {
  const { policy: _p, actions: _a, ...outcome } = run.decision;
  const input = run.input;
  const inputs: DecisionLine['inputs'] = {
    // With a shadow policy, what only it read too (so a replay of the candidate has it).
    signals: run.shadow === undefined ? input.signals : run.shadow.input.signals,
    user: input.user,
    devices: input.devices,
    adminUnavailable: input.adminUnavailable,
  };
  if (input.velocity !== undefined) inputs.velocity = input.velocity;
  if (input.history !== undefined) inputs.history = input.history;
  if (input.featuresUnavailable !== undefined) inputs.featuresUnavailable = input.featuresUnavailable;
  if (input.extra !== undefined) inputs.extra = input.extra;
  const line: Omit<DecisionLine, 'timings'> & Partial<Pick<DecisionLine, 'timings'>> = {
    kind: 'decision',
    schemaVersion: DECISION_LOG_SCHEMA_VERSION,
    decisionId: run.decisionId,
    at: run.receivedAt.toISOString(),
    request: run.request,
    policy: run.decision.policy,
    inputs,
    outcome,
    actions: response.actions.map(lineAction),
    degraded: response.degraded,
  };
  if (shadow !== undefined) line.shadow = shadow;
  if (run.staged !== undefined) line.staged = run.staged;
  line.timings = { totalMs, evaluationMs: run.evaluationMs, calls: run.calls };
  return line as DecisionLine;
}

/** An answered action as the log keeps it: a one-time code is a secret, only its issue is kept. */
function lineAction({ oneTimeCode, ...rest }: DecideResponse['actions'][number]) {
  return oneTimeCode === undefined ? rest : { ...rest, oneTimeCode: '[redacted]' };
}
