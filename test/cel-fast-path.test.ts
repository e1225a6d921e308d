import { readdirSync, readFileSync } from 'node:fs';
import type { ParseResult } from '@marcbachmann/cel-js';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { mulberry32 } from '../bench/seeded-random.ts';
import {
  type Activation,
  createActivation,
  DeviceView,
  ListView,
  messageConstructors,
  policyEnvironment,
} from '../src/policy/cel-environment.ts';
import { compileFastPath, FALLBACK } from '../src/policy/cel-fast-path.ts';
import { budgetComprehensions } from '../src/policy/evaluation-budget.ts';
import { celBindings, INPUT_ROWS } from '../src/policy/inputs/input-table.ts';
import { compilePolicy } from '../src/policy/policy-compiler.ts';
import { buildInput } from '../src/policy/policy-test-runner.ts';
import { policyTestFileSchema } from '../src/policy/policy-test-schema.ts';
import type { PolicyInput } from '../src/policy/policy-types.ts';

/**
 * The fast path against cel-js: on every rule expression the repository holds (policies/,
 * bench/*.yaml, the test fixtures) and on expressions aimed at the edges of the subset, over
 * generated activations with missing fields, wrong types, nulls and boundary numbers. Wherever the
 * fast path answers, cel-js must answer the same value; wherever cel-js raises an error, the fast
 * path must fall back (so the error and its kind stay cel-js's).
 */

const root = new URL('..', import.meta.url).pathname;
const bindings = celBindings(INPUT_ROWS);
const env = policyEnvironment(bindings);
const ctors = messageConstructors(bindings);

const EDGE_EXPRESSIONS = [
  'user.failed_attempts + 1 > user.max_attempts',
  'user.failed_attempts - 1.5 < 0 || user.failed_attempts * 2 >= 3',
  'user.max_attempts / 0 > 1.0',
  '1 / 0 == 0',
  '7 % 0 == 0',
  '9223372036854775807 + 1 > 0',
  '-9223372036854775807 - 2 < 0',
  '3037000500 * 3037000500 > 0',
  '7 / 2 == 3 && 7 % 2 == 1 && -7 / 2 == -3',
  '0.0 / 0.0 == 0.0 / 0.0',
  '-0.0 == 0.0',
  '-user.failed_attempts < 0.0',
  'user.status < "m" && user.status >= ""',
  'true > false && !(false > true)',
  'user.status + "x" == "lockedx"',
  'user.failed_attempts == 3.0 || user.failed_attempts != 2.0',
  'user.failed_attempts > 2 && 2 < user.failed_attempts && user.failed_attempts <= 9223372036854775807',
  'user.failed_attempts in [1.0, 2.0, 3.0]',
  'user.failed_attempts in [user.max_attempts, 0.0]',
  '2 in [1, 2, 3]',
  'user.service_defined_username in [true]',
  'user.status in user.allowed_factors',
  '"approve" in user.allowed_factors',
  'user.status in [user.username, "x"]',
  'user.available ? user.failed_attempts > 1.0 : signals.newBrowser.known',
  'signals.newBrowser.success ? true : false',
  'size(user.allowed_factors) > 1 && user.allowed_factors.size() < 3',
  'size(devices) == 0 || devices.all(d, d.enrolled)',
  'devices.exists(d, d.capabilities.exists(c, c == "push"))',
  'devices.exists(d, devices.all(e, e.enrolled_at <= d.enrolled_at))',
  'devices.exists(d, d.device_id == request.deviceId) || devices.all(d, d.type != "ios")',
  'request.ip.inCidr("10.0.0.0/8") || request.ip.inCidr("2001:db8::/32")',
  'request.accountId.startsWith("a") && request.accountId.endsWith("e") || request.userAgent.contains("bot")',
  'lists.blockedNetworks.contains(request.ip) || lists.vouchedAccounts.contains(request.accountId)',
  'velocity.accountsPerIp >= 20.0 || velocity.ipsPerAccount > 1',
  'history.available && history.failedAuthentications1h >= 5',
  'signals.remoteAccessTool.anomalyConfidence >= 0.9 || !signals.remoteAccessTool.available',
  'signals.geolocation.lat > 45.5 && signals.geolocation.country == "CH"',
  'nowSeconds - user.created_at > 86400 * 365',
  'user.failed_attempts < 9007199254740993 && user.failed_attempts >= -9007199254740993',
  'user.failed_attempts * 9007199254740993 > 0.0 || 9007199254740993 - user.max_attempts <= 2.0',
  '9223372036854775807 * 2 > 0 || 4611686018427387904 * 2 > 0',
  'user.status == "locked_out" == signals.activeCall.onCall',
];

/** `when:` expressions written in the repository's test files (fixtures); the ones cel-js accepts are kept. */
function fixtureExpressions(): string[] {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(`${root}${dir}`, { withFileTypes: true })) {
      if (e.isDirectory()) walk(`${dir}/${e.name}`);
      else if (e.name.endsWith('.ts')) files.push(`${root}${dir}/${e.name}`);
    }
  };
  walk('test');
  walk('src');
  const found = new Set<string>();
  for (const f of files) {
    const text = readFileSync(f, 'utf8');
    for (const m of text.matchAll(/when: '([^'\n]+)'/g)) found.add(m[1]!);
    for (const m of text.matchAll(/when: "([^"\n]+)"/g)) found.add(m[1]!);
    for (const m of text.matchAll(/when: ([^'"{>\s][^\n]*?)(?:\\n|$)/gm)) found.add(m[1]!.trim());
  }
  return [...found];
}

function policyFiles(): string[] {
  return [
    ...readdirSync(`${root}policies`)
      .filter((f) => f.endsWith('.yaml') && !f.endsWith('.test.yaml'))
      .map((f) => `policies/${f}`),
    ...readdirSync(`${root}bench`)
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => `bench/${f}`),
  ];
}

function policyExpressions(): string[] {
  const out: string[] = [];
  for (const f of policyFiles()) {
    const doc = parseYaml(readFileSync(`${root}${f}`, 'utf8')) as { rules?: { when: string }[] };
    for (const r of doc.rules ?? []) out.push(r.when);
  }
  return out;
}

/** As the compiler prepares a rule: parsed, checked, comprehensions budgeted; undefined if cel-js refuses it. */
function prepare(expr: string): ParseResult | undefined {
  try {
    const fn = env.parse(expr);
    const checked = fn.check();
    if (!checked.valid || checked.type !== 'bool') return undefined;
    budgetComprehensions(fn);
    return fn;
  } catch {
    return undefined;
  }
}

const NUMBERS = [
  0,
  -0,
  1,
  2,
  3,
  0.5,
  0.8,
  0.9,
  5,
  20,
  100,
  3000,
  -1,
  1e308,
  2 ** 53 + 2,
  Number.NaN,
  Infinity,
];
const STRINGS = [
  '',
  'locked_out',
  'bypass',
  'approve',
  'insufficient_observations',
  'browser_os',
  'ios',
  'x',
];
const IPS = ['10.1.2.3', '198.18.0.1', '2001:db8::1', 'not-an-ip', ''];
const WRONG = [undefined, null, '1', 1, 1n, true, {}, [], new Set(['approve']), new Map()];

function pick<T>(rand: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rand() * xs.length)]!;
}

/** A value for a field whose zero value is `zero`: mostly of its type, sometimes not (`wrong` of the time). */
function valueLike(rand: () => number, zero: unknown, key: string, wrong: number): unknown {
  if (rand() < wrong) return pick(rand, WRONG);
  switch (typeof zero) {
    case 'boolean':
      return rand() < 0.5;
    case 'number':
      return pick(rand, NUMBERS);
    case 'string':
      return key === 'ip' ? pick(rand, IPS) : pick(rand, STRINGS);
  }
  if (Array.isArray(zero)) return Array.from({ length: Math.floor(rand() * 3) }, () => pick(rand, STRINGS));
  return zero;
}

function fillView(rand: () => number, view: object, wrong: number): void {
  const template = new (view.constructor as new () => object)() as Record<string, unknown>;
  for (const key of Object.keys(template)) {
    if (key === 'context') continue;
    (view as Record<string, unknown>)[key] = valueLike(rand, template[key], key, wrong);
  }
}

const LOOKUP = {
  contains: (name: string, value: string) =>
    value === '10.1.2.3' || (name === 'vouchedAccounts' && value === 'x'),
};

function activation(seed: number): Activation {
  const rand = mulberry32(seed);
  const act = createActivation(bindings);
  // A quarter of the activations are well typed throughout; the others carry wrong values.
  const wrong = seed % 4 === 0 ? 0 : 0.08;
  for (const view of Object.values(act.signals)) fillView(rand, view, wrong);
  fillView(rand, act.user, wrong);
  fillView(rand, act.request, wrong);
  fillView(rand, act.history, wrong);
  act.nowSeconds = pick(rand, NUMBERS);
  act.velocity =
    rand() < 0.8 ? { accountsPerIp: pick(rand, NUMBERS), ipsPerAccount: pick(rand, NUMBERS) } : {};
  if (rand() < wrong) act.velocity = { accountsPerIp: '20' as unknown as number };
  const devices: unknown[] = Array.from({ length: Math.floor(rand() * 4) }, () => {
    const d = new DeviceView();
    fillView(rand, d, wrong);
    return d;
  });
  if (rand() < wrong * 2) devices.push(pick(rand, [null, { enrolled: true }, 'd']));
  act.devices = devices as DeviceView[];
  for (const name of ['blockedNetworks', 'vouchedAccounts']) {
    const list = new ListView(name);
    list.lookup = LOOKUP;
    if (rand() >= wrong) act.lists[name] = list;
  }
  if (rand() < wrong) {
    const variable = pick(rand, ['signals', 'user', 'request', 'devices', 'velocity', 'lists', 'nowSeconds']);
    act[variable] = pick(rand, WRONG);
  }
  return act;
}

type Outcome = { value: unknown } | { error: string };

function celOutcome(fn: ParseResult, act: Activation): Outcome {
  try {
    return { value: fn(act) };
  } catch (e) {
    return { error: (e as Error).name };
  }
}

const ACTIVATIONS = Array.from({ length: 600 }, (_, i) => activation(i + 1));

function compare(expr: string): { answered: number; fellBack: number } {
  const fn = prepare(expr);
  if (fn === undefined) return { answered: 0, fellBack: 0 };
  const fast = compileFastPath(fn.ast, ctors);
  if (fast === undefined) return { answered: 0, fellBack: 0 };
  let answered = 0;
  let fellBack = 0;
  for (const act of ACTIVATIONS) {
    const cel = celOutcome(fn, act);
    const got = fast(act);
    if (got === FALLBACK) {
      fellBack++;
      continue;
    }
    answered++;
    expect({ expr, outcome: cel }).toEqual({ expr, outcome: { value: got } });
  }
  return { answered, fellBack };
}

describe('the CEL fast path', () => {
  it('covers every rule of the shipped and bench policies', () => {
    const expressions = policyExpressions();
    expect(expressions.length).toBeGreaterThan(30);
    const uncovered = expressions.filter((e) => compileFastPath(prepare(e)!.ast, ctors) === undefined);
    expect(uncovered).toEqual([]);
  });

  it('answers what cel-js answers on the policies’ rules, and falls back wherever cel-js fails', () => {
    let answered = 0;
    for (const e of policyExpressions()) answered += compare(e).answered;
    expect(answered).toBeGreaterThan(ACTIVATIONS.length * 10);
  });

  it('answers what cel-js answers on the test fixtures’ rules', () => {
    const expressions = fixtureExpressions().filter((e) => prepare(e) !== undefined);
    expect(expressions.length).toBeGreaterThan(40);
    let answered = 0;
    for (const e of expressions) answered += compare(e).answered;
    expect(answered).toBeGreaterThan(ACTIVATIONS.length * 10);
  });

  it('answers what cel-js answers at the edges: overflow, division, NaN, mixed numbers, nesting', () => {
    for (const e of EDGE_EXPRESSIONS) {
      expect(prepare(e), e).toBeDefined();
      expect(compileFastPath(prepare(e)!.ast, ctors), e).toBeDefined();
      const { answered, fellBack } = compare(e);
      expect(answered + fellBack, e).toBe(ACTIVATIONS.length);
    }
  });

  it('falls back on every activation where cel-js raises an error (integer overflow, zero divisor)', () => {
    for (const e of [
      '9223372036854775807 + 1 > 0',
      '1 / 0 == 0',
      '7 % 0 == 0',
      '3037000500 * 3037000500 > 0',
    ]) {
      const fn = prepare(e)!;
      expect(() => fn(ACTIVATIONS[0]!), e).toThrow();
      expect(compileFastPath(fn.ast, ctors)!(ACTIVATIONS[0]!), e).toBe(FALLBACK);
    }
  });

  it('answers without cel-js on well-typed activations', () => {
    const wellTyped = ACTIVATIONS.filter((_, i) => (i + 1) % 4 === 0);
    for (const e of [
      'signals.newBrowser.success && !signals.newBrowser.known',
      'user.status in ["a", "b"]',
    ]) {
      const fast = compileFastPath(prepare(e)!.ast, ctors)!;
      for (const act of wellTyped) expect(fast(act)).not.toBe(FALLBACK);
    }
  });

  it('leaves expressions outside the subset to cel-js', () => {
    for (const e of [
      'request.context.amount > 1000',
      'request.userAgent.matches("bot")',
      'now > timestamp("2026-01-01T00:00:00Z")',
      'has(request.context.x)',
      'size(request.ip) > 3',
      'devices.exists_one(d, d.enrolled)',
      'devices.map(d, d.device_id).size() > 0',
      'user.allowed_factors[0] == "approve"',
    ]) {
      const fn = prepare(e);
      expect(fn, e).toBeDefined();
      expect(compileFastPath(fn!.ast, ctors), e).toBeUndefined();
    }
  });
});

describe('a policy with and without the fast path', () => {
  const suite = policyTestFileSchema.parse(
    parseYaml(readFileSync(`${root}policies/login.test.yaml`, 'utf8')),
  );

  function inputsFor(counters: readonly string[]): PolicyInput[] {
    return suite.cases.map((c) => buildInput(suite.defaults, c.given, suite.now, counters));
  }

  it.each(policyFiles())(
    '%s decides the same on the shipped suite’s inputs: verdict, score, reasons, skips',
    (f) => {
      const text = readFileSync(`${root}${f}`, 'utf8');
      const now = new Date(suite.now);
      const fast = compilePolicy(f, text, { now, fastPath: true }).policy!;
      const cel = compilePolicy(f, text, { now, fastPath: false }).policy!;
      const counters = (fast.velocityCounters ?? []).map((c) => c.name);
      for (const input of inputsFor(counters)) {
        expect(fast.evaluate(input, { budgetMs: Infinity })).toEqual(
          cel.evaluate(input, { budgetMs: Infinity }),
        );
      }
    },
  );

  it('reports a rule’s evaluation error the same way (cel-js raises it in both)', () => {
    const text = `apiVersion: riskgate/v1\nkind: Policy\nname: t\nthresholds: { challenge: 40, deny: 80 }\nrules:\n  - { id: r, description: d, when: 'size(user.allowed_factors) / (size(user.allowed_factors) - size(user.allowed_factors)) >= 0', score: 50 }\n`;
    const now = new Date(suite.now);
    const compiled = compilePolicy('t.yaml', text, { now });
    expect(compiled.issues.filter((i) => i.severity === 'error')).toEqual([]);
    const fast = compiled.policy!;
    const cel = compilePolicy('t.yaml', text, { now, fastPath: false }).policy!;
    for (const input of inputsFor([])) {
      const a = fast.evaluate(input);
      expect(a).toEqual(cel.evaluate(input));
    }
    const errored = inputsFor([])
      .map((i) => fast.evaluate(i))
      .filter((d) => d.matchedRules.some((m) => m.error));
    expect(errored.length).toBeGreaterThan(0);
  });
});
