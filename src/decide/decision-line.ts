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
  /** Signals last, and in them {@link LAST_IN_HEAD} last: see there. */
  inputs: {
    user: DecisionRun['input']['user'];
    devices: DecisionRun['input']['devices'];
    adminUnavailable: DecisionRun['input']['adminUnavailable'];
    /** Counter values and history features as the policy read them (absent when it read none). */
    velocity?: DecisionRun['input']['velocity'];
    history?: DecisionRun['input']['history'];
    featuresUnavailable?: DecisionRun['input']['featuresUnavailable'];
    /** Inputs of rows kept by name (src/policy/inputs/input-row.ts `valueRow`); absent when none. */
    extra?: DecisionRun['input']['extra'];
    signals: DecisionRun['input']['signals'];
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
 * The answer member written last in the line's head (what precedes `outcome`): latestProximity's
 * `result.supportingSignals`, a fifth of the head's bytes and a third of its `JSON.parse`, which a
 * policy that never reads `matchedSignals` leaves unread (src/policy's `ANSWER_MEMBERS_FILLING`).
 * Last, replay finds it from the head's end and parses the text before it plus a constant close,
 * not a text cut around it (src/replay/replay-record.ts; issue 32: ~1.5 µs of ~19 a line). So the
 * signals are written last in `inputs`, this signal last in them, and in its envelope and answer
 * each object on the way written last. Only the order of members changes: names and shapes are the
 * vendor's (docs/vendor-api.md), and JSON readers ignore order.
 */
export const LAST_IN_HEAD = {
  signal: 'latestProximity',
  /** From the envelope to the member's holder. */
  at: ['response', 'result'],
  member: 'supportingSignals',
} as const;

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
  const inputs = {
    user: input.user,
    devices: input.devices,
    adminUnavailable: input.adminUnavailable,
  } as DecisionLine['inputs'];
  if (input.velocity !== undefined) inputs.velocity = input.velocity;
  if (input.history !== undefined) inputs.history = input.history;
  if (input.featuresUnavailable !== undefined) inputs.featuresUnavailable = input.featuresUnavailable;
  if (input.extra !== undefined) inputs.extra = input.extra;
  // With a shadow policy, what only it read too (so a replay of the candidate has it).
  inputs.signals = withLastInHead(run.shadow === undefined ? input.signals : run.shadow.input.signals);
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

/**
 * `signals` with {@link LAST_IN_HEAD}'s signal last and, when it answered, each object from its
 * envelope to the member's holder with the next one on the way (then the member) last. Copies only
 * those objects: the policy's own input is left as it is.
 */
export function withLastInHead<S extends object>(signals: S): S {
  const all = signals as Record<string, unknown>;
  const envelope = all[LAST_IN_HEAD.signal];
  if (envelope === undefined) return signals;
  const out: Record<string, unknown> = {};
  for (const k in all) if (k !== LAST_IN_HEAD.signal) out[k] = all[k];
  out[LAST_IN_HEAD.signal] = memberLast(envelope, 0);
  return out as S;
}

/** `value` with the member `LAST_IN_HEAD` names at `depth` of its path last, and so on down. */
function memberLast(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const path = LAST_IN_HEAD.at;
  const key = depth < path.length ? path[depth]! : LAST_IN_HEAD.member;
  const o = value as Record<string, unknown>;
  if (o[key] === undefined) return value;
  const out: Record<string, unknown> = {};
  for (const k in o) if (k !== key) out[k] = o[k];
  out[key] = depth < path.length ? memberLast(o[key], depth + 1) : o[key];
  return out;
}

/** An answered action as the log keeps it: a one-time code is a secret, only its issue is kept. */
function lineAction({ oneTimeCode, ...rest }: DecideResponse['actions'][number]) {
  return oneTimeCode === undefined ? rest : { ...rest, oneTimeCode: '[redacted]' };
}
