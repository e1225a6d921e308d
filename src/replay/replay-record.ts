import { randomBytes } from 'node:crypto';
import type { AdminDevice, AdminUser } from '../admin/admin-schemas.ts';
import type { DecideRequest } from '../decide/decide-request.ts';
import { LAST_IN_HEAD } from '../decide/decision-line.ts';
import { toPolicyRequest } from '../decide/policy-request.ts';
import { unreadAnswerMembers } from '../policy/policy-activation.ts';
import {
  POLICY_SIGNAL_NAMES,
  type PolicyInput,
  type PolicyRequirements,
  type Verdict,
} from '../policy/policy-types.ts';
import { scanObject, skipNested, skipValue } from './replay-json-scan.ts';

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
  /** Members of the answers of the signals it reads that it never needs (src/policy's `unreadAnswerMembers`). */
  cuts: readonly AnswerCut[];
  /** The one cut when it is the member a line writes last in its head ({@link headWithLastCut}). */
  lastCut: AnswerCut | undefined;
  /**
   * Whether the last line read held a signal the candidate does not read (the lines of one log are
   * alike): then the next is searched for such signals before it is parsed, else parsed first and
   * what it holds of them dropped. A hint for the order of the work, never for what is read.
   */
  heldUnread: boolean;
}

/** A member of a signal's answer left unparsed: searched for in the head's text, checked where it lands. */
interface AnswerCut {
  /** The signal's key as it opens in a line, with the status that says it holds an answer. */
  key: string;
  signal: string;
  /** The member's key as it opens (`"supportingSignals":`), and its name. */
  member: string;
  name: string;
  /** The objects of the answer (`response`) the member sits in, one cut each at most. */
  at: readonly (readonly string[])[];
  /** What the member's value reads as in the text parsed: a string no line holds. */
  placeholder: string;
}

/**
 * What an unparsed member's value reads as, per signal: random, so no line holds it (ASCII, needing
 * no escape). A placeholder found after the parse anywhere but where the cut was meant to be means
 * the byte search cut something else, and the head is parsed whole.
 */
const UNREAD = `rg-unread-${randomBytes(12).toString('hex')}-`;

export function lineNeeds(policy: {
  requirements: Pick<PolicyRequirements, 'signals' | 'signalFields'>;
}): LineNeeds {
  const signals = policy.requirements.signals;
  const unread = POLICY_SIGNAL_NAMES.filter((n) => !signals.has(n)).map((n) => ascii(`${n}":{"status":"`));
  const cuts = unreadAnswerMembers(policy.requirements).map((m) => ({
    key: `"${m.signal}":{"status":"ok",`,
    signal: m.signal,
    member: `"${m.member}":`,
    name: m.member,
    at: m.at,
    placeholder: `${UNREAD}${m.signal}-${m.member}`,
  }));
  const only = cuts.length === 1 ? cuts[0]! : undefined;
  const lastCut =
    only !== undefined &&
    only.signal === LAST_IN_HEAD.signal &&
    only.name === LAST_IN_HEAD.member &&
    only.at.length === 1 &&
    ['response', ...only.at[0]!].join('.') === LAST_IN_HEAD.at.join('.')
      ? only
      : undefined;
  return { signals, unread, cuts, lastCut, heldUnread: true };
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
      needs === undefined
        ? (JSON.parse(`${line.toString('utf8', 0, at)}}`) as DecisionLineShape)
        : neededHead(line, at, needs);
    if (head.inputs === undefined) return undefined;
    head.outcome = JSON.parse(`${line.toString('utf8', at + OUTCOME_KEY.length - 1, rulesEnd + 1)}}`);
    return typeof head.outcome?.verdict === 'string' ? head : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The head (`line[0, at)`, what precedes `outcome`) as the candidate reads it: without the signals
 * it does not read (parsed apart, {@link withoutUnreadSignals}, when the last line held some;
 * parsed with the rest and dropped otherwise: a search for them costs each line a tenth of its
 * parse), and without the members of answers it never needs ({@link headWithoutMembers}). Either
 * way the same: a line that is not JSON only inside a signal the candidate does not read is read.
 */
function neededHead(line: Buffer, at: number, needs: LineNeeds): DecisionLineShape {
  if (needs.heldUnread) {
    const head = withoutUnreadSignals(line, at, needs);
    if (head !== undefined) return emptyMembers(head, needs.cuts);
    needs.heldUnread = false;
  }
  let head: DecisionLineShape | undefined;
  try {
    if (needs.lastCut !== undefined) head = headWithLastCut(line, at, needs.lastCut);
    if (head === undefined) {
      const text = line.toString('utf8', 0, at);
      head =
        (needs.cuts.length === 0 ? undefined : headWithoutMembers(text, needs.cuts)) ??
        (JSON.parse(`${text}}`) as DecisionLineShape);
    }
  } catch (e) {
    const apart = withoutUnreadSignals(line, at, needs);
    if (apart === undefined) throw e;
    needs.heldUnread = true;
    return emptyMembers(apart, needs.cuts);
  }
  emptyMembers(head, needs.cuts);
  const signals = head.inputs?.signals as Record<string, unknown> | undefined;
  if (signals === null || typeof signals !== 'object') return head;
  for (const name in signals) {
    if (needs.signals.has(name)) continue;
    needs.heldUnread = true;
    const read: Record<string, unknown> = {};
    for (const n in signals) if (needs.signals.has(n)) read[n] = signals[n];
    head.inputs!.signals = read as PolicyInput['signals'];
    break;
  }
  return head;
}

const EMPTY_LIST: readonly unknown[] = Object.freeze([]);

/**
 * The head's text (what precedes `outcome`) parsed with the members the candidate never needs left
 * unparsed (`supportingSignals` for the shipped policy: 16 of a line's ~37 objects, a third of the
 * head's `JSON.parse`). Each member is found by text search after its signal's key, its value
 * skipped by balance (strings and brackets) and read as its placeholder; after the parse, each
 * placeholder must be where the member sits in its own signal's answer ({@link emptyMembers} then
 * makes it an empty list: the view fields it fills are ones the candidate does not read). Undefined
 * when a cut is not so (a key found at another depth, a value not balanced): the caller parses the
 * head whole.
 */
function headWithoutMembers(text: string, cuts: readonly AnswerCut[]): DecisionLineShape | undefined {
  const ranges: { start: number; end: number; placeholder: string }[] = [];
  for (const c of cuts) {
    const keyAt = text.indexOf(c.key);
    if (keyAt === -1) continue;
    let from = keyAt + c.key.length;
    for (let i = 0; i < c.at.length; i++) {
      const memberAt = text.indexOf(c.member, from);
      if (memberAt === -1) break;
      // A key: after an object's `{` or a `,` (no unescaped `"` sits inside a string).
      const before = text.charCodeAt(memberAt - 1);
      if (before !== 0x2c && before !== 0x7b) return undefined;
      const start = memberAt + c.member.length;
      const end = skipNested(text, start);
      if (end === -1) return undefined;
      ranges.push({ start, end, placeholder: c.placeholder });
      from = end;
    }
  }
  if (ranges.length === 0) return undefined;
  if (ranges.length > 1) ranges.sort((a, b) => a.start - b.start);
  let cut = '';
  let from = 0;
  for (const r of ranges) {
    if (r.start < from) return undefined;
    cut += `${text.slice(from, r.start)}"${r.placeholder}"`;
    from = r.end;
  }
  const head = JSON.parse(`${cut}${text.slice(from)}}`) as DecisionLineShape;
  let found = 0;
  forEachMember(head, cuts, (holder, c) => {
    if (holder[c.name] === c.placeholder) found++;
  });
  return found === ranges.length ? head : undefined;
}

const LAST_MEMBER_KEY = ascii(`"${LAST_IN_HEAD.member}":`);
/** What closes after the member: its holders, the envelope, `signals`, `inputs`. */
const LAST_CLOSES = LAST_IN_HEAD.at.length + 3;
/** Those, and the line's own object. */
const LAST_CLOSE_TEXT = '}'.repeat(LAST_CLOSES + 1);

/**
 * The head (`line[0, at)`) parsed without `cut`, when the line was written with it last in its
 * head (src/decide/decision-line.ts `LAST_IN_HEAD`, lines written from session 9 on): the member's
 * key found back from the head's closing brackets, its value checked for balance to end right where
 * they begin, and only the bytes before it decoded and parsed, with the placeholder and the closes.
 * The placeholder must then sit where the member does ({@link headWithoutMembers}'s check).
 * Undefined when the line is not so (written before, the signal unavailable, a key at another
 * depth): the caller takes the text cut's path.
 */
function headWithLastCut(line: Buffer, at: number, cut: AnswerCut): DecisionLineShape | undefined {
  const closeAt = at - LAST_CLOSES;
  if (line[closeAt - 1] !== 0x5d) return undefined;
  for (let i = closeAt; i < at; i++) if (line[i] !== 0x7d) return undefined;
  const keyAt = line.lastIndexOf(LAST_MEMBER_KEY, closeAt);
  if (keyAt <= 0) return undefined;
  const before = line[keyAt - 1];
  if (before !== 0x2c && before !== 0x7b) return undefined;
  const start = keyAt + LAST_MEMBER_KEY.length;
  if (skipValue(line, start, closeAt) !== closeAt) return undefined;
  const head = JSON.parse(
    `${line.toString('utf8', 0, start)}"${cut.placeholder}"${LAST_CLOSE_TEXT}`,
  ) as DecisionLineShape;
  let found = 0;
  forEachMember(head, [cut], (holder, c) => {
    if (holder[c.name] === c.placeholder) found++;
  });
  return found === 1 ? head : undefined;
}

/** Each object of the head's signals' answers a cut's member sits in, with the cut. */
function forEachMember(
  head: DecisionLineShape,
  cuts: readonly AnswerCut[],
  each: (holder: Record<string, unknown>, cut: AnswerCut) => void,
): void {
  const signals = head.inputs?.signals as Record<string, { response?: unknown } | undefined> | undefined;
  for (const c of cuts) {
    const response = signals?.[c.signal]?.response;
    for (const path of c.at) {
      let holder = response;
      for (const k of path) holder = (holder as Record<string, unknown> | null | undefined)?.[k];
      if (holder !== null && typeof holder === 'object') each(holder as Record<string, unknown>, c);
    }
  }
}

/**
 * The members the candidate never needs, as an empty list wherever the head holds them: a head
 * parsed with them cut, apart or whole reads the same.
 */
function emptyMembers(head: DecisionLineShape, cuts: readonly AnswerCut[]): DecisionLineShape {
  forEachMember(head, cuts, (holder, c) => {
    if (holder[c.name] !== undefined) holder[c.name] = EMPTY_LIST;
  });
  return head;
}

const INPUTS_KEY = ascii(',"inputs":{');
const SIGNALS_KEY = ascii('"signals":{');

/**
 * The head (`line[0, at)`, what precedes `outcome`) without the signals the candidate does not
 * read, when the line holds any: the part before `inputs` parsed as one piece (it parses only if
 * `inputs` is a key of the line's own object), the signals object's members found by
 * `scanObject` and only those the candidate reads parsed, and the inputs before `signals` (lines
 * written from session 9 on: the Admin reads, the features) and after it (lines written before)
 * each parsed as one piece, which parses only if `signals` is a key of `inputs` itself, the one
 * after ending where `outcome` begins. A signal passed over is checked for balance only: a broken
 * byte inside it no longer makes the line unreadable, as a broken byte past `matchedRules` never
 * did. Undefined when the line holds no signal the candidate leaves unread, or is not laid out so:
 * the head is parsed whole.
 */
function withoutUnreadSignals(line: Buffer, at: number, needs: LineNeeds): DecisionLineShape | undefined {
  const inputsAt = line.indexOf(INPUTS_KEY);
  if (inputsAt === -1 || inputsAt > at) return undefined;
  const open = inputsAt + INPUTS_KEY.length - 1;
  const keyAt = line.indexOf(SIGNALS_KEY, open);
  if (keyAt === -1 || keyAt > at || (line[keyAt - 1] !== 0x2c && keyAt !== open + 1)) return undefined;
  const signalsAt = keyAt + SIGNALS_KEY.length - 1;
  const inputs = line.subarray(signalsAt, at);
  if (!needs.unread.some((key) => inputs.includes(key))) return undefined;
  const head = JSON.parse(`${line.toString('utf8', 0, inputsAt)}}`) as DecisionLineShape;
  const signals: Record<string, unknown> = {};
  const signalsEnd = scanObject(line, signalsAt, at, (keyStart, keyEnd, valueStart, valueEnd) => {
    const name = line.toString('latin1', keyStart, keyEnd);
    if (needs.signals.has(name)) signals[name] = JSON.parse(line.toString('utf8', valueStart, valueEnd));
  });
  if (signalsEnd === -1) return undefined;
  const before =
    keyAt === open + 1
      ? {}
      : (JSON.parse(`${line.toString('utf8', open, keyAt - 1)}}`) as DecisionLineShape['inputs']);
  // After the signals: more inputs, or the end of `inputs` right before `outcome`.
  const after =
    line[signalsEnd] === 0x2c
      ? (JSON.parse(`{${line.toString('utf8', signalsEnd + 1, at)}`) as DecisionLineShape['inputs'])
      : signalsEnd === at - 1 && line[signalsEnd] === 0x7d
        ? {}
        : undefined;
  if (before === undefined || after === undefined || 'signals' in before || 'signals' in after)
    return undefined;
  head.inputs = { ...before, ...after, signals: signals as PolicyInput['signals'] };
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
