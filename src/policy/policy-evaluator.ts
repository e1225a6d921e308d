import type { ParseResult } from '@marcbachmann/cel-js';
import type { CompiledCounter } from '../features/velocity-counters.ts';
import { type Cidr, cidrContains, type IpWords, parseIpShared } from '../net/ip-cidr.ts';
import { type Activation, createActivation, ListView } from './cel-environment.ts';
import { FALLBACK, type FastExpression } from './cel-fast-path.ts';
import {
  budgetExceededMessage,
  endEvaluationBudget,
  evaluationBudgetFoundSpent,
  evaluationBudgetSpent,
  startEvaluationBudget,
} from './evaluation-budget.ts';
import type { InputRow, InputTable } from './inputs/input-row.ts';
import { celBindings } from './inputs/input-table.ts';
import { MISSING, reasonWeight } from './inputs/unavailable-reason.ts';
import { fillActivation } from './policy-activation.ts';
import type { RuleGuard } from './policy-analysis.ts';
import type { OnError, OnUnavailable } from './policy-schema.ts';
import type {
  AdminReadSettings,
  AskUserPolicy,
  CompiledPolicy,
  DeclaredList,
  DegradedOutcome,
  EvaluateOptions,
  MatchedRule,
  OutageOutcome,
  OverrideMatch,
  PolicyAction,
  PolicyDecision,
  PolicyInput,
  PolicyIssue,
  PolicyRequirements,
  PolicyReviewMarks,
  PolicySignalName,
  SignalSettings,
  SkippedRule,
  SnoozedRule,
  SuppressedAction,
  UnavailableTreatment,
  Verdict,
} from './policy-types.ts';

/**
 * The runtime half of a compiled policy. Everything that can be decided at load is: rule
 * dependencies are bitmasks, explanation entries of matched rules are prebuilt frozen objects, the
 * activation views are reused. A decision allocates its result arrays and little else.
 */

const RANK: Record<Verdict, number> = { allow: 1, challenge: 2, deny: 3 };
const DENY = RANK.deny;
/** Id of the pseudo-rule reported when the engine itself failed. */
export const INTERNAL_ERROR = '$internal-error';
const BY_RANK: readonly (Verdict | undefined)[] = [undefined, 'allow', 'challenge', 'deny'];

export interface CompiledAction {
  name: string;
  /** Prebuilt action without a per-decision part (`source` filled per binding). */
  template: Omit<PolicyAction, 'source'>;
  /** `archive_device` selector; without it the request's deviceId is archived. */
  select?: ParseResult;
  /** Taken only when the request's first factor passed (`lock_out_user`, unless the policy says no). */
  requireFirstFactor?: boolean;
}

export interface CompiledRule {
  id: string;
  score: number;
  verdictRank: number;
  fn: ParseResult;
  /** `fn` as a closure for the subset of CEL it covers (src/policy/cel-fast-path.ts); undefined outside it. */
  fast: FastExpression | undefined;
  /**
   * Leading `signals.x.flag` conjuncts checked in JS before calling CEL (see `extractGuards`), each
   * with its signal's bit.
   */
  guards: readonly (RuleGuard & { bit: number })[];
  /** Bits of the inputs the rule reads, minus those whose availability it tests itself. */
  skipMask: number;
  onError: OnError;
  /** `failClosed` counts an erroring rule only when matching raises risk. */
  countsOnError: boolean;
  /** A positive score, or a challenge or deny verdict. */
  raisesRisk: boolean;
  /** A negative score (`lowering` is that score), or an allow verdict (`lowersToAllow`). */
  lowering: number;
  lowersToAllow: boolean;
  shadow: boolean;
  matched: Readonly<MatchedRule>;
  actions: readonly CompiledAction[];
  /** Action names this rule withholds when it counts (`suppressActions`). */
  suppresses: readonly string[];
}

export interface CompiledOverride {
  list: 'allow' | 'deny';
  id: string;
  reason: string;
  expiresAt: string;
  expiresAtMs: number;
  accounts: ReadonlySet<string>;
  cidrs: readonly Cidr[];
}

/** An input the policy reads: its row, its bit in the unavailability mask, its `onUnavailable`. */
export interface UnavailableSetting {
  signal: UnavailableTreatment['signal'];
  row: InputRow<unknown, string>;
  bit: number;
  onUnavailable: OnUnavailable;
  /** `treatmentText(onUnavailable)`, built once at compile time (every decision it is unavailable says it). */
  treatment: string;
}

export interface CompiledOutageRule {
  id: string;
  description: string | undefined;
  /** At least this many unavailable inputs (0: no count condition). */
  atLeast: number;
  /** Activation bits of inputs that must all be unavailable (0: no set condition). */
  allOfMask: number;
  verdict: Verdict;
}

export interface CompiledOutage {
  maxUnavailableScore: number | undefined;
  rules: readonly CompiledOutageRule[];
}

export interface PolicyParts {
  name: string;
  /** "Was this you?": the rules that ask, and what a "no" takes. */
  askUser?: AskUserPolicy | undefined;
  revision: string;
  files: readonly string[];
  thresholds: { challenge: number; deny: number };
  rules: readonly CompiledRule[];
  requirements: PolicyRequirements;
  /** The input table the policy was compiled against. */
  inputs: InputTable;
  signalSettings: { [N in PolicySignalName]?: SignalSettings };
  adminSettings: { user?: AdminReadSettings; devices?: AdminReadSettings };
  unavailableSettings: readonly UnavailableSetting[];
  verdictActions: { [V in Verdict]: readonly CompiledAction[] };
  overrides: readonly CompiledOverride[];
  /** Undefined when the policy has no `outage` section. */
  outage: CompiledOutage | undefined;
  /** `overload.verdict`; undefined: shed decisions are answered 503. */
  overloadVerdict: Verdict | undefined;
  /** The rules and verdicts that open a review case; undefined: none. */
  review?: PolicyReviewMarks | undefined;
  /** `defaults.evaluationBudgetMs`: past it, each remaining rule fails per its `onError`. */
  evaluationBudgetMs: number;
  /** `degraded.verdict` as a rank: challenge (default) or deny. */
  degradedRank: number;
  /** Bits of the inputs risk-raising rules read: one of them degraded holds the verdict at the floor. */
  raisingMask: number;
  velocityCounters: readonly CompiledCounter[];
  featureSettings: NonNullable<CompiledPolicy['featureSettings']>;
  /** The runtime lists the policy declares. */
  lists: readonly DeclaredList[];
  warnings: readonly PolicyIssue[];
}

function guardsPass(act: Activation, guards: readonly RuleGuard[]): boolean {
  const views = act.signals as unknown as Record<string, Record<string, unknown>>;
  for (let i = 0; i < guards.length; i++) {
    const g = guards[i]!;
    if (views[g.signal]![g.field] !== g.expect) return false;
  }
  return true;
}

/** Whether a guard on a signal that answered is false: the rule is false whatever the others say. */
function guardFailsOnAnswered(
  act: Activation,
  guards: readonly (RuleGuard & { bit: number })[],
  unavailableMask: number,
): boolean {
  const views = act.signals as unknown as Record<string, Record<string, unknown>>;
  for (let i = 0; i < guards.length; i++) {
    const g = guards[i]!;
    if ((g.bit & unavailableMask) === 0 && views[g.signal]![g.field] !== g.expect) return true;
  }
  return false;
}

/** The first outage rule whose conditions the unavailable inputs meet. */
function matchOutageRule(
  outage: CompiledOutage,
  mask: number,
  count: number,
): CompiledOutageRule | undefined {
  for (const r of outage.rules) {
    if (count >= r.atLeast && (mask & r.allOfMask) === r.allOfMask) return r;
  }
  return undefined;
}

function outageRuleReport(r: CompiledOutageRule): NonNullable<OutageOutcome['rule']> {
  return r.description === undefined
    ? { id: r.id, verdict: r.verdict }
    : { id: r.id, description: r.description, verdict: r.verdict };
}

/** Pushes onto a lazily created array: most decisions never need one. */
function append<T>(list: T[] | undefined, value: T): T[] {
  if (list === undefined) return [value];
  list.push(value);
  return list;
}

/** `ignore`, `score:40`, `verdict:deny`: how an unavailable input is treated, as explanations say it. */
export function treatmentText(o: OnUnavailable): string {
  if (o === 'ignore') return 'ignore';
  return 'score' in o ? `score:${o.score}` : `verdict:${o.verdict}`;
}

function errorSummary(e: unknown): string {
  if (e && typeof e === 'object') {
    const s = (e as { summary?: unknown }).summary;
    if (typeof s === 'string') return s;
    const m = (e as { message?: unknown }).message;
    if (typeof m === 'string') return m.split('\n', 1)[0]!;
  }
  return String(e);
}

/** Why an input the policy reads is unavailable (its row knows where its reason is kept). */
function reasonOf(input: PolicyInput, u: UnavailableSetting): string {
  return u.row.reason(input) ?? MISSING;
}

/** Distinct reasons an input's skip texts are kept for (they come from a small fixed set). */
const MAX_SKIP_TEXTS = 32;
const skipTexts = new WeakMap<UnavailableSetting, Map<string, string>>();

/**
 * `<input> unavailable (<reason>)`, one string per input and reason: every rule an unavailable
 * input skips names it, on every decision where it is unavailable (an iOS login skips the Android
 * rules), so the text is built once, not per rule per decision (issue 32).
 */
function skipText(u: UnavailableSetting, reason: string): string {
  let texts = skipTexts.get(u);
  if (texts === undefined) {
    texts = new Map();
    skipTexts.set(u, texts);
  }
  let text = texts.get(reason);
  if (text === undefined) {
    text = `${u.signal} unavailable (${reason})`;
    if (texts.size < MAX_SKIP_TEXTS) texts.set(reason, text);
  }
  return text;
}

/** Why a rule's expression gave no answer: its error, and whether that was the spent budget. */
interface RuleError {
  error: string;
  outOfBudget: boolean;
}

/** What one evaluation gathers on its way to the answer; one per evaluation, in a fixed shape. */
interface Tally {
  score: number;
  hardRank: number;
  // The evidence: what rules evaluated successfully on available inputs said.
  evidenceScore: number;
  evidenceHardRank: number;
  // Risk-lowering rules riskgate could not see (their negative scores; a hard allow or
  // challenge among them): a score-based deny stands only if it would survive them.
  unknownLowering: number;
  unknownHard: boolean;
  degradedMask: number;
  degradedInputs: DegradedOutcome['inputs'] | undefined;
  degradedRules: DegradedOutcome['rules'] | undefined;
  floor: boolean;
  unavailable: UnavailableTreatment[];
  outage: OutageOutcome | undefined;
  outageRank: number;
  matchedRules: MatchedRule[];
  skipped: SkippedRule[] | undefined;
  shadow: MatchedRule[] | undefined;
  ruleActions: CompiledAction[] | undefined;
  ruleActionSources: string[] | undefined;
  // Actions of rules that counted only because they failed (failClosed/match): not taken.
  erroredActions: CompiledAction[] | undefined;
  erroredSources: string[] | undefined;
  suppressors: Map<string, string> | undefined;
  suppressed: SuppressedAction[] | undefined;
  snoozed: SnoozedRule[] | undefined;
  verdict: Verdict;
  decidedBy: PolicyDecision['decidedBy'];
  cappedFrom: Verdict | undefined;
}

function newTally(): Tally {
  return {
    score: 0,
    hardRank: 0,
    evidenceScore: 0,
    evidenceHardRank: 0,
    unknownLowering: 0,
    unknownHard: false,
    degradedMask: 0,
    degradedInputs: undefined,
    degradedRules: undefined,
    floor: false,
    unavailable: [],
    outage: undefined,
    outageRank: 0,
    matchedRules: [],
    skipped: undefined,
    shadow: undefined,
    ruleActions: undefined,
    ruleActionSources: undefined,
    erroredActions: undefined,
    erroredSources: undefined,
    suppressors: undefined,
    suppressed: undefined,
    snoozed: undefined,
    verdict: 'allow',
    decidedBy: 'score',
    cappedFrom: undefined,
  };
}

/** A rule riskgate could not see: what it might have lowered (a hard allow or challenge too) is unknown. */
function noteUnknownLowering(rule: CompiledRule, t: Tally): void {
  t.unknownLowering += rule.lowering;
  if (rule.lowersToAllow || (rule.verdictRank > 0 && rule.verdictRank < DENY)) t.unknownHard = true;
}

/**
 * `T` with every member present, an absent optional one undefined. A decision is built in this one
 * shape, its members in the order its JSON has always had (the decision log's `outcome`; JSON leaves
 * an undefined member out as a missing one). Issue 32: members added only when present gave the
 * decisions of one policy several shapes, and each reader of a decision on the hot path (the
 * answer, its explanation, the log line, the actions) a 4- or 5-way load (bench/RESULTS.md,
 * "megamorphic property access on the hot path"). test/policy-decision-shape.test.ts holds the
 * literals below to one shape.
 */
type EveryMember<T> = { [K in keyof Required<T>]: object extends Pick<T, K> ? T[K] | undefined : T[K] };

export class PolicyEvaluator implements CompiledPolicy {
  readonly name: string;
  readonly revision: string;
  readonly requirements: PolicyRequirements;
  readonly signalSettings: { [N in PolicySignalName]?: SignalSettings };
  readonly adminSettings: { user?: AdminReadSettings; devices?: AdminReadSettings };
  readonly warnings: readonly PolicyIssue[];
  readonly files: readonly string[];
  readonly ruleIds: readonly string[];
  readonly askUser: AskUserPolicy | undefined;
  readonly ruleDescriptions: ReadonlyMap<string, string>;
  readonly overloadVerdict: Verdict | undefined;
  readonly review: PolicyReviewMarks | undefined;
  readonly thresholds: { challenge: number; deny: number };
  readonly velocityCounters: readonly CompiledCounter[];
  readonly featureSettings: NonNullable<CompiledPolicy['featureSettings']>;
  readonly lists: readonly DeclaredList[];
  readonly inputs: InputTable;
  readonly #p: PolicyParts;
  readonly #act: Activation;
  readonly #policyRef: { name: string; revision: string };

  constructor(parts: PolicyParts) {
    this.#p = parts;
    this.name = parts.name;
    this.revision = parts.revision;
    this.requirements = parts.requirements;
    this.signalSettings = parts.signalSettings;
    this.adminSettings = parts.adminSettings;
    this.warnings = parts.warnings;
    this.files = parts.files;
    this.ruleIds = parts.rules.map((r) => r.id);
    this.askUser = parts.askUser;
    this.ruleDescriptions = new Map(parts.rules.map((r) => [r.id, r.matched.description]));
    this.overloadVerdict = parts.overloadVerdict;
    this.review = parts.review;
    this.thresholds = parts.thresholds;
    this.velocityCounters = parts.velocityCounters;
    this.featureSettings = parts.featureSettings;
    this.lists = parts.lists;
    this.inputs = parts.inputs;
    this.#act = createActivation(celBindings(parts.inputs));
    for (const l of parts.lists) this.#act.lists[l.name] = new ListView(l.name);
    this.#policyRef = Object.freeze({ name: parts.name, revision: parts.revision });
  }

  /**
   * Synchronous and never throws: an internal failure is a degraded evaluation, answered with the
   * policy's degraded verdict (challenge by default) and the error explained.
   */
  evaluate(input: PolicyInput, options?: EvaluateOptions): PolicyDecision {
    try {
      startEvaluationBudget(options?.budgetMs ?? this.#p.evaluationBudgetMs);
      return this.#evaluate(input);
    } catch (e) {
      const verdict = BY_RANK[this.#p.degradedRank] as DegradedOutcome['verdict'];
      // Every member, in the decision's one order (`EveryMember`).
      const decision: EveryMember<PolicyDecision> = {
        verdict,
        score: 0,
        matchedRules: [
          {
            id: INTERNAL_ERROR,
            description: `the policy engine failed; answering the degraded verdict (${verdict})`,
            error: errorSummary(e),
          },
        ],
        thresholds: this.#p.thresholds,
        unavailable: [],
        actions: [],
        policy: this.#policyRef,
        decidedBy: 'degraded',
        override: undefined,
        outage: undefined,
        skippedRules: undefined,
        shadowMatches: undefined,
        suppressedActions: undefined,
        snoozed: undefined,
        snoozesUnavailable: undefined,
        degraded: {
          verdict,
          inputs: [],
          rules: [{ id: INTERNAL_ERROR, reason: 'evaluation_error' }],
          floor: true,
        },
      };
      return decision;
    } finally {
      endEvaluationBudget();
    }
  }

  #evaluate(input: PolicyInput): PolicyDecision {
    const p = this.#p;
    const unavailableMask = fillActivation(this.#act, input, p.unavailableSettings);
    const t = newTally();
    if (unavailableMask !== 0) this.#treatUnavailable(input, unavailableMask, t);
    const override = p.overrides.length > 0 ? this.#matchOverride(input) : undefined;
    this.#runRules(input, unavailableMask, t);
    this.#decideVerdict(t, override);
    this.#applyDegradedRule(t, override);
    const actions = this.#planActions(t, override, input.request.firstFactor === 'passed');

    let degraded: DegradedOutcome | undefined;
    if (t.degradedInputs || t.degradedRules || t.cappedFrom) {
      degraded = {
        verdict: BY_RANK[p.degradedRank] as DegradedOutcome['verdict'],
        inputs: t.degradedInputs ?? [],
        rules: t.degradedRules ?? [],
        floor: t.floor,
      };
      if (t.cappedFrom) degraded.cappedFrom = t.cappedFrom;
    }
    // Every member, in the decision's one order (`EveryMember`).
    const decision: EveryMember<PolicyDecision> = {
      verdict: t.verdict,
      score: t.score,
      matchedRules: t.matchedRules,
      thresholds: p.thresholds,
      unavailable: t.unavailable,
      actions,
      policy: this.#policyRef,
      decidedBy: t.decidedBy,
      override,
      outage: t.outage,
      skippedRules: t.skipped,
      shadowMatches: t.shadow,
      suppressedActions: t.suppressed,
      snoozed: t.snoozed,
      snoozesUnavailable:
        input.snoozes !== undefined && 'unavailable' in input.snoozes ? input.snoozes.unavailable : undefined,
      degraded,
    };
    return decision;
  }

  /**
   * The `onUnavailable` treatment of each unavailable input, then the outage section: a matching
   * outage rule's verdict replaces what unavailability adds (a floor applied by the verdict
   * step); else `maxUnavailableScore` caps the score it adds. Marks the inputs riskgate failed to
   * gather as degraded.
   */
  #treatUnavailable(input: PolicyInput, unavailableMask: number, t: Tally): void {
    const p = this.#p;
    // What unavailability adds, kept apart until the outage section has had its say.
    let unavailableScore = 0;
    let unavailableRank = 0;
    let outageMask = 0;
    let outageCount = 0;
    for (const u of p.unavailableSettings) {
      if ((unavailableMask & u.bit) === 0) continue;
      const reason = reasonOf(input, u);
      const weight = reasonWeight(reason);
      if (!weight.treated) {
        t.unavailable.push({ signal: u.signal, reason, treatment: 'ignore' });
        continue;
      }
      if (weight.outage) {
        outageMask |= u.bit;
        outageCount++;
      }
      if (weight.degradesEvaluation) {
        t.degradedMask |= u.bit;
        t.degradedInputs = append(t.degradedInputs, { input: u.signal, reason });
      }
      const o = u.onUnavailable;
      if (o !== 'ignore') {
        if ('score' in o) unavailableScore += o.score;
        else if (RANK[o.verdict] > unavailableRank) unavailableRank = RANK[o.verdict];
      }
      t.unavailable.push({ signal: u.signal, reason, treatment: u.treatment });
    }
    const rule = p.outage === undefined ? undefined : matchOutageRule(p.outage, outageMask, outageCount);
    if (rule !== undefined) {
      // The outage rule's verdict is what unavailability amounts to (a floor on the verdict).
      t.outage = { unavailableInputs: outageCount, rule: outageRuleReport(rule) };
      t.outageRank = RANK[rule.verdict];
      return;
    }
    const cap = p.outage?.maxUnavailableScore;
    if (cap !== undefined && unavailableScore > cap) {
      t.outage = { unavailableInputs: outageCount, cappedScore: { unavailableScore, counted: cap } };
      unavailableScore = cap;
    }
    t.score = unavailableScore;
    t.hardRank = unavailableRank;
  }

  /**
   * Every rule in order: skipped for an unavailable input, else evaluated and, if true, counted,
   * unless it is snoozed for this login's entity (then reported in `snoozed`, not counted).
   */
  #runRules(input: PolicyInput, unavailableMask: number, t: Tally): void {
    const act = this.#act;
    const rules = this.#p.rules;
    // Read only for a rule that matched or failed: a decision where nothing matches pays nothing.
    const snoozes = input.snoozes !== undefined && 'lookup' in input.snoozes ? input.snoozes : undefined;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      if ((rule.skipMask & unavailableMask) !== 0) {
        t.skipped = append(t.skipped, {
          id: rule.id,
          reason: this.#skipReason(input, rule.skipMask & unavailableMask),
        });
        // Not seen because riskgate failed to gather its input: what it might have lowered is
        // unknown, unless a leading flag of an input that did answer already makes it false.
        if (
          !rule.shadow &&
          (rule.skipMask & t.degradedMask) !== 0 &&
          !guardFailsOnAnswered(act, rule.guards, unavailableMask)
        ) {
          noteUnknownLowering(rule, t);
        }
        continue;
      }
      if (rule.guards.length > 0 && !guardsPass(act, rule.guards)) continue;
      const outcome = this.#runRule(rule);
      if (outcome === false) continue;
      if (snoozes !== undefined) {
        // A snoozed rule is not matched for this entity: neither its score, verdict and actions,
        // nor (failing) its onError; the explanation says which snooze and until when.
        const snoozed = snoozes.lookup.match(rule.id, input.request, snoozes.nowMs);
        if (snoozed !== undefined) {
          t.snoozed = append(t.snoozed, snoozed);
          continue;
        }
      }
      if (outcome === true) this.#countRule(rule, rule.matched, undefined, t);
      else this.#countFailedRule(rule, outcome, t);
    }
  }

  /** A rule's expression: true, false, or the error that kept it from either (a spent budget too). */
  #runRule(rule: CompiledRule): boolean | RuleError {
    const budgetMs = this.#p.evaluationBudgetMs;
    if (evaluationBudgetSpent()) return { error: budgetExceededMessage(budgetMs), outOfBudget: true };
    let result: unknown;
    let error: string | undefined;
    try {
      // The closure answers or gives up; cel-js answers what it gives up on, errors included.
      result = rule.fast === undefined ? FALLBACK : rule.fast(this.#act);
      if (result === FALLBACK) result = rule.fn(this.#act);
      if (typeof result !== 'boolean') error = `expression returned ${typeof result}, not bool`;
    } catch (e) {
      error = errorSummary(e);
    }
    // CEL absorbs errors (`error || true` is true): a rule during which the budget ran out has
    // no trustworthy result, whatever it returned.
    if (evaluationBudgetFoundSpent()) return { error: budgetExceededMessage(budgetMs), outOfBudget: true };
    if (error !== undefined) return { error, outOfBudget: false };
    return result as boolean;
  }

  /** A rule whose expression failed: degraded, and counted only as its `onError` says. */
  #countFailedRule(rule: CompiledRule, failure: RuleError, t: Tally): void {
    const { error, outOfBudget } = failure;
    if (!rule.shadow) {
      // An evaluation riskgate could not finish is degraded; `onError: skip` is the author's
      // word that a failing expression does not matter, but a spent budget is riskgate's state.
      if (outOfBudget || rule.onError !== 'skip') {
        t.degradedRules = append(t.degradedRules, {
          id: rule.id,
          reason: outOfBudget ? 'evaluation_budget' : 'evaluation_error',
        });
        if (rule.raisesRisk) t.floor = true;
      }
      noteUnknownLowering(rule, t);
    }
    if (!rule.countsOnError) {
      t.skipped = append(t.skipped, {
        id: rule.id,
        reason: `evaluation error: ${error} (onError: ${rule.onError})`,
      });
      return;
    }
    this.#countRule(rule, { ...rule.matched, error }, error, t);
  }

  /** A matched rule (or one failing closed, `error` set): its score, verdict, actions, suppressions. */
  #countRule(rule: CompiledRule, entry: Readonly<MatchedRule>, error: string | undefined, t: Tally): void {
    if (rule.shadow) {
      t.shadow = append(t.shadow, entry);
      return;
    }
    t.matchedRules.push(entry);
    t.score += rule.score;
    if (rule.verdictRank > t.hardRank) t.hardRank = rule.verdictRank;
    if (error === undefined) {
      t.evidenceScore += rule.score;
      if (rule.verdictRank > t.evidenceHardRank) t.evidenceHardRank = rule.verdictRank;
    }
    // A failing rule counts towards the verdict (fail closed), but its side effects (lock-out,
    // archiving) are not taken on an unknown. Its suppressions apply: withholding is the safe side.
    if (error === undefined) {
      for (const a of rule.actions) {
        t.ruleActions = append(t.ruleActions, a);
        t.ruleActionSources = append(t.ruleActionSources, rule.id);
      }
    } else {
      for (const a of rule.actions) {
        t.erroredActions = append(t.erroredActions, a);
        t.erroredSources = append(t.erroredSources, rule.id);
      }
    }
    if (rule.suppresses.length > 0) {
      t.suppressors ??= new Map();
      for (const name of rule.suppresses) if (!t.suppressors.has(name)) t.suppressors.set(name, rule.id);
    }
  }

  /** The verdict before the degraded rule: an override, else a hard verdict, else the score; then the outage floor. */
  #decideVerdict(t: Tally, override: OverrideMatch | undefined): void {
    const thresholds = this.#p.thresholds;
    if (override) {
      t.verdict = override.list;
      t.decidedBy = 'override';
      return;
    }
    if (t.hardRank > 0) {
      t.verdict = BY_RANK[t.hardRank]!;
      t.decidedBy = 'verdict';
    } else {
      t.verdict =
        t.score >= thresholds.deny ? 'deny' : t.score >= thresholds.challenge ? 'challenge' : 'allow';
      t.decidedBy = 'score';
    }
    if (t.outageRank > RANK[t.verdict]) {
      t.verdict = BY_RANK[t.outageRank]!;
      t.decidedBy = 'outage';
    }
  }

  /**
   * The degraded rule (policies/README.md, "Degraded decisions"): stress holds the verdict at the
   * policy's degraded verdict at least, and a deny must rest on evidence.
   */
  #applyDegradedRule(t: Tally, override: OverrideMatch | undefined): void {
    const p = this.#p;
    if ((t.degradedMask & p.raisingMask) !== 0) t.floor = true;
    // An override's verdict stands; the explanation still says what was degraded.
    if (override) return;
    const before = t.verdict;
    if (t.floor && RANK[t.verdict] < p.degradedRank) t.verdict = BY_RANK[p.degradedRank]!;
    if (t.verdict === 'deny' && p.degradedRank < DENY) {
      const evidenceDeny =
        t.evidenceHardRank === DENY ||
        (t.evidenceHardRank === 0 &&
          !t.unknownHard &&
          t.evidenceScore + t.unknownLowering >= p.thresholds.deny);
      if (!evidenceDeny) {
        t.verdict = BY_RANK[p.degradedRank]!;
        t.cappedFrom = 'deny';
      }
    }
    if (t.verdict !== before) t.decidedBy = 'degraded';
  }

  /**
   * The actions of the counted rules and of the verdict, less the suppressed ones (recorded in
   * `t.suppressed`); an allow-list entry exempts the account from what the rules would have done.
   * `firstFactorPassed`: whether the request said its first factor passed (a lock-out waits for it).
   */
  #planActions(t: Tally, override: OverrideMatch | undefined, firstFactorPassed: boolean): PolicyAction[] {
    const actions: PolicyAction[] = [];
    const rulesAct = override?.list !== 'allow';
    const { ruleActions, erroredActions, suppressors } = t;
    if (ruleActions && rulesAct) {
      for (let i = 0; i < ruleActions.length; i++)
        t.suppressed = this.#takeAction(
          actions,
          t.suppressed,
          suppressors,
          ruleActions[i]!,
          t.ruleActionSources![i]!,
          firstFactorPassed,
        );
    }
    const bound = this.#p.verdictActions[t.verdict];
    for (let i = 0; i < bound.length; i++)
      t.suppressed = this.#takeAction(
        actions,
        t.suppressed,
        suppressors,
        bound[i]!,
        `verdict:${t.verdict}`,
        firstFactorPassed,
      );
    if (erroredActions && rulesAct) {
      for (let i = 0; i < erroredActions.length; i++) {
        const a = erroredActions[i]!;
        // Reported once, and only when nothing else took or withheld it.
        if (actions.some((x) => x.name === a.name) || t.suppressed?.some((x) => x.name === a.name)) continue;
        t.suppressed = append(t.suppressed, {
          name: a.name,
          type: a.template.type,
          source: t.erroredSources![i]!,
          reason: 'rule_error',
        });
      }
    }
    return actions;
  }

  #skipReason(input: PolicyInput, mask: number): string {
    let out = '';
    for (const u of this.#p.unavailableSettings) {
      if ((mask & u.bit) === 0) continue;
      const text = skipText(u, reasonOf(input, u));
      out = out === '' ? text : `${out}, ${text}`;
    }
    return out;
  }

  /**
   * Takes `a`, or records it as withheld: a counted rule suppresses it, or it is a lock-out and the
   * request did not say its first factor passed; returns `suppressed`.
   */
  #takeAction(
    actions: PolicyAction[],
    suppressed: SuppressedAction[] | undefined,
    suppressors: ReadonlyMap<string, string> | undefined,
    a: CompiledAction,
    source: string,
    firstFactorPassed: boolean,
  ): SuppressedAction[] | undefined {
    const by = suppressors?.get(a.name);
    const unproven = by === undefined && a.requireFirstFactor === true && !firstFactorPassed;
    if (by === undefined && !unproven) {
      this.#pushAction(actions, a, source);
      return suppressed;
    }
    if (suppressed?.some((x) => x.name === a.name)) return suppressed;
    return append(
      suppressed,
      by === undefined
        ? { name: a.name, type: a.template.type, source, reason: 'first_factor_not_passed' }
        : { name: a.name, type: a.template.type, source, reason: 'suppressed_by_rule', by },
    );
  }

  #pushAction(out: PolicyAction[], a: CompiledAction, source: string): void {
    for (let i = 0; i < out.length; i++) if (out[i]!.name === a.name) return;
    const action: PolicyAction = { ...a.template, source };
    if (a.template.type === 'archive_device') {
      let ids: string[] = [];
      if (a.select) {
        try {
          const r = a.select(this.#act);
          if (Array.isArray(r)) ids = r.filter((x): x is string => typeof x === 'string');
        } catch {
          // A failing selector archives nothing: archiving the wrong device is worse than none.
        }
      } else if (this.#act.request.deviceId) ids = [this.#act.request.deviceId];
      if (ids.length === 0) return;
      action.deviceIds = ids;
    }
    out.push(action);
  }

  #matchOverride(input: PolicyInput): OverrideMatch | undefined {
    const nowMs = input.now.getTime();
    const account = input.request.accountId;
    let ip: IpWords | null | undefined;
    let allow: OverrideMatch | undefined;
    for (const o of this.#p.overrides) {
      if (o.expiresAtMs <= nowMs) continue;
      if (o.list === 'allow' && allow) continue;
      let by: OverrideMatch['matchedBy'] | undefined;
      if (o.accounts.has(account)) by = 'account';
      else if (o.cidrs.length > 0 && input.request.ip) {
        if (ip === undefined) ip = parseIpShared(input.request.ip);
        if (ip) for (const c of o.cidrs) if (cidrContains(c, ip)) by = 'ip';
      }
      if (!by) continue;
      const m: OverrideMatch = {
        list: o.list,
        id: o.id,
        reason: o.reason,
        expiresAt: o.expiresAt,
        matchedBy: by,
      };
      // Deny entries win over allow entries, whatever their order in the file.
      if (o.list === 'deny') return m;
      allow = m;
    }
    return allow;
  }
}

export { RANK as VERDICT_RANK };
