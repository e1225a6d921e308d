import type { AdminDevice, AdminUser } from '../admin/admin-schemas.ts';
import type { DecideRequest } from '../decide/decide-request.ts';
import { toPolicyRequest } from '../decide/policy-request.ts';
import { POLICY_SIGNAL_NAMES, type PolicyInput, type Verdict } from '../policy/policy-types.ts';
import { scanObject } from './replay-json-scan.ts';

/**
 * A decision log line (src/decide/decision-line.ts, schemaVersion 1) read back as what the
 * policy saw: its recorded inputs become a `PolicyInput` again, with the decision's own time as
 * `now`. The check is by shape, not zod: replay reads millions of lines, and a line that does not
 * look like a decision is reported, not guessed at.
 */

/** ASCII, so a byte search finds exactly where a search of the decoded line would. */
const ascii = (text: string) => Buffer.from(text, 'latin1');

export interface LoggedDecision {
  decisionId: string;
  input: PolicyInput;
  recorded: { verdict: Verdict; score: number; rules: string[]; revision: string };
}

/**
 * What a candidate reads of the inputs a line may hold more of: the signals (a line holds those its
 * active and shadow policies read), from the compiled policy's `requirements`.
 */
export interface LineNeeds {
  signals: ReadonlySet<string>;
  /**
   * The keys of the signals it does not read as they open in a line, less their opening quote: a
   * search for a needle that starts with `"` stops at every string of the line (4x slower).
   */
  unread: readonly Buffer[];
}

export function lineNeeds(policy: { requirements: { signals: ReadonlySet<string> } }): LineNeeds {
  const signals = policy.requirements.signals;
  const unread = POLICY_SIGNAL_NAMES.filter((n) => !signals.has(n)).map((n) => ascii(`${n}":{"status":"`));
  return { signals, unread };
}

export type ReadLine =
  | { kind: 'decision'; decision: LoggedDecision }
  | { kind: 'other' }
  | { kind: 'bad'; why: string };

const KIND_PREFIX = ascii('{"kind":"');
const DECISION_PREFIX = ascii('{"kind":"decision"');

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

const OUTCOME_KEY = ascii(',"outcome":{');
const MATCHED_RULES_KEY = ascii('"matchedRules":[');

/**
 * Only what replay reads of a decision line riskgate wrote: everything before `outcome` (kind,
 * ids, time, request, policy, inputs, in the order src/decide/decision-line.ts writes them), and
 * of `outcome` its head up to the end of `matchedRules` (verdict, score, the rules). The rest of
 * the line (the outcome's explanation, rule descriptions, actions, timings: a third of its bytes)
 * is never decoded nor parsed. The cuts are where those keys open at the line's top level: a cut
 * anywhere deeper leaves brackets unbalanced and `JSON.parse` refuses it (no unescaped `"` can sit
 * inside a string), so a piece that parses is the right one. The keys are ASCII and no byte of a
 * multi-byte UTF-8 character is, so the byte search cuts where a search of the decoded text would.
 * Undefined when the line is not so laid out (an overload answer, another writer's order): the
 * caller parses it whole.
 */
function neededFields(line: Buffer, needs: LineNeeds | undefined): DecisionLineShape | undefined {
  const at = line.lastIndexOf(OUTCOME_KEY);
  if (at === -1) return undefined;
  const rules = line.indexOf(MATCHED_RULES_KEY, at);
  if (rules === -1) return undefined;
  // The array's end: the first `]` followed by the outcome's next key (`],"`) or its own end (`]}`).
  let rulesEnd = line.indexOf(0x5d, rules + MATCHED_RULES_KEY.length);
  while (rulesEnd !== -1) {
    const next = line[rulesEnd + 1];
    if (next === 0x7d || (next === 0x2c && line[rulesEnd + 2] === 0x22)) break;
    rulesEnd = line.indexOf(0x5d, rulesEnd + 1);
  }
  if (rulesEnd === -1) return undefined;
  try {
    const head =
      (needs === undefined ? undefined : withoutUnreadSignals(line, at, needs)) ??
      (JSON.parse(`${line.toString('utf8', 0, at)}}`) as DecisionLineShape);
    if (head.inputs === undefined) return undefined;
    head.outcome = JSON.parse(`${line.toString('utf8', at + OUTCOME_KEY.length - 1, rulesEnd + 1)}}`);
    return typeof head.outcome?.verdict === 'string' ? head : undefined;
  } catch {
    return undefined;
  }
}

const INPUTS_KEY = ascii(',"inputs":{"signals":{');

/**
 * The head (`line[0, at)`, what precedes `outcome`) without the signals the candidate does not
 * read, when the line holds any: the part before `inputs` parsed as one piece (it parses only if
 * `inputs` is a key of the line's own object), the signals object's members found by
 * `scanObject` and only those the candidate reads parsed, and the inputs after `signals` (the
 * Admin reads, the features) parsed as one piece that must end where `outcome` begins. A signal
 * passed over is checked for balance only: a broken byte inside it no longer makes the line
 * unreadable, as a broken byte past `matchedRules` never did. Undefined when the line holds no
 * signal the candidate leaves unread, or is not laid out so: the head is parsed whole.
 */
function withoutUnreadSignals(line: Buffer, at: number, needs: LineNeeds): DecisionLineShape | undefined {
  const inputsAt = line.indexOf(INPUTS_KEY);
  if (inputsAt === -1 || inputsAt > at) return undefined;
  const signalsAt = inputsAt + INPUTS_KEY.length - 1;
  const inputs = line.subarray(signalsAt, at);
  if (!needs.unread.some((key) => inputs.includes(key))) return undefined;
  const head = JSON.parse(`${line.toString('utf8', 0, inputsAt)}}`) as DecisionLineShape;
  const signals: Record<string, unknown> = {};
  const signalsEnd = scanObject(line, signalsAt, at, (keyStart, keyEnd, valueStart, valueEnd) => {
    const name = line.toString('latin1', keyStart, keyEnd);
    if (needs.signals.has(name)) signals[name] = JSON.parse(line.toString('utf8', valueStart, valueEnd));
  });
  if (signalsEnd === -1) return undefined;
  // After the signals: more inputs, or the end of `inputs` right before `outcome`.
  const rest =
    line[signalsEnd] === 0x2c
      ? (JSON.parse(`{${line.toString('utf8', signalsEnd + 1, at)}`) as DecisionLineShape['inputs'])
      : signalsEnd === at - 1 && line[signalsEnd] === 0x7d
        ? {}
        : undefined;
  if (rest === undefined || 'signals' in rest) return undefined;
  head.inputs = { ...rest, signals: signals as PolicyInput['signals'] };
  return head;
}

function startsWith(buf: Uint8Array, start: number, end: number, prefix: Uint8Array): boolean {
  if (end - start < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (buf[start + i] !== prefix[i]) return false;
  return true;
}

const OTHER: ReadLine = Object.freeze({ kind: 'other' });
const NOT_JSON: ReadLine = Object.freeze({ kind: 'bad', why: 'not JSON' });

/** One line of a decision log. */
export function readDecisionLine(text: string, needs?: LineNeeds): ReadLine {
  const bytes = Buffer.from(text, 'utf8');
  return readDecisionBytes(bytes, 0, bytes.length, needs);
}

/**
 * One line of a decision log, `buf[start, end)`, decoded only as far as it is read; with `needs`,
 * the signals a candidate does not read are not parsed.
 */
export function readDecisionBytes(buf: Buffer, start: number, end: number, needs?: LineNeeds): ReadLine {
  // riskgate writes `kind` first: an action, label or feedback line is passed over unparsed, and
  // undecoded (a log holds about one of them per decision).
  const decision = startsWith(buf, start, end, DECISION_PREFIX);
  if (!decision && startsWith(buf, start, end, KIND_PREFIX)) return OTHER;
  const line = buf.subarray(start, end);
  let v: DecisionLineShape | undefined = decision ? neededFields(line, needs) : undefined;
  if (v === undefined) {
    try {
      v = JSON.parse(line.toString('utf8')) as DecisionLineShape;
    } catch {
      return NOT_JSON;
    }
  }
  if (v === null || typeof v !== 'object') return { kind: 'bad', why: 'not an object' };
  if (v.kind !== 'decision') return OTHER;
  // An overload verdict was never evaluated: nothing to replay.
  if (v.inputs === undefined && v.outcome !== undefined && 'shed' in v.outcome) return OTHER;
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
