import type { AdminDevice, AdminUser } from '../admin/admin-schemas.ts';
import type { DecideRequest } from '../decide/decide-request.ts';
import { toPolicyRequest } from '../decide/policy-request.ts';
import type { PolicyInput, Verdict } from '../policy/policy-types.ts';

/**
 * A decision log line (src/decide/decision-line.ts, schemaVersion 1) read back as what the
 * policy saw: its recorded inputs become a `PolicyInput` again, with the decision's own time as
 * `now`. The check is by shape, not zod: replay reads millions of lines, and a line that does not
 * look like a decision is reported, not guessed at.
 */

export interface LoggedDecision {
  decisionId: string;
  input: PolicyInput;
  recorded: { verdict: Verdict; score: number; rules: string[]; revision: string };
}

export type ReadLine =
  | { kind: 'decision'; decision: LoggedDecision }
  | { kind: 'other' }
  | { kind: 'bad'; why: string };

const KIND_PREFIX = '{"kind":"';
const DECISION_PREFIX = '{"kind":"decision"';

const VERDICTS: ReadonlySet<string> = new Set(['allow', 'challenge', 'deny']);

interface DecisionLineShape {
  kind?: unknown;
  schemaVersion?: unknown;
  decisionId?: unknown;
  at?: unknown;
  request?: DecideRequest;
  policy?: { revision?: unknown };
  inputs?: {
    signals?: PolicyInput['signals'];
    user?: AdminUser;
    devices?: AdminDevice[];
    adminUnavailable?: PolicyInput['adminUnavailable'];
    velocity?: PolicyInput['velocity'];
    history?: PolicyInput['history'];
    featuresUnavailable?: PolicyInput['featuresUnavailable'];
    extra?: PolicyInput['extra'];
  };
  outcome?: { verdict?: unknown; score?: unknown; matchedRules?: { id?: unknown }[] };
  shed?: unknown;
}

const OUTCOME_KEY = ',"outcome":{';
const MATCHED_RULES_KEY = '"matchedRules":[';

/**
 * Only what replay reads of a decision line riskgate wrote: everything before `outcome` (kind,
 * ids, time, request, policy, inputs, in the order src/decide/decision-line.ts writes them), and
 * of `outcome` its head up to the end of `matchedRules` (verdict, score, the rules). The rest of
 * the line (the outcome's explanation, rule descriptions, actions, timings: a third of its bytes)
 * is never parsed. The cuts are where those keys open at the line's top level: a cut anywhere
 * deeper leaves brackets unbalanced and `JSON.parse` refuses it (no unescaped `"` can sit inside
 * a string), so a piece that parses is the right one. Undefined when the line is not so laid out
 * (an overload answer, another writer's order): the caller parses it whole.
 */
function neededFields(text: string): DecisionLineShape | undefined {
  const at = text.lastIndexOf(OUTCOME_KEY);
  if (at === -1) return undefined;
  const rules = text.indexOf(MATCHED_RULES_KEY, at);
  if (rules === -1) return undefined;
  // The array's end: followed by the outcome's next key, or by the outcome's own end.
  const from = rules + MATCHED_RULES_KEY.length - 1;
  const beforeKey = text.indexOf('],"', from);
  const beforeEnd = text.indexOf(']}', from);
  const rulesEnd = beforeKey === -1 || (beforeEnd !== -1 && beforeEnd < beforeKey) ? beforeEnd : beforeKey;
  if (rulesEnd === -1) return undefined;
  try {
    const head = JSON.parse(`${text.slice(0, at)}}`) as DecisionLineShape;
    if (head.inputs === undefined) return undefined;
    head.outcome = JSON.parse(`${text.slice(at + OUTCOME_KEY.length - 1, rulesEnd + 1)}}`);
    return typeof head.outcome?.verdict === 'string' ? head : undefined;
  } catch {
    return undefined;
  }
}

/** One line of a decision log. */
export function readDecisionLine(text: string): ReadLine {
  // riskgate writes `kind` first: an action, label or feedback line is passed over unparsed (a log
  // holds about one of them per decision, and parsing them was half of a replay's time).
  if (text.startsWith(KIND_PREFIX) && !text.startsWith(DECISION_PREFIX)) return { kind: 'other' };
  let v: DecisionLineShape | undefined = text.startsWith(DECISION_PREFIX) ? neededFields(text) : undefined;
  if (v === undefined) {
    try {
      v = JSON.parse(text) as DecisionLineShape;
    } catch {
      return { kind: 'bad', why: 'not JSON' };
    }
  }
  if (v === null || typeof v !== 'object') return { kind: 'bad', why: 'not an object' };
  if (v.kind !== 'decision') return { kind: 'other' };
  // An overload verdict was never evaluated: nothing to replay.
  if (v.inputs === undefined && v.outcome !== undefined && 'shed' in v.outcome) return { kind: 'other' };
  if (v.schemaVersion !== undefined && v.schemaVersion !== 1) {
    return { kind: 'bad', why: `schemaVersion ${String(v.schemaVersion)} is not one this riskgate reads` };
  }
  const o = v.outcome;
  if (
    typeof v.decisionId !== 'string' ||
    typeof v.at !== 'string' ||
    typeof v.request?.accountId !== 'string' ||
    typeof v.inputs?.signals !== 'object' ||
    !Array.isArray(v.inputs.devices) ||
    o === undefined ||
    typeof o.verdict !== 'string' ||
    !VERDICTS.has(o.verdict) ||
    typeof o.score !== 'number' ||
    !Array.isArray(o.matchedRules)
  ) {
    return { kind: 'bad', why: 'not a decision line (decisionId, at, request, inputs, outcome)' };
  }
  const now = new Date(v.at);
  if (Number.isNaN(now.getTime())) return { kind: 'bad', why: `at is not a time: ${v.at.slice(0, 40)}` };
  const input: PolicyInput = {
    signals: v.inputs.signals ?? {},
    user: v.inputs.user,
    devices: v.inputs.devices,
    request: toPolicyRequest(v.request!),
    now,
  };
  if (v.inputs.adminUnavailable !== undefined) input.adminUnavailable = v.inputs.adminUnavailable;
  if (v.inputs.velocity !== undefined) input.velocity = v.inputs.velocity;
  if (v.inputs.history !== undefined) input.history = v.inputs.history;
  if (v.inputs.featuresUnavailable !== undefined) input.featuresUnavailable = v.inputs.featuresUnavailable;
  if (v.inputs.extra !== undefined) input.extra = v.inputs.extra;
  return {
    kind: 'decision',
    decision: {
      decisionId: v.decisionId,
      input,
      recorded: {
        verdict: o.verdict as Verdict,
        score: o.score,
        rules: o.matchedRules.map((r) => String(r.id)),
        revision: typeof v.policy?.revision === 'string' ? v.policy.revision : '',
      },
    },
  };
}
