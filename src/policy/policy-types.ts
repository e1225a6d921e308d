import type { CompiledCounter } from '../features/velocity-counters.ts';
import type { PolicyRequest } from '../policy-input/policy-request.ts';
import type { SnoozedRule } from '../policy-input/rule-snooze.ts';

export type { SnoozedRule };

import type { Verdict } from '../policy-input/verdict.ts';
import type { InputTable } from './inputs/input-row.ts';
import type {
  AdminReadSettings,
  FeatureReadSettings,
  InputName,
  PolicyInput,
  PolicyRequirements,
  PolicySignalName,
  SignalSettings,
} from './inputs/input-values.ts';

export {
  type AdminReadSettings,
  type FeatureReadSettings,
  INPUT_NAMES,
  type InputName,
  type InputOutcome,
  type ListLookup,
  POLICY_SIGNAL_NAMES,
  type PolicyInput,
  type PolicyRequirements,
  type PolicySignalName,
  type SignalOutcome,
  type SignalResponses,
  type SignalSettings,
} from './inputs/input-values.ts';

// Below the policy engine and the feature store, which both read them (no import circle).
export type { PolicyRequest, Verdict };

/**
 * The boundary between the decision service (src/decide/) and the policy engine (src/policy/).
 * The decision service fetches what `PolicyRequirements` lists, builds a `PolicyInput`, and calls
 * `evaluate`; the engine owns how those values appear to CEL.
 */

/** A runtime list the policy declares (`lists.<name>`). */
export interface DeclaredList {
  name: string;
  key: 'ip' | 'accountId' | 'userId' | 'unitId';
  /** Default time-to-live of an entry, milliseconds; undefined: entries never expire. */
  ttlMs?: number | undefined;
  description?: string | undefined;
}

/** Admin actions a policy can ask for. */
export type PolicyActionType = 'lock_out_user' | 'archive_device' | 'restrict_factors' | 'one_time_code';

export interface PolicyAction {
  type: PolicyActionType;
  /** The rule or verdict binding that asked for it (for the explanation and the decision log). */
  source: string;
  /** For `restrict_factors`: the factors to keep. */
  allowedFactors?: string[];
  /** For `one_time_code`: code length and validity. */
  length?: number;
  validSecs?: number;
  /** The action's name in the policy file (`actions.<name>`). */
  name?: string;
  /** For `archive_device`: the devices to archive (the request's device, or the policy's `select`). */
  deviceIds?: string[];
  /** For `lock_out_user`: a temporary lock-out's length, milliseconds (`duration`); absent: permanent. */
  durationMs?: number;
  /**
   * For a temporary `lock_out_user`: a lock-out within this many milliseconds of the user's
   * previous one is permanent (`escalateWithin`).
   */
  escalateWithinMs?: number;
}

export interface MatchedRule {
  id: string;
  description: string;
  score?: number;
  verdict?: Verdict;
  /**
   * Set when the rule's expression failed to evaluate and the error policy counted it: its score or
   * verdict counts, its actions are not taken (they are in `suppressedActions`, `rule_error`).
   */
  error?: string;
}

/**
 * An action the policy asked for and did not take. `rule_error`: the rule that asked for it failed
 * to evaluate; it still counted (failing closed) but its side effects are not taken on an unknown.
 * `suppressed_by_rule`: a matched rule's `suppressActions` withheld it (`by` names that rule).
 * `first_factor_not_passed`: a lock-out on a login whose request did not say `firstFactor: passed`.
 */
export interface SuppressedAction {
  /** The action's name in the policy file (`actions.<name>`). */
  name: string;
  type: PolicyActionType;
  /** The rule or verdict binding (`verdict:<v>`) that asked for it. */
  source: string;
  reason: 'rule_error' | 'suppressed_by_rule' | 'first_factor_not_passed';
  /** For `suppressed_by_rule`: the rule whose `suppressActions` withheld it. */
  by?: string;
}

/** A rule that was not evaluated, or whose evaluation failed and did not count. */
export interface SkippedRule {
  id: string;
  /** e.g. `signal newBrowser unavailable (timeout)`, `evaluation error: No such key: x (onError: skip)`. */
  reason: string;
}

/** The allow/deny list entry that decided the verdict. */
export interface OverrideMatch {
  list: 'allow' | 'deny';
  id: string;
  reason: string;
  expiresAt: string;
  /** What matched: `account` or `ip`. */
  matchedBy: 'account' | 'ip';
}

/** One problem found while loading or checking a policy; positions are 1-based. */
export interface PolicyIssue {
  file: string;
  line: number;
  col: number;
  message: string;
  severity: 'error' | 'warning';
}

export interface UnavailableTreatment {
  signal: InputName;
  reason: string;
  /** What the policy did about it: `ignore`, `score:<n>`, or `verdict:<v>`. */
  treatment: string;
}

/**
 * How the policy's degraded rule (`degraded` in the policy, policies/README.md "Degraded
 * decisions") applied: stress can only make a verdict more careful, never more permissive, and
 * never harsher than the evidence.
 */
export interface DegradedOutcome {
  /** The policy's degraded verdict (`degraded.verdict`; default `challenge`). */
  verdict: 'challenge' | 'deny';
  /**
   * Inputs riskgate could not gather, with why (`timeout`, `deadline`, `circuit_open`, an
   * `RG_ERR_*` code). `not_applicable`, `missing_identifiers` and `not_configured` are never here.
   */
  inputs: { input: UnavailableTreatment['signal']; reason: string }[];
  /** Rules riskgate could not evaluate: the budget ran out, or the expression failed. */
  rules: { id: string; reason: 'evaluation_budget' | 'evaluation_error' }[];
  /**
   * Whether the verdict is held at `verdict` at least: a degraded input is read by a risk-raising
   * rule, or such a rule could not be evaluated.
   */
  floor: boolean;
  /**
   * The verdict before it was capped at `verdict`: a deny that rested on no evidence (what
   * unavailability or failing rules added, or a score that a risk-lowering rule riskgate could not
   * evaluate might have brought under the deny threshold).
   */
  cappedFrom?: Verdict;
}

/** How the policy's `outage` section applied to a decision. */
export interface OutageOutcome {
  /** Inputs the policy reads that were unavailable (`not_applicable` aside). */
  unavailableInputs: number;
  /** The outage rule that matched: unavailability amounted to its verdict, not to onUnavailable. */
  rule?: { id: string; description?: string; verdict: Verdict };
  /** `maxUnavailableScore` capped the onUnavailable scores: what they added up to, what counted. */
  cappedScore?: { unavailableScore: number; counted: number };
}

/** The result of one evaluation, with its explanation (always on). */
export interface PolicyDecision {
  verdict: Verdict;
  score: number;
  matchedRules: MatchedRule[];
  thresholds: { challenge: number; deny: number };
  unavailable: UnavailableTreatment[];
  actions: PolicyAction[];
  policy: { name: string; revision: string };
  /**
   * What decided the verdict: an override list entry, a hard rule verdict, the score, an outage
   * rule (`outage` in the policy) that raised it, or the policy's degraded rule (`degraded`) that
   * raised it to its floor or capped a deny that rested on no evidence.
   */
  decidedBy?: 'override' | 'verdict' | 'score' | 'outage' | 'degraded';
  /**
   * Set when riskgate could not gather an input or evaluate a rule (its own state: timeouts, open
   * breakers, the evaluation budget), or when the degraded rule changed the verdict.
   */
  degraded?: DegradedOutcome;
  /** Set when the policy's `outage` section changed what unavailability amounted to. */
  outage?: OutageOutcome;
  /** Set when an allow/deny list entry decided the verdict. */
  override?: OverrideMatch;
  /** Rules not counted: a referenced input was unavailable, or an error with `onError: skip`. */
  skippedRules?: SkippedRule[];
  /** Rules marked `shadow: true` that matched: reported, never counted (to trial an edit live). */
  shadowMatches?: MatchedRule[];
  /** Actions asked for but not taken (a failing rule's, or withheld by `suppressActions`). */
  suppressedActions?: SuppressedAction[];
  /** Rules that matched (or failed) but are snoozed for this login's entity: not counted. */
  snoozed?: SnoozedRule[];
  /**
   * Set when the rule snoozes could not be read (their snapshot is stale): every rule counted as
   * if nothing were snoozed, the careful side (src/snoozes/snooze-sync.ts).
   */
  snoozesUnavailable?: string;
}

/** A policy's "was this you?" settings, compiled. */
export interface AskUserPolicy {
  ruleIds: ReadonlySet<string>;
  /** The `lock_out_user` actions a "no" takes (`source` is `askUser.onNo`). */
  onNo: readonly PolicyAction[];
}

/** What a policy says about review (`review: true` on a rule, `review` by verdict), compiled. */
export interface PolicyReviewMarks {
  /** Rules whose match opens a case. */
  rules: ReadonlySet<string>;
  /** Verdicts whose answer opens a case. */
  verdicts: ReadonlySet<Verdict>;
}

/** How one evaluation runs. */
export interface EvaluateOptions {
  /**
   * CPU budget of this evaluation, in milliseconds. Default: the policy's
   * `defaults.evaluationBudgetMs` (20), what a live decision gets. `Infinity`: none, for a replay,
   * which has no deadline and must answer the same whatever the machine's load.
   */
  budgetMs?: number;
}

/** A loaded, compiled policy. `evaluate` is synchronous and never throws. */
export interface CompiledPolicy {
  name: string;
  /** Content hash of the source files. */
  revision: string;
  requirements: PolicyRequirements;
  signalSettings: { [N in PolicySignalName]?: SignalSettings };
  /** total >= challenge challenges, total >= deny denies. */
  thresholds: { challenge: number; deny: number };
  evaluate(input: PolicyInput, options?: EvaluateOptions): PolicyDecision;
  /** Timeouts of the Admin reads the policy needs. */
  adminSettings?: { user?: AdminReadSettings; devices?: AdminReadSettings };
  /** Non-fatal findings of the load (expired overrides, unused settings). */
  warnings?: readonly PolicyIssue[];
  /** The files the policy was loaded from. */
  files?: readonly string[];
  /** Rule ids in file order. */
  ruleIds?: readonly string[];
  /**
   * "Was this you?" (docs/ask-user.md): the rules that ask (`askUser: true`) and the lock-outs a
   * "no" takes (`askUser.onNo`); absent when no rule asks.
   */
  askUser?: AskUserPolicy | undefined;
  /** The rules and verdicts that open a review case (`review: true`); absent: none. */
  review?: PolicyReviewMarks;
  /** Each rule's `description`, by id. */
  ruleDescriptions?: ReadonlyMap<string, string>;
  /**
   * The verdict to answer, without any upstream call, when riskgate is overloaded (`overload` in
   * the policy); undefined: an overloaded riskgate answers 503 instead.
   */
  overloadVerdict?: Verdict | undefined;
  /** The velocity counters the policy declares (read and counted even when no rule reads one). */
  velocityCounters?: readonly CompiledCounter[];
  /** The runtime lists the policy declares (`lists`), whether or not a rule reads them. */
  lists?: readonly DeclaredList[];
  /**
   * The input table the policy was compiled against (src/policy/inputs/input-table.ts, and any row
   * added to it); absent: the built-in table.
   */
  inputs?: InputTable;
  /** Feature read settings; `history.maxLagMs` marks history unavailable past that follower lag. */
  featureSettings?: {
    velocity?: FeatureReadSettings;
    history?: FeatureReadSettings & { maxLagMs: number };
  };
}
