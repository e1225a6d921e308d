import { parseArgs } from 'node:util';
import { Engine } from 'json-rules-engine';
import { cidrContains, parseCidr, parseIp } from '../src/net/ip-cidr.ts';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import type { CompiledPolicy, PolicyInput, Verdict } from '../src/policy/policy-types.ts';
import { median } from './bench-median.ts';
import { shippedInputs } from './shipped-cases.ts';

/**
 * Policy-evaluation microbenchmark: nanoseconds per evaluation of the shipped policy
 * (policies/login.yaml) over the inputs of its test suite, and of the same rules written for
 * json-rules-engine, measured in the same process and run. Every evaluation is timed on its own
 * with process.hrtime.bigint() (its own cost, ~30-60 ns, is included in both figures) after a
 * warm-up; median and p99 come from the sorted samples. Before measuring, both engines must agree
 * on verdict and score for every input, so the comparison is of equal work.
 *
 *   npx tsx bench/policy-eval.ts [--iterations 200000] [--jre-iterations 20000] [--runs 3] [--json]
 */

const POLICY = new URL('../policies/login.yaml', import.meta.url).pathname;

export interface EngineFigures {
  medianNs: number;
  p99Ns: number;
  meanNs: number;
  samples: number;
}

export interface PolicyEvalResult {
  policy: { name: string; revision: string; rules: number };
  inputs: number;
  runs: { riskgate: EngineFigures; jsonRulesEngine: EngineFigures }[];
  /** Median over runs of each figure. */
  riskgate: EngineFigures;
  jsonRulesEngine: EngineFigures;
  /** jsonRulesEngine median / riskgate median. */
  speedup: number;
}

/** The shipped suite's inputs, as this checkout builds them. */
export function suiteInputs(counterNames: readonly string[]): Promise<PolicyInput[]> {
  return shippedInputs<PolicyInput>(new URL('..', import.meta.url).pathname, counterNames);
}

export function figures(samples: Float64Array): EngineFigures {
  samples.sort();
  let sum = 0;
  for (const s of samples) sum += s;
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
  return {
    medianNs: at(0.5),
    p99Ns: at(0.99),
    meanNs: Math.round(sum / samples.length),
    samples: samples.length,
  };
}

// --- riskgate --------------------------------------------------------------------------------

function measureRiskgate(policy: CompiledPolicy, inputs: PolicyInput[], iterations: number): EngineFigures {
  let sink = 0;
  for (let i = 0; i < Math.min(20_000, iterations); i++)
    sink += policy.evaluate(inputs[i % inputs.length]!).score;
  const samples = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const input = inputs[i % inputs.length]!;
    const t0 = process.hrtime.bigint();
    const d = policy.evaluate(input);
    const t1 = process.hrtime.bigint();
    sink += d.score;
    samples[i] = Number(t1 - t0);
  }
  if (sink === Number.MIN_VALUE) console.log(sink);
  return figures(samples);
}

// --- the same rules for json-rules-engine ---------------------------------------------------

const DAY = 86_400;
const DENY_CIDRS = ['198.18.0.0/15', '2001:db8:dead::/48'].map((c) => parseCidr(c)!);
const DENY_UNTIL = Date.parse('2027-05-01T00:00:00Z');
const ALLOW_ACCOUNTS = new Set(['synthetic-probe-1']);
const ALLOW_UNTIL = Date.parse('2027-06-30T00:00:00Z');

/** Flattens a PolicyInput into json-rules-engine facts (the work riskgate's activation does). */
function toFacts(input: PolicyInput): Record<string, unknown> {
  const s = input.signals;
  const ok = <T>(o: { status: 'ok'; response: T } | { status: 'unavailable'; reason: string } | undefined) =>
    o?.status === 'ok' ? o.response : undefined;
  const why = (o: { status: string; reason?: string } | undefined) =>
    o === undefined ? 'missing' : o.status === 'unavailable' ? (o.reason ?? '') : '';
  const rat = ok(s.remoteAccessTool);
  const nb = ok(s.newBrowser);
  const lp = ok(s.latestProximity);
  const geo = ok(s.geovelocity);
  const ac = ok(s.activeCall);
  const now = input.now.getTime();
  const nowS = now / 1000;
  const ip = input.request.ip ? parseIp(input.request.ip) : null;
  const user = input.user;
  const devices = input.devices;
  return {
    ratWhy: why(s.remoteAccessTool),
    ratSuccess: rat?.success ?? false,
    ratReason: rat?.reason ?? '',
    ratAnomaly: rat?.result?.anomaly ?? false,
    ratConf: rat?.result?.anomalyConfidence ?? 0,
    nbWhy: why(s.newBrowser),
    nbSuccess: nb?.success ?? false,
    nbReason: nb?.reason ?? '',
    nbKnown: nb?.result?.known ?? false,
    nbMismatched: nb?.mismatchedFields ?? [],
    lpWhy: why(s.latestProximity),
    lpSuccess: lp?.success ?? false,
    lpConf: lp?.result?.proximityConfidence ?? 0,
    geoWhy: why(s.geovelocity),
    geoSuccess: geo?.success ?? false,
    geoAnomaly: geo?.result?.anomaly ?? false,
    geoSpeed: geo?.result?.maxSpeedKmh ?? 0,
    acWhy: why(s.activeCall),
    acSuccess: ac?.success ?? false,
    acOnCall: ac?.result?.onCall ?? false,
    userWhy: user ? '' : (input.adminUnavailable?.user ?? 'missing'),
    userStatus: user?.status ?? '',
    failedOverHalf: user ? user.max_attempts > 0 && user.failed_attempts >= user.max_attempts / 2 : false,
    devicesWhy: input.adminUnavailable?.devices ?? '',
    deviceIntegrityFailed: devices.some(
      (d) => d.enrolled && (d.device_integrity === 'failed' || d.device_integrity === 'compromised'),
    ),
    deviceRecentlyMigrated: devices.some(
      (d) => (d.migrated_at ?? 0) > 0 && nowS - (d.migrated_at ?? 0) < 3 * DAY,
    ),
    deviceAppOutdated: devices.some(
      (d) => d.enrolled && (d.type === 'ios' || d.type === 'android') && !(d.version_supported ?? true),
    ),
    velWhy: input.velocity ? '' : (input.featuresUnavailable?.velocity ?? 'missing'),
    accountsPerIp: input.velocity?.accountsPerIp ?? 0,
    ipsPerAccount: input.velocity?.ipsPerAccount ?? 0,
    histWhy: input.history ? '' : (input.featuresUnavailable?.history ?? 'missing'),
    failed1h: input.history?.failedAuthentications1h ?? 0,
    totp24h: input.history?.totpReuses24h ?? 0,
    newDevices1h: input.history?.newDevices1h ?? 0,
    overrideDeny: now < DENY_UNTIL && ip !== null && DENY_CIDRS.some((c) => cidrContains(c, ip)),
    overrideAllow: now < ALLOW_UNTIL && ALLOW_ACCOUNTS.has(input.request.accountId),
    // The runtime lists the shipped policy reads (issue 33); a suite case with them unavailable is
    // decided by the degraded rule and left out of both engines' figures.
    blockedNetwork:
      input.request.ip !== undefined &&
      (input.lists?.contains('blockedNetworks', input.request.ip, now) ?? false),
    vouchedAccount: input.lists?.contains('vouchedAccounts', input.request.accountId, now) ?? false,
  };
}

type Cond = { fact: string; operator: string; value: unknown };
const is = (fact: string, value: unknown): Cond => ({ fact, operator: 'equal', value });
const avail = (prefix: string): Cond => is(`${prefix}Why`, '');
const down = (prefix: string): Cond[] => [
  { fact: `${prefix}Why`, operator: 'notEqual', value: '' },
  { fact: `${prefix}Why`, operator: 'notEqual', value: 'not_applicable' },
];

function jreRules(): { name: string; all: Cond[]; score?: number; verdict?: Verdict }[] {
  return [
    {
      name: 'account-locked',
      all: [
        avail('user'),
        { fact: 'userStatus', operator: 'in', value: ['locked_out', 'disabled', 'archived'] },
      ],
      verdict: 'deny',
    },
    { name: 'account-bypass', all: [avail('user'), is('userStatus', 'bypass')], score: 20 },
    { name: 'failed-attempts-high', all: [avail('user'), is('failedOverHalf', true)], score: 30 },
    {
      name: 'rat-confirmed',
      all: [
        avail('rat'),
        is('ratSuccess', true),
        is('ratAnomaly', true),
        { fact: 'ratConf', operator: 'greaterThanInclusive', value: 0.9 },
      ],
      verdict: 'deny',
    },
    {
      name: 'rat-suspected',
      all: [
        avail('rat'),
        is('ratSuccess', true),
        is('ratAnomaly', true),
        { fact: 'ratConf', operator: 'lessThan', value: 0.9 },
      ],
      score: 50,
    },
    {
      name: 'rat-unscored',
      all: [
        avail('rat'),
        is('ratSuccess', false),
        { fact: 'ratReason', operator: 'in', value: ['insufficient_observations', 'no_user_baseline'] },
      ],
      score: 10,
    },
    // no-telemetry: the browser never observed and the remote-access detector with nothing either
    // (unavailable, or no result): json-rules-engine's `all` takes the `or` as two rules.
    ...[{ fact: 'ratWhy', operator: 'notEqual', value: '' }, is('ratSuccess', false)].map((rat, i) => ({
      name: `no-telemetry-${i}`,
      all: [avail('nb'), is('nbSuccess', false), is('nbReason', 'insufficient_observations'), rat],
      verdict: 'challenge' as const,
    })),
    { name: 'blocked-network', all: [is('blockedNetwork', true)], verdict: 'deny' },
    { name: 'new-browser', all: [avail('nb'), is('nbSuccess', true), is('nbKnown', false)], score: 40 },
    {
      name: 'vouched-account-new-browser',
      all: [
        is('vouchedAccount', true),
        avail('nb'),
        is('nbSuccess', true),
        is('nbKnown', false),
        avail('rat'),
        is('ratSuccess', true),
        is('ratAnomaly', false),
      ],
      score: -40,
    },
    {
      name: 'new-browser-os-changed',
      all: [
        avail('nb'),
        is('nbSuccess', true),
        is('nbKnown', false),
        { fact: 'nbMismatched', operator: 'contains', value: 'browser_os' },
      ],
      score: 10,
    },
    {
      name: 'near-enrolled-phone',
      all: [
        avail('lp'),
        avail('rat'),
        is('lpSuccess', true),
        { fact: 'lpConf', operator: 'greaterThanInclusive', value: 0.8 },
        is('ratAnomaly', false),
      ],
      score: -30,
    },
    {
      name: 'impossible-travel',
      all: [avail('geo'), is('geoSuccess', true), is('geoAnomaly', true)],
      score: 60,
    },
    {
      name: 'impossible-travel-extreme',
      all: [
        avail('geo'),
        is('geoSuccess', true),
        is('geoAnomaly', true),
        { fact: 'geoSpeed', operator: 'greaterThanInclusive', value: 3000 },
      ],
      score: 20,
    },
    { name: 'on-active-call', all: [avail('ac'), is('acSuccess', true), is('acOnCall', true)], score: 45 },
    {
      name: 'device-integrity-failed',
      all: [avail('devices'), is('deviceIntegrityFailed', true)],
      score: 40,
    },
    {
      name: 'device-recently-migrated',
      all: [avail('devices'), is('deviceRecentlyMigrated', true)],
      score: 25,
    },
    { name: 'device-app-outdated', all: [avail('devices'), is('deviceAppOutdated', true)], score: 10 },
    {
      name: 'credential-stuffing',
      all: [avail('vel'), { fact: 'accountsPerIp', operator: 'greaterThanInclusive', value: 20 }],
      verdict: 'challenge',
    },
    {
      name: 'credential-stuffing-heavy',
      all: [avail('vel'), { fact: 'accountsPerIp', operator: 'greaterThanInclusive', value: 100 }],
      verdict: 'deny',
    },
    {
      name: 'password-spraying',
      all: [avail('vel'), { fact: 'ipsPerAccount', operator: 'greaterThanInclusive', value: 10 }],
      score: 30,
    },
    {
      name: 'failures-before-login',
      all: [avail('hist'), { fact: 'failed1h', operator: 'greaterThanInclusive', value: 5 }],
      score: 30,
    },
    {
      name: 'totp-reused',
      all: [avail('hist'), { fact: 'totp24h', operator: 'greaterThan', value: 0 }],
      score: 40,
    },
    {
      name: 'fresh-enrollment-new-browser',
      all: [
        avail('hist'),
        avail('nb'),
        { fact: 'newDevices1h', operator: 'greaterThan', value: 0 },
        is('nbSuccess', true),
        is('nbKnown', false),
      ],
      score: 30,
    },
    {
      name: 'fresh-enrollment-impossible-travel',
      all: [
        avail('hist'),
        avail('geo'),
        { fact: 'newDevices1h', operator: 'greaterThan', value: 0 },
        is('geoSuccess', true),
        is('geoAnomaly', true),
      ],
      score: 30,
    },
    // onUnavailable settings of the shipped policy, as rules.
    { name: 'rat-unavailable', all: down('rat'), score: 40 },
    { name: 'nb-unavailable', all: down('nb'), score: 20 },
    { name: 'geo-unavailable', all: down('geo'), score: 20 },
    { name: 'ac-unavailable', all: down('ac'), score: 10 },
    { name: 'user-unavailable', all: down('user'), score: 20 },
  ];
}

function jreEngine(): Engine {
  const engine = new Engine([], { allowUndefinedFacts: true });
  for (const r of jreRules()) {
    engine.addRule({
      name: r.name,
      conditions: { all: r.all },
      event: { type: r.name, params: { score: r.score ?? 0, verdict: r.verdict ?? '' } },
    });
  }
  return engine;
}

const RANK: Record<string, number> = { '': 0, allow: 1, challenge: 2, deny: 3 };

async function jreEvaluate(engine: Engine, input: PolicyInput): Promise<{ verdict: Verdict; score: number }> {
  const facts = toFacts(input);
  const { events } = await engine.run(facts);
  let score = 0;
  let hard = 0;
  for (const e of events) {
    score += (e.params?.score as number) ?? 0;
    hard = Math.max(hard, RANK[(e.params?.verdict as string) ?? ''] ?? 0);
  }
  let verdict: Verdict;
  if (facts.overrideDeny) verdict = 'deny';
  else if (facts.overrideAllow) verdict = 'allow';
  else if (hard > 0) verdict = (['', 'allow', 'challenge', 'deny'] as const)[hard] as Verdict;
  else verdict = score >= 80 ? 'deny' : score >= 40 ? 'challenge' : 'allow';
  return { verdict, score };
}

async function measureJre(engine: Engine, inputs: PolicyInput[], iterations: number): Promise<EngineFigures> {
  let sink = 0;
  for (let i = 0; i < Math.min(2_000, iterations); i++)
    sink += (await jreEvaluate(engine, inputs[i % inputs.length]!)).score;
  const samples = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const input = inputs[i % inputs.length]!;
    const t0 = process.hrtime.bigint();
    const d = await jreEvaluate(engine, input);
    const t1 = process.hrtime.bigint();
    sink += d.score;
    samples[i] = Number(t1 - t0);
  }
  if (sink === Number.MIN_VALUE) console.log(sink);
  return figures(samples);
}

/** Runs the bench; throws when the two engines disagree on any input. */
export async function runPolicyEvalBench(
  opts: { iterations?: number; jreIterations?: number; runs?: number } = {},
): Promise<PolicyEvalResult> {
  const iterations = opts.iterations ?? 200_000;
  const jreIterations = opts.jreIterations ?? 20_000;
  const runCount = opts.runs ?? 3;
  const policy = await loadPolicy(POLICY);
  // The json-rules-engine rules do not model the policy's outage section (a cap and a rule over
  // how many inputs are down) nor its degraded rule (a floor when a risk-raising input is
  // unavailable): the inputs either decides are left out of both engines' figures.
  const inputs = (await suiteInputs((policy.velocityCounters ?? []).map((c) => c.name))).filter((input) => {
    const d = policy.evaluate(input);
    return d.outage === undefined && d.degraded === undefined;
  });
  const engine = jreEngine();

  for (const input of inputs) {
    const a = policy.evaluate(input);
    const b = await jreEvaluate(engine, input);
    if (a.verdict !== b.verdict || (a.decidedBy === 'score' && a.score !== b.score)) {
      throw new Error(
        `engines disagree on ${input.request.accountId}: riskgate ${a.verdict}/${a.score} (${a.decidedBy}: ${a.matchedRules.map((r) => r.id).join(',')}), json-rules-engine ${b.verdict}/${b.score}`,
      );
    }
  }

  const runs: PolicyEvalResult['runs'] = [];
  for (let r = 0; r < runCount; r++) {
    runs.push({
      riskgate: measureRiskgate(policy, inputs, iterations),
      jsonRulesEngine: await measureJre(engine, inputs, jreIterations),
    });
  }
  const med = (pick: (r: PolicyEvalResult['runs'][number]) => EngineFigures): EngineFigures => ({
    medianNs: median(runs.map((r) => pick(r).medianNs)),
    p99Ns: median(runs.map((r) => pick(r).p99Ns)),
    meanNs: median(runs.map((r) => pick(r).meanNs)),
    samples: pick(runs[0]!).samples,
  });
  const riskgate = med((r) => r.riskgate);
  const jsonRulesEngine = med((r) => r.jsonRulesEngine);
  return {
    policy: { name: policy.name, revision: policy.revision, rules: policy.ruleIds?.length ?? 0 },
    inputs: inputs.length,
    runs,
    riskgate,
    jsonRulesEngine,
    speedup: Math.round((jsonRulesEngine.medianNs / riskgate.medianNs) * 10) / 10,
  };
}

function fmt(ns: number): string {
  return ns >= 1000 ? `${(ns / 1000).toFixed(2)} µs` : `${Math.round(ns)} ns`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      iterations: { type: 'string' },
      'jre-iterations': { type: 'string' },
      runs: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const result = await runPolicyEvalBench({
    iterations: values.iterations ? Number(values.iterations) : undefined,
    jreIterations: values['jre-iterations'] ? Number(values['jre-iterations']) : undefined,
    runs: values.runs ? Number(values.runs) : undefined,
  });
  if (values.json) console.log(JSON.stringify(result, null, 2));
  else {
    const p = result.policy;
    console.log(
      `policy ${p.name} @ ${p.revision}: ${p.rules} rules, ${result.inputs} inputs (the test suite's cases)`,
    );
    result.runs.forEach((r, i) => {
      console.log(
        `run ${i + 1}: riskgate median ${fmt(r.riskgate.medianNs)} p99 ${fmt(r.riskgate.p99Ns)} | ` +
          `json-rules-engine median ${fmt(r.jsonRulesEngine.medianNs)} p99 ${fmt(r.jsonRulesEngine.p99Ns)}`,
      );
    });
    console.log(
      `median of ${result.runs.length} runs: riskgate ${fmt(result.riskgate.medianNs)} (p99 ${fmt(result.riskgate.p99Ns)}), ` +
        `json-rules-engine ${fmt(result.jsonRulesEngine.medianNs)} (p99 ${fmt(result.jsonRulesEngine.p99Ns)}), ` +
        `${result.speedup}x`,
    );
  }
}
