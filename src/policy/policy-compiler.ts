import { createHash } from 'node:crypto';
import type { ParseResult } from '@marcbachmann/cel-js';
import type { z } from 'zod';
import { DEFAULT_HISTORY_MAX_LAG_SECONDS } from '../features/history-features.ts';
import {
  type CompiledCounter,
  type CounterField,
  compileCounter,
  parseWindow,
} from '../features/velocity-counters.ts';
import { parseCidr } from '../net/ip-cidr.ts';
import { closestName } from '../text/name-suggestion.ts';
import {
  DEVICE_FIELDS,
  HISTORY_FIELDS,
  messageConstructors,
  policyEnvironment,
  REQUEST_FIELDS,
  SIGNAL_VIEW_TYPES,
  USER_FIELDS,
} from './cel-environment.ts';
import { compileFastPath } from './cel-fast-path.ts';
import { budgetComprehensions, DEFAULT_EVALUATION_BUDGET_MS } from './evaluation-budget.ts';
import type { InputTable } from './inputs/input-row.ts';
import { celBindings, INPUT_ROWS } from './inputs/input-table.ts';
import { checkLiteralArguments } from './literal-arguments.ts';
import { analyzeExpression, EVERY_FIELD, type ExpressionRefs, extractGuards } from './policy-analysis.ts';
import {
  type CompiledAction,
  type CompiledOutage,
  type CompiledOutageRule,
  type CompiledOverride,
  type CompiledRule,
  PolicyEvaluator,
  treatmentText,
  type UnavailableSetting,
  VERDICT_RANK,
} from './policy-evaluator.ts';
import {
  crossCheckPolicy,
  type OnUnavailable,
  type PolicyFile,
  parseTtl,
  policyFileSchema,
} from './policy-schema.ts';
import {
  type AdminReadSettings,
  type AskUserPolicy,
  type DeclaredList,
  POLICY_SIGNAL_NAMES,
  type PolicyAction,
  type PolicyIssue,
  type PolicyReviewMarks,
  type PolicySignalName,
  type SignalSettings,
} from './policy-types.ts';
import { renameMatchesCalls } from './re2-matches.ts';
import {
  parseYamlSource,
  positionInString,
  positionOf,
  positionOfKey,
  type YamlPath,
  type YamlSource,
} from './yaml-source.ts';

/** Per-signal and Admin-read timeout when neither the input nor `defaults` sets one, milliseconds. */
export const DEFAULT_TIMEOUT_MS = 250;

/** Timeout of the velocity and history reads when the policy sets none, milliseconds. */
export const DEFAULT_FEATURE_TIMEOUT_MS = 50;

export interface CompileOptions {
  /** Clock for "override already expired" warnings. Default: the wall clock. */
  now?: Date;
  /**
   * Evaluation budget in milliseconds of CPU, over the policy's `defaults.evaluationBudgetMs`
   * (which is whole milliseconds): tests and benches exhaust it on purpose with a microsecond.
   */
  evaluationBudgetMs?: number;
  /**
   * The input table to compile against: the built-in one (src/policy/inputs/input-table.ts), or
   * one with rows added (`[...INPUT_ROWS, row]`). Default: the built-in one.
   */
  inputs?: InputTable;
  /**
   * Whether rule expressions in the subset src/policy/cel-fast-path.ts covers run as plain
   * closures (same answers, cel-js for the rest). `false` runs every expression with cel-js: for
   * the differential test and for side-by-side benches. Default: true.
   */
  fastPath?: boolean;
}

export interface CompileResult {
  /** Present when there is no error (warnings allowed). */
  policy?: PolicyEvaluator;
  /** Errors and warnings, in file order. */
  issues: PolicyIssue[];
}

/** Content hash of policy source text, as the revision reported in every decision. */
export function policyRevision(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/** `rules[2].when`-style rendering of a document path. */
export function pathText(path: YamlPath): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${p}` : p;
  return out || '(root)';
}

function zodMessage(issue: z.core.$ZodIssue, path: YamlPath): string {
  const last = path[path.length - 1];
  if (issue.code === 'invalid_union') {
    if (last === 'onUnavailable')
      return 'must be `ignore`, `{score: <number>}` or `{verdict: allow|challenge|deny}`';
    return 'invalid value; see policies/README.md for the accepted forms';
  }
  if (issue.code === 'unrecognized_keys') return `unknown key "${issue.keys.join('", "')}"`;
  return issue.message;
}

const BOOL_FIELDS = Object.fromEntries(
  Object.entries(SIGNAL_VIEW_TYPES).map(([name, t]) => [
    name,
    new Set(
      Object.entries(t.fields)
        .filter(([, type]) => type === 'bool')
        .map(([f]) => f),
    ),
  ]),
) as unknown as Record<PolicySignalName, ReadonlySet<string>>;

/** Every identifier a policy author can write after a dot, for "did you mean" hints. */
const KNOWN_NAMES: readonly string[] = [
  ...new Set([
    ...POLICY_SIGNAL_NAMES,
    ...Object.values(SIGNAL_VIEW_TYPES).flatMap((t) => Object.keys(t.fields)),
    ...Object.keys(USER_FIELDS),
    ...Object.keys(DEVICE_FIELDS),
    ...Object.keys(REQUEST_FIELDS),
    ...Object.keys(HISTORY_FIELDS),
  ]),
];

const KNOWN_VARIABLES: readonly string[] = [
  'signals',
  'user',
  'devices',
  'request',
  'now',
  'nowSeconds',
  'velocity',
  'history',
  'lists',
  'true',
  'false',
  'null',
];

/** cel-js's summary, with a "did you mean" for misspelled names. */
function celMessage(summary: string): string {
  const field = /^No such key: (\w+)/.exec(summary)?.[1];
  if (field) {
    const best = closestName(field, KNOWN_NAMES);
    return best ? `unknown field "${field}" (did you mean "${best}"?)` : `unknown field "${field}"`;
  }
  const variable = /^Unknown variable: (\w+)/.exec(summary)?.[1];
  if (variable) {
    const best = closestName(variable, KNOWN_VARIABLES);
    const known = 'signals, user, devices, request, velocity, history, lists, now, nowSeconds';
    return best
      ? `unknown name "${variable}" (did you mean "${best}"?)`
      : `unknown name "${variable}"; the inputs are ${known}`;
  }
  return summary;
}

interface CelError {
  summary?: string;
  message: string;
  range?: { start: number; end: number };
}

/**
 * Compiles one policy file: YAML syntax, the zod schema, cross-field rules, then every CEL
 * expression type-checked against the typed environment. Collects every issue it can rather than
 * stopping at the first.
 */
export function compilePolicy(file: string, text: string, options: CompileOptions = {}): CompileResult {
  const { source, issues } = parseYamlSource(file, text);
  const error = (path: YamlPath, message: string, at = positionOf(source, path)): void => {
    issues.push({
      file,
      line: at.line,
      col: at.col,
      message: `${pathText(path)}: ${message}`,
      severity: 'error',
    });
  };
  const warn = (path: YamlPath, message: string): void => {
    const at = positionOf(source, path);
    issues.push({
      file,
      line: at.line,
      col: at.col,
      message: `${pathText(path)}: ${message}`,
      severity: 'warning',
    });
  };
  if (issues.some((i) => i.severity === 'error')) return { issues };

  const parsed = policyFileSchema.safeParse(source.doc.toJS());
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const path = issue.path as (string | number)[];
      const at =
        issue.code === 'unrecognized_keys' && issue.keys[0] !== undefined
          ? positionOfKey(source, path, issue.keys[0])
          : positionOf(source, path);
      error(path, zodMessage(issue, path), at);
    }
    return { issues: sortIssues(issues) };
  }
  const p = parsed.data;
  for (const c of crossCheckPolicy(p)) error(c.path, c.message);

  const table = options.inputs ?? INPUT_ROWS;
  const env = policyEnvironment(celBindings(table));
  const ctors = messageConstructors(celBindings(table));
  const compileExpression = (path: YamlPath, expr: string, wantType: string): ParseResult | undefined => {
    let fn: ParseResult;
    try {
      fn = env.parse(expr);
    } catch (e) {
      const ce = e as CelError;
      error(path, celMessage(ce.summary ?? ce.message), positionInString(source, path, ce.range?.start ?? 0));
      return undefined;
    }
    const checked = fn.check();
    if (!checked.valid) {
      const ce = checked.error as CelError | undefined;
      const msg = celMessage(ce?.summary ?? ce?.message ?? 'type error');
      error(path, msg, positionInString(source, path, ce?.range?.start ?? 0));
      return undefined;
    }
    if (checked.type !== wantType) {
      error(path, `must be of type ${wantType}, but is ${checked.type}`, positionInString(source, path, 0));
      return undefined;
    }
    let valid = true;
    for (const l of checkLiteralArguments(fn.ast, env)) {
      const at = positionInString(source, path, l.offset);
      issues.push({
        file,
        line: at.line,
        col: at.col,
        message: `${pathText(path)}: ${l.message}`,
        severity: l.severity,
      });
      if (l.severity === 'error') valid = false;
    }
    if (!valid) return undefined;
    // Checked as written (errors name `matches`), run with RE2: same length, same offsets.
    const re2 = renameMatchesCalls(fn.ast, expr);
    const run = re2 === undefined ? fn : env.parse(re2);
    if (run !== fn) run.check();
    budgetComprehensions(run);
    return run;
  };

  // Actions first: rules refer to them by name.
  const actionReads = new Set<string>();
  /** The fields of each signal's view a rule or an action reads. */
  const fieldReads = new Map<string, Set<string>>();
  const addFieldReads = (refs: ExpressionRefs) => {
    for (const [name, fields] of refs.signalFields) {
      const into = fieldReads.get(name);
      if (into === undefined) fieldReads.set(name, new Set(fields));
      else for (const f of fields) into.add(f);
    }
  };
  const actions = new Map<string, CompiledAction>();
  for (const [name, cfg] of Object.entries(p.actions ?? {})) {
    const template: Omit<PolicyAction, 'source'> = { type: cfg.type, name };
    if (cfg.type === 'restrict_factors') template.allowedFactors = [...cfg.allowedFactors];
    if (cfg.type === 'one_time_code') {
      if (cfg.length !== undefined) template.length = cfg.length;
      if (cfg.validSecs !== undefined) template.validSecs = cfg.validSecs;
    }
    const compiled: CompiledAction = { name, template };
    // A lock-out on an attempt that may not even have had the password is a weapon against the
    // account's owner (policies/README.md, "A lock-out is never a weapon").
    if (cfg.type === 'lock_out_user' && cfg.requireFirstFactor !== false) compiled.requireFirstFactor = true;
    if (cfg.type === 'lock_out_user' && cfg.duration !== undefined) {
      // Checked by the schema: both parse.
      template.durationMs = parseWindow(cfg.duration)!;
      if (cfg.escalateWithin !== undefined) template.escalateWithinMs = parseWindow(cfg.escalateWithin)!;
    }
    if (cfg.type === 'archive_device' && cfg.select !== undefined) {
      const path = ['actions', name, 'select'];
      const fn = compileExpression(path, cfg.select, 'list<string>');
      if (fn) {
        compiled.select = fn;
        const refs = analyzeExpression(fn.ast, table);
        for (const name of refs.inputs) actionReads.add(name);
        addFieldReads(refs);
      }
    }
    actions.set(name, compiled);
  }

  const defaults = p.defaults ?? {};
  const defaultOnError = defaults.onError ?? 'failClosed';
  const velocityCounters: CompiledCounter[] = Object.entries(p.velocity?.counters ?? {}).map(([name, c]) =>
    compileCounter(name, {
      key: c.key as CounterField[],
      count: c.count,
      of: c.of as CounterField | undefined,
      windowMs: parseWindow(c.window)!,
    }),
  );
  const counterNames = velocityCounters.map((c) => c.name);
  /** Velocity names an expression reads must be declared: a typo is a load error, not a runtime one. */
  const checkVelocityNames = (path: YamlPath, names: ReadonlySet<string>): boolean => {
    let ok = true;
    for (const name of names) {
      if (counterNames.includes(name)) continue;
      ok = false;
      const best = closestName(name, counterNames);
      error(
        path,
        counterNames.length === 0
          ? `velocity.${name}: the policy declares no velocity counters (velocity.counters)`
          : `unknown velocity counter "${name}"${best ? ` (did you mean "${best}"?)` : ''}; declared: ${counterNames.join(', ')}`,
      );
    }
    return ok;
  };
  const declaredLists = declaredListsOf(p);
  const listNames = declaredLists.map((l) => l.name);
  /** List names an expression reads must be declared: reading an undeclared list is a load error. */
  const checkListNames = (path: YamlPath, names: ReadonlySet<string>): boolean => {
    let ok = true;
    for (const name of names) {
      if (listNames.includes(name)) continue;
      ok = false;
      const best = closestName(name, listNames);
      error(
        path,
        listNames.length === 0
          ? `lists.${name}: the policy declares no lists (lists)`
          : `unknown list "${name}"${best ? ` (did you mean "${best}"?)` : ''}; declared: ${listNames.join(', ')}`,
      );
    }
    return ok;
  };
  /** Every input a rule or an action reads, by name. */
  const reads = new Set<string>(actionReads);
  const bitOf = new Map(table.map((row, i) => [row.name, 1 << i]));
  const rules: CompiledRule[] = [];
  let raisingMask = 0;
  p.rules.forEach((rule, i) => {
    if (rule.verdict === 'allow') warn(['rules', i, 'verdict'], HARD_ALLOW_WARNING);
    const fn = compileExpression(['rules', i, 'when'], rule.when, 'bool');
    if (!fn) return;
    const refs = analyzeExpression(fn.ast, table);
    addFieldReads(refs);
    if (!checkVelocityNames(['rules', i, 'when'], refs.velocityNames)) return;
    if (!checkListNames(['rules', i, 'when'], refs.listNames)) return;
    let skipMask = 0;
    // Every input the rule reads, availability-aware or not: the degraded floor's inputs.
    let readMask = 0;
    for (const name of refs.inputs) {
      reads.add(name);
      const bit = bitOf.get(name)!;
      if (!refs.aware.has(name)) skipMask |= bit;
      readMask |= bit;
    }
    const score = rule.score ?? 0;
    const verdictRank = rule.verdict ? VERDICT_RANK[rule.verdict] : 0;
    const onError = rule.onError ?? defaultOnError;
    const raisesRisk = score > 0 || verdictRank >= VERDICT_RANK.challenge;
    if (raisesRisk && !rule.shadow) raisingMask |= readMask;
    const matched = Object.freeze({
      id: rule.id,
      description: rule.description,
      ...(rule.score !== undefined ? { score: rule.score } : {}),
      ...(rule.verdict !== undefined ? { verdict: rule.verdict } : {}),
    });
    rules.push({
      id: rule.id,
      score,
      verdictRank,
      fn,
      fast: options.fastPath === false ? undefined : compileFastPath(fn.ast, ctors),
      guards: extractGuards(fn.ast, (sig) => BOOL_FIELDS[sig]).map((g) => ({
        ...g,
        bit: bitOf.get(g.signal)!,
      })),
      skipMask,
      onError,
      countsOnError: onError === 'match' || (onError === 'failClosed' && raisesRisk),
      raisesRisk,
      lowering: Math.min(score, 0),
      lowersToAllow: rule.verdict === 'allow',
      shadow: rule.shadow ?? false,
      matched,
      actions: (rule.actions ?? []).flatMap((a) => actions.get(a) ?? []),
      suppresses: rule.suppressActions ?? [],
    });
  });

  warnUnavailableAllow(p, warn);
  const degradedVerdict = p.degraded?.verdict ?? 'challenge';
  if (degradedVerdict !== 'deny') warnDenyWithoutEvidence(p, degradedVerdict, warn);
  warnUnused(p, reads, actions, warn);
  const now = (options.now ?? new Date()).getTime();
  const overrides: CompiledOverride[] = [];
  for (const list of ['deny', 'allow'] as const) {
    p.overrides?.[list]?.forEach((o, i) => {
      const expiresAtMs = Date.parse(o.expiresAt);
      if (expiresAtMs <= now)
        warn(['overrides', list, i, 'expiresAt'], `override "${o.id}" expired; it is ignored`);
      overrides.push({
        list,
        id: o.id,
        reason: o.reason,
        expiresAt: o.expiresAt,
        expiresAtMs,
        accounts: new Set(o.accounts ?? []),
        cidrs: (o.cidrs ?? []).flatMap((c) => parseCidr(c) ?? []),
      });
    });
  }

  if (issues.some((i) => i.severity === 'error')) return { issues: sortIssues(issues) };

  const defaultTimeout = defaults.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const defaultOnUnavailable: OnUnavailable = defaults.onUnavailable ?? 'ignore';
  const signalOrder = POLICY_SIGNAL_NAMES.filter((s) => reads.has(s));
  const signalSettings: { [N in PolicySignalName]?: SignalSettings } = {};
  for (const s of signalOrder) {
    const cfg = p.signals?.[s];
    signalSettings[s] = { timeoutMs: cfg?.timeoutMs ?? defaultTimeout, params: { ...(cfg?.params ?? {}) } };
  }
  const adminSettings: { user?: AdminReadSettings; devices?: AdminReadSettings } = {};
  if (reads.has('adminUser')) adminSettings.user = { timeoutMs: p.admin?.user?.timeoutMs ?? defaultTimeout };
  if (reads.has('adminDevices'))
    adminSettings.devices = { timeoutMs: p.admin?.devices?.timeoutMs ?? defaultTimeout };
  const featureSettings: NonNullable<PolicyEvaluator['featureSettings']> = {};
  if (reads.has('velocity'))
    featureSettings.velocity = { timeoutMs: p.velocity?.timeoutMs ?? DEFAULT_FEATURE_TIMEOUT_MS };
  if (reads.has('history')) {
    featureSettings.history = {
      timeoutMs: p.history?.timeoutMs ?? DEFAULT_FEATURE_TIMEOUT_MS,
      maxLagMs: (p.history?.maxLagSeconds ?? DEFAULT_HISTORY_MAX_LAG_SECONDS) * 1000,
    };
  } else if (p.history !== undefined) warn(['history'], 'settings for history, but no rule reads `history`');
  // One per input read, in table order: the order of explanations and skip reasons.
  const unavailableSettings: UnavailableSetting[] = [];
  table.forEach((row, i) => {
    if (!reads.has(row.name)) return;
    const onUnavailable = ownOnUnavailable(p, row.name) ?? defaultOnUnavailable;
    unavailableSettings.push({
      signal: row.name as UnavailableSetting['signal'],
      bit: 1 << i,
      row,
      onUnavailable,
      treatment: treatmentText(onUnavailable),
    });
  });

  const outage = compileOutage(p, unavailableSettings, warn);

  const policy = new PolicyEvaluator({
    name: p.name,
    revision: policyRevision(text),
    files: [file],
    thresholds: Object.freeze({ challenge: p.thresholds.challenge, deny: p.thresholds.deny }),
    rules,
    requirements: {
      signals: new Set(signalOrder),
      adminUser: reads.has('adminUser'),
      adminDevices: reads.has('adminDevices'),
      velocity: reads.has('velocity'),
      history: reads.has('history'),
      lists: reads.has('lists'),
      inputs: new Set(table.filter((row) => reads.has(row.name)).map((row) => row.name)),
      signalFields: new Map(signalOrder.map((s) => [s, fieldReads.get(s) ?? new Set([EVERY_FIELD])])),
    },
    inputs: table,
    velocityCounters,
    lists: declaredLists,
    featureSettings,
    signalSettings,
    adminSettings,
    unavailableSettings,
    verdictActions: {
      allow: (p.verdictActions?.allow ?? []).flatMap((a) => actions.get(a) ?? []),
      challenge: (p.verdictActions?.challenge ?? []).flatMap((a) => actions.get(a) ?? []),
      deny: (p.verdictActions?.deny ?? []).flatMap((a) => actions.get(a) ?? []),
    },
    overrides,
    outage,
    overloadVerdict: p.overload?.verdict,
    askUser: askUserOf(p, actions),
    review: reviewMarksOf(p),
    evaluationBudgetMs:
      options.evaluationBudgetMs ?? defaults.evaluationBudgetMs ?? DEFAULT_EVALUATION_BUDGET_MS,
    degradedRank: VERDICT_RANK[degradedVerdict],
    raisingMask,
    warnings: sortIssues(issues),
  });
  return { policy, issues: sortIssues(issues) };
}

/** The rules that ask "was this you?" and the lock-outs a "no" takes; undefined when none asks. */
function askUserOf(p: PolicyFile, actions: ReadonlyMap<string, CompiledAction>): AskUserPolicy | undefined {
  const ruleIds = new Set(p.rules.filter((r) => r.askUser === true).map((r) => r.id));
  if (ruleIds.size === 0) return undefined;
  const onNo = (p.askUser?.onNo ?? []).flatMap((name) => {
    const a = actions.get(name);
    return a === undefined ? [] : [{ ...a.template, source: 'askUser.onNo' }];
  });
  return { ruleIds, onNo };
}

/** The rules and verdicts whose `review: true` opens a case; undefined when none does. */
function reviewMarksOf(p: PolicyFile): PolicyReviewMarks | undefined {
  const rules = new Set(p.rules.filter((r) => r.review === true).map((r) => r.id));
  const verdicts = new Set((['allow', 'challenge', 'deny'] as const).filter((v) => p.review?.[v] === true));
  return rules.size === 0 && verdicts.size === 0 ? undefined : { rules, verdicts };
}

/** The `lists` section as the evaluator and the list store read it. */
function declaredListsOf(p: PolicyFile): DeclaredList[] {
  return Object.entries(p.lists ?? {}).map(([name, l]) => ({
    name,
    key: l.key,
    ttlMs: l.ttl === undefined ? undefined : parseTtl(l.ttl),
    description: l.description,
  }));
}

/**
 * The `outage` section, with input names turned into activation bits. An outage rule naming an
 * input the policy never reads could never match: a warning, and the rule is kept (harmless).
 */
function compileOutage(
  p: PolicyFile,
  settings: readonly UnavailableSetting[],
  warn: (path: (string | number)[], message: string) => void,
): CompiledOutage | undefined {
  if (p.outage === undefined) return undefined;
  const bitOf = new Map(settings.map((u) => [u.signal as string, u.bit]));
  const rules: CompiledOutageRule[] = (p.outage.rules ?? []).map((r, i) => {
    let allOfMask = 0;
    r.when.unavailable?.forEach((name, j) => {
      const bit = bitOf.get(name);
      if (bit === undefined) {
        warn(
          ['outage', 'rules', i, 'when', 'unavailable', j],
          `the policy never reads ${name}, so outage rule "${r.id}" cannot match`,
        );
        allOfMask = -1;
      } else if (allOfMask !== -1) allOfMask |= bit;
    });
    return {
      id: r.id,
      description: r.description,
      // A rule that can never match keeps an impossible count instead of a mask.
      atLeast: allOfMask === -1 ? Number.POSITIVE_INFINITY : (r.when.unavailableAtLeast ?? 0),
      allOfMask: allOfMask === -1 ? 0 : allOfMask,
      verdict: r.verdict,
    };
  });
  return { maxUnavailableScore: p.outage.maxUnavailableScore, rules };
}

const HARD_ALLOW_WARNING =
  'a hard allow overrides any score, including a total at or above the deny threshold (only a hard ' +
  'deny beats it); to exempt accounts or networks, use overrides.allow, which expires';

/** `onUnavailable: {verdict: allow}` anywhere: an outage would allow whatever the score says. */
function warnUnavailableAllow(p: PolicyFile, warn: (path: YamlPath, message: string) => void): void {
  const message = (what: string) =>
    `${what} unavailable allows the login whatever the score (a hard allow; only a hard deny beats it)`;
  const isAllow = (o: OnUnavailable | undefined) =>
    typeof o === 'object' && 'verdict' in o && o.verdict === 'allow';
  if (isAllow(p.defaults?.onUnavailable))
    warn(['defaults', 'onUnavailable'], message('any input without its own setting'));
  for (const [s, cfg] of Object.entries(p.signals ?? {}))
    if (isAllow(cfg?.onUnavailable)) warn(['signals', s, 'onUnavailable'], message(`signals.${s}`));
  for (const r of ['user', 'devices'] as const)
    if (isAllow(p.admin?.[r]?.onUnavailable))
      warn(['admin', r, 'onUnavailable'], message(`the Admin ${r} read`));
}

/**
 * `onUnavailable: {verdict: deny}` or an outage rule that denies, while the degraded verdict is not
 * deny: a deny on missing evidence, which the evaluator caps at the degraded verdict. Said at load
 * so the file does not read as doing what it cannot.
 */
function warnDenyWithoutEvidence(
  p: PolicyFile,
  degradedVerdict: string,
  warn: (path: YamlPath, message: string) => void,
): void {
  const message = (what: string) =>
    `${what} denies on missing evidence; the verdict is capped at the degraded verdict (${degradedVerdict}) ` +
    'unless `degraded: {verdict: deny}` says otherwise (policies/README.md, "Degraded decisions")';
  const isDeny = (o: OnUnavailable | undefined) =>
    typeof o === 'object' && 'verdict' in o && o.verdict === 'deny';
  if (isDeny(p.defaults?.onUnavailable)) warn(['defaults', 'onUnavailable'], message('an unavailable input'));
  for (const [s, cfg] of Object.entries(p.signals ?? {}))
    if (isDeny(cfg?.onUnavailable))
      warn(['signals', s, 'onUnavailable'], message(`signals.${s} unavailable`));
  for (const r of ['user', 'devices'] as const)
    if (isDeny(p.admin?.[r]?.onUnavailable))
      warn(['admin', r, 'onUnavailable'], message(`the Admin ${r} read unavailable`));
  for (const f of ['velocity', 'history'] as const)
    if (isDeny(p[f]?.onUnavailable)) warn([f, 'onUnavailable'], message(`${f} unavailable`));
  p.outage?.rules?.forEach((r, i) => {
    if (r.verdict === 'deny') warn(['outage', 'rules', i, 'verdict'], message(`outage rule "${r.id}"`));
  });
}

/** An input's own `onUnavailable` in the policy file; undefined: `defaults.onUnavailable`. */
function ownOnUnavailable(p: PolicyFile, name: string): OnUnavailable | undefined {
  switch (name) {
    case 'adminUser':
      return p.admin?.user?.onUnavailable;
    case 'adminDevices':
      return p.admin?.devices?.onUnavailable;
    case 'velocity':
      return p.velocity?.onUnavailable;
    case 'history':
      return p.history?.onUnavailable;
    default:
      return p.signals?.[name as PolicySignalName]?.onUnavailable;
  }
}

function warnUnused(
  p: PolicyFile,
  reads: ReadonlySet<string>,
  actions: ReadonlyMap<string, CompiledAction>,
  warn: (path: YamlPath, message: string) => void,
): void {
  for (const s of Object.keys(p.signals ?? {}) as PolicySignalName[]) {
    if (!reads.has(s)) warn(['signals', s], `settings for "${s}", but no rule reads signals.${s}`);
  }
  if (p.admin?.user && !reads.has('adminUser'))
    warn(['admin', 'user'], 'settings for the Admin user, but no rule reads `user`');
  if (p.admin?.devices && !reads.has('adminDevices')) {
    warn(['admin', 'devices'], 'settings for Admin devices, but no rule reads `devices`');
  }
  const used = new Set<string>([
    ...p.rules.flatMap((r) => r.actions ?? []),
    ...Object.values(p.verdictActions ?? {}).flat(),
    ...(p.askUser?.onNo ?? []),
  ]);
  for (const name of actions.keys())
    if (!used.has(name)) warn(['actions', name], `action "${name}" is never used`);
}

function sortIssues(issues: PolicyIssue[]): PolicyIssue[] {
  return issues.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.col - b.col);
}

export type { YamlSource };
