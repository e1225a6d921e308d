import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  type AdminDevice,
  type AdminUser,
  adminDeviceSchema,
  adminUserSchema,
} from '../admin/admin-schemas.ts';
import { quietHistory } from '../features/history-features.ts';
import { type Cidr, cidrContains, parseCidr, parseIp } from '../net/ip-cidr.ts';
import { SIGNAL_TYPES } from '../signals/signal-schemas.ts';
import { pathText } from './policy-compiler.ts';
import { compilePolicyFile } from './policy-loader.ts';
import {
  type ExpectedDecision,
  type GivenInput,
  type PolicyTestFile,
  policyTestFileSchema,
  SIGNAL_RESPONSE_SCHEMAS,
} from './policy-test-schema.ts';
import {
  type CompiledPolicy,
  type ListLookup,
  POLICY_SIGNAL_NAMES,
  type PolicyDecision,
  type PolicyInput,
  type PolicyIssue,
  type PolicySignalName,
  type SignalOutcome,
} from './policy-types.ts';
import { parseYamlSource, positionOf } from './yaml-source.ts';

/**
 * Runs policy test suites: each case builds a `PolicyInput` from vendor-shaped data, evaluates it
 * with the compiled policy, and compares verdict, score, matched rules, actions. Beyond pass/fail it
 * reports coverage: rules never seen matching or never seen not matching, and referenced signals
 * never seen unavailable, so "every rule both ways" is checked, not hoped for.
 */

export interface CaseResult {
  name: string;
  file: string;
  line: number;
  passed: boolean;
  failures: string[];
  decision?: PolicyDecision;
}

export interface RuleCoverage {
  id: string;
  matched: number;
  notMatched: number;
}

export interface SuiteResult {
  file: string;
  policyFile: string;
  policy?: { name: string; revision: string };
  /** Errors that stopped the suite from running (bad suite file, policy does not compile). */
  issues: PolicyIssue[];
  cases: CaseResult[];
  coverage: {
    rules: RuleCoverage[];
    /** Referenced inputs and in how many cases each was unavailable (not_applicable excluded). */
    unavailable: { signal: string; cases: number }[];
    /** Human-readable gaps: a rule never matched, never unmatched, an input never unavailable. */
    gaps: string[];
  };
}

const BASE_TIME = 1_700_000_000;

function baseUser(accountId: string): AdminUser {
  return {
    user_id: `user-${accountId}`,
    username: accountId,
    allowed_factors: ['approve', 'mobile_auth', 'mobile_totp', 'passcode'],
    failed_attempts: 0,
    max_attempts: 15,
    service_defined_username: true,
    status: 'enabled',
    created_at: BASE_TIME,
    updated_at: BASE_TIME,
  };
}

function baseDevice(accountId: string, i: number): AdminDevice {
  return {
    device_id: `device-${accountId}-${i + 1}`,
    user_id: `user-${accountId}`,
    capabilities: ['approve', 'mobile_auth', 'mobile_totp'],
    display_name: 'Phone',
    enrolled: true,
    enrolled_at: BASE_TIME,
    created_at: BASE_TIME,
    updated_at: BASE_TIME,
    type: 'ios',
    version: '4.0.0',
    version_supported: true,
  };
}

/** Builds the `PolicyInput` of one case from the suite defaults and the case's `given`. */
export function buildInput(
  defaults: Omit<GivenInput, 'now'> | undefined,
  given: GivenInput,
  now: string,
  counterNames: readonly string[] = [],
): PolicyInput {
  const request = {
    accountId: 'test-account',
    ...defaults?.request,
    ...given.request,
    context: { ...defaults?.request?.context, ...given.request?.context },
  };
  const signals: PolicyInput['signals'] = {};
  const mergedSignals = { ...defaults?.signals, ...given.signals };
  for (const name of POLICY_SIGNAL_NAMES) {
    const g = mergedSignals[name] as { unavailable: string } | { signalType?: string } | null | undefined;
    if (g === undefined || g === null) continue;
    let outcome: SignalOutcome;
    if ('unavailable' in g) outcome = { status: 'unavailable', reason: g.unavailable };
    else {
      const response = SIGNAL_RESPONSE_SCHEMAS[name].parse({
        ...g,
        signalType: g.signalType ?? SIGNAL_TYPES[name],
      });
      outcome = { status: 'ok', response } as SignalOutcome;
    }
    (signals as Record<PolicySignalName, SignalOutcome>)[name] = outcome;
  }
  const input: PolicyInput = { signals, devices: [], request, now: new Date(given.now ?? now) };
  const adminUnavailable: { user?: string; devices?: string } = {};
  const userGiven = given.user ?? defaults?.user;
  if (userGiven && 'unavailable' in userGiven) adminUnavailable.user = userGiven.unavailable;
  else {
    const d = defaults?.user && !('unavailable' in defaults.user) ? defaults.user : {};
    const c = given.user && !('unavailable' in given.user) ? given.user : {};
    input.user = adminUserSchema.parse({ ...baseUser(request.accountId), ...d, ...c });
  }
  const devicesGiven = given.devices ?? defaults?.devices;
  if (devicesGiven && 'unavailable' in devicesGiven) adminUnavailable.devices = devicesGiven.unavailable;
  else {
    input.devices = (devicesGiven ?? [{}]).map((d, i) =>
      adminDeviceSchema.parse({ ...baseDevice(request.accountId, i), ...d }),
    );
  }
  if (adminUnavailable.user !== undefined || adminUnavailable.devices !== undefined) {
    input.adminUnavailable = adminUnavailable;
  }
  // Velocity and history: a quiet login unless given (each counter 0, history caught up).
  const featuresUnavailable: { velocity?: string; history?: string } = {};
  const velocity = givenFeature(
    Object.fromEntries(counterNames.map((n): [string, number] => [n, 0])),
    defaults?.velocity,
    given.velocity,
  );
  if ('unavailable' in velocity) featuresUnavailable.velocity = velocity.unavailable;
  else input.velocity = velocity.value;
  // The follower caught up: the Log API's own two minutes behind.
  const history = givenFeature(quietHistory(120), defaults?.history, given.history);
  if ('unavailable' in history) featuresUnavailable.history = history.unavailable;
  else input.history = history.value;
  if (featuresUnavailable.velocity !== undefined || featuresUnavailable.history !== undefined)
    input.featuresUnavailable = featuresUnavailable;
  const lists = given.lists ?? defaults?.lists ?? {};
  if ('unavailable' in lists) input.listsUnavailable = String(lists.unavailable);
  else input.lists = givenLists(lists as Record<string, string[]>);
  return input;
}

/**
 * The runtime lists as a case gives them, matched as riskgate matches them (src/lists/): an entry
 * equal to the value, or a CIDR (an address is its own /32 or /128) holding it.
 */
function givenLists(lists: Record<string, string[]>): ListLookup {
  const networks = new Map<string, Cidr[]>();
  for (const [name, entries] of Object.entries(lists)) {
    networks.set(
      name,
      entries.flatMap((e) => parseCidr(e.includes('/') ? e : `${e}/${e.includes(':') ? 128 : 32}`) ?? []),
    );
  }
  return {
    contains(name, value) {
      if (lists[name]?.includes(value)) return true;
      const words = parseIp(value);
      return words !== null && (networks.get(name) ?? []).some((c) => cidrContains(c, words));
    },
  };
}

/**
 * A feature read of one case: unavailable when the case (or else the defaults) says so, otherwise
 * `base` with the defaults' values and then the case's over it.
 */
function givenFeature<T extends object>(
  base: T,
  defaults: Partial<T> | { unavailable: string } | undefined,
  given: Partial<T> | { unavailable: string } | undefined,
): { value: T } | { unavailable: string } {
  const chosen = given ?? defaults;
  if (chosen !== undefined && 'unavailable' in chosen) return { unavailable: chosen.unavailable };
  for (const part of [defaults, given])
    if (part !== undefined && !('unavailable' in part)) Object.assign(base, part);
  return { value: base };
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const s = new Set(a);
  return b.every((x) => s.has(x));
}

function list(xs: readonly string[]): string {
  return xs.length ? `[${xs.join(', ')}]` : '[]';
}

/** Differences between what a case expects and the decision, one line each. */
export function compareDecision(expect: ExpectedDecision, d: PolicyDecision): string[] {
  const out: string[] = [];
  if (expect.verdict !== undefined && expect.verdict !== d.verdict) {
    out.push(
      `verdict: expected ${expect.verdict}, got ${d.verdict} (score ${d.score}, decided by ${d.decidedBy})`,
    );
  }
  if (expect.score !== undefined && expect.score !== d.score) {
    out.push(`score: expected ${expect.score}, got ${d.score}`);
  }
  const matched = d.matchedRules.map((r) => r.id);
  if (expect.matchedRules && !sameSet(expect.matchedRules, matched)) {
    out.push(`matchedRules: expected ${list(expect.matchedRules)}, got ${list(matched)}`);
  }
  const skipped = (d.skippedRules ?? []).map((r) => r.id);
  if (expect.skippedRules && !sameSet(expect.skippedRules, skipped)) {
    out.push(`skippedRules: expected ${list(expect.skippedRules)}, got ${list(skipped)}`);
  }
  const actions = d.actions.map((a) => a.name ?? a.type);
  if (expect.actions && !sameSet(expect.actions, actions)) {
    out.push(`actions: expected ${list(expect.actions)}, got ${list(actions)}`);
  }
  const suppressed = (d.suppressedActions ?? []).map((a) => a.name);
  if (expect.suppressedActions && !sameSet(expect.suppressedActions, suppressed)) {
    out.push(`suppressedActions: expected ${list(expect.suppressedActions)}, got ${list(suppressed)}`);
  }
  if (expect.decidedBy !== undefined && expect.decidedBy !== d.decidedBy) {
    out.push(`decidedBy: expected ${expect.decidedBy}, got ${d.decidedBy}`);
  }
  const outageRule = d.outage?.rule?.id ?? null;
  if (expect.outageRule !== undefined && expect.outageRule !== outageRule) {
    out.push(`outageRule: expected ${expect.outageRule ?? 'none'}, got ${outageRule ?? 'none'}`);
  }
  for (const r of d.matchedRules) if (r.error) out.push(`rule ${r.id} failed to evaluate: ${r.error}`);
  return out;
}

/** Runs one suite file. Never throws: problems come back in `issues` and failed cases. */
export async function runPolicyTestFile(
  file: string,
  options: { policy?: CompiledPolicy } = {},
): Promise<SuiteResult> {
  const result: SuiteResult = {
    file,
    policyFile: '',
    issues: [],
    cases: [],
    coverage: { rules: [], unavailable: [], gaps: [] },
  };
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'EIO';
    result.issues.push({
      file,
      line: 1,
      col: 1,
      message: `cannot read the file (${code})`,
      severity: 'error',
    });
    return result;
  }
  const { source, issues } = parseYamlSource(file, text);
  if (issues.some((i) => i.severity === 'error')) {
    result.issues.push(...issues);
    return result;
  }
  const parsed = policyTestFileSchema.safeParse(source.doc.toJS());
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const path = issue.path as (string | number)[];
      const at = positionOf(source, path);
      const where = pathText(path);
      result.issues.push({ file, ...at, message: `${where}: ${issue.message}`, severity: 'error' });
    }
    return result;
  }
  const suite: PolicyTestFile = parsed.data;
  result.policyFile = join(dirname(file), suite.policy);
  let policy = options.policy;
  if (!policy) {
    const compiled = await compilePolicyFile(result.policyFile);
    if (!compiled.policy) {
      result.issues.push(...compiled.issues.filter((i) => i.severity === 'error'));
      return result;
    }
    policy = compiled.policy;
  }
  result.policy = { name: policy.name, revision: policy.revision };

  const ruleIds = policy.ruleIds ?? [];
  const coverage = new Map<string, RuleCoverage>(
    ruleIds.map((id) => [id, { id, matched: 0, notMatched: 0 }]),
  );
  const unavailableCount = new Map<string, number>();
  for (const s of policy.requirements.signals) unavailableCount.set(s, 0);
  if (policy.requirements.adminUser) unavailableCount.set('adminUser', 0);
  if (policy.requirements.adminDevices) unavailableCount.set('adminDevices', 0);
  if (policy.requirements.velocity) unavailableCount.set('velocity', 0);
  if (policy.requirements.history) unavailableCount.set('history', 0);

  suite.cases.forEach((c, i) => {
    const { line } = positionOf(source, ['cases', i]);
    const caseResult: CaseResult = { name: c.name, file, line, passed: false, failures: [] };
    let input: PolicyInput;
    try {
      input = buildInput(
        suite.defaults,
        c.given,
        suite.now,
        (policy.velocityCounters ?? []).map((v) => v.name),
      );
    } catch (e) {
      caseResult.failures.push(`given: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
      result.cases.push(caseResult);
      return;
    }
    const d = policy.evaluate(input);
    caseResult.decision = d;
    caseResult.failures = compareDecision(c.expect, d);
    caseResult.passed = caseResult.failures.length === 0;
    result.cases.push(caseResult);

    const matched = new Set([...d.matchedRules, ...(d.shadowMatches ?? [])].map((r) => r.id));
    const skipped = new Set((d.skippedRules ?? []).map((r) => r.id));
    for (const cov of coverage.values()) {
      if (matched.has(cov.id)) cov.matched++;
      else if (!skipped.has(cov.id)) cov.notMatched++;
    }
    for (const u of d.unavailable) {
      if (u.reason !== 'not_applicable')
        unavailableCount.set(u.signal, (unavailableCount.get(u.signal) ?? 0) + 1);
    }
  });

  result.coverage.rules = [...coverage.values()];
  result.coverage.unavailable = [...unavailableCount].map(([signal, cases]) => ({ signal, cases }));
  for (const r of result.coverage.rules) {
    if (r.matched === 0) result.coverage.gaps.push(`rule ${r.id} never matched`);
    if (r.notMatched === 0) result.coverage.gaps.push(`rule ${r.id} never evaluated to false`);
  }
  for (const u of result.coverage.unavailable) {
    if (u.cases === 0) result.coverage.gaps.push(`${u.signal} never unavailable`);
  }
  return result;
}
