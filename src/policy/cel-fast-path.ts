import type { ASTNode } from '@marcbachmann/cel-js';
import { type Activation, ipInCidr, type ListView, listContains } from './cel-environment.ts';
import { evaluationBudgetSpent } from './evaluation-budget.ts';

/**
 * A rule expression as one plain JavaScript function, for the subset of CEL policies mostly use:
 * field reads of the typed views, literals, comparisons, arithmetic, `&&`, `||`, `!`, `?:`, `in` a
 * list, `exists` and `all` over a list, `size` of a list, and a few pure functions (issue 32: cel-js
 * was about a third of an evaluation, mostly its per-node dispatch and per-call context set-up).
 *
 * The function only ever answers what cel-js would answer on the happy path: every value is checked
 * where cel-js checks it (a variable, a field, an iteration value, a function's result), and each
 * operator does what the overload cel-js resolved for the checked types does. Wherever cel-js could
 * raise an error, or would look at a value the function does not know, the function gives up with
 * {@link FALLBACK} and the caller evaluates the expression with cel-js instead, which then answers
 * or raises its own error. So errors, their absorption by `&&`/`||`/`exists`, and every value
 * outside the subset stay cel-js's, by construction. An expression with any part outside the subset
 * gets no function at all. test/cel-fast-path.test.ts compares both on every rule the repository
 * holds and on generated inputs.
 *
 * The function's source is generated (one function per rule, so V8 sees one shape per property
 * read; closures over a shared tree made every read megamorphic and saved a third as much). Nothing
 * from the policy text reaches the source but JSON string literals, numbers, and names cel-js's
 * checker resolved; other values are passed in as bound constants.
 *
 * This reads cel-js's checked AST (`checkedType`, the macros' expansion in `meta.alternate`), which
 * is not its public API: a cel-js upgrade must pass that test.
 */

/** The function could not answer: evaluate the expression with cel-js. */
export const FALLBACK: unique symbol = Symbol('cel-fast-path-fallback');

export type FastExpression = (act: Activation) => unknown;

/** What cel-js's checker leaves on a type (registry.js `TypeDeclaration`). */
interface CheckedType {
  kind: string;
  name: string;
  valueType?: CheckedType;
  hasDynType: boolean;
  hasPlaceholderType: boolean;
}

interface Node {
  op: string;
  args: unknown;
  checkedType?: CheckedType;
  meta?: { alternate?: Node; macro?: unknown };
}

/** The subset does not cover this expression: no function. */
class NotCovered extends Error {}

function node(x: unknown): Node {
  if (typeof x !== 'object' || x === null || !('op' in x) || !('args' in x)) throw new NotCovered();
  return x as Node;
}

/** The checked type of `n`, if the subset handles values of it. */
function typeOf(n: Node): CheckedType {
  const t = n.checkedType;
  if (t === undefined || t.hasDynType || t.hasPlaceholderType) throw new NotCovered();
  return t;
}

const TYPEOF: Record<string, string> = { bool: 'boolean', string: 'string', double: 'number', int: 'bigint' };

const INT_MAX = 9223372036854775807n;
const INT_MIN = -9223372036854775808n;

/**
 * Functions the generated code calls, by `<receiver type>.<name>(<argument types>)`: pure, without
 * `this`, each the handler cel-js's environment registers for the signature
 * (src/policy/cel-environment.ts, cel-js's functions.js), and the type it returns.
 */
const FUNCTIONS: Record<string, { fn: (...args: never[]) => unknown; returns: string }> = {
  'RuntimeList.contains(string)': {
    fn: (list: ListView, value: string) => listContains(list, value),
    returns: 'bool',
  },
  'string.inCidr(string)': { fn: (ip: string, cidr: string) => ipInCidr(ip, cidr), returns: 'bool' },
  'string.startsWith(string)': { fn: (a: string, b: string) => a.startsWith(b), returns: 'bool' },
  'string.endsWith(string)': { fn: (a: string, b: string) => a.endsWith(b), returns: 'bool' },
  'string.contains(string)': { fn: (a: string, b: string) => a.includes(b), returns: 'bool' },
  'size(list)': { fn: (l: readonly unknown[]) => BigInt(l.length), returns: 'int' },
  'list.size()': { fn: (l: readonly unknown[]) => BigInt(l.length), returns: 'int' },
};

const COMPARISONS: ReadonlySet<string> = new Set(['<', '<=', '>', '>=']);
const ARITHMETIC: ReadonlySet<string> = new Set(['+', '-', '*', '/', '%']);

/** `a op b` of two int constants as cel-js computes it, or undefined where cel-js raises (overflow, zero divisor). */
function foldInt(op: string, a: bigint, b: bigint): bigint | undefined {
  let v: bigint;
  if (op === '/' || op === '%') {
    if (b === 0n) return undefined;
    return op === '/' ? a / b : a % b;
  }
  if (op === '+') v = a + b;
  else if (op === '-') v = a - b;
  else if (op === '*') v = a * b;
  else return undefined;
  return v <= INT_MAX && v >= INT_MIN ? v : undefined;
}

/** An int operand of a double comparison or arithmetic: a constant as the double it exactly is. */
function asDouble(c: Code): string {
  if (c.constant === undefined) return c.js;
  const v = c.constant.value as bigint;
  return BigInt(Number(v)) === v ? literal(Number(v)) : c.js;
}

/** A generated expression: JavaScript source naming a local or a literal, and its value if constant. */
interface Code {
  js: string;
  constant?: { value: unknown };
}

function literal(value: unknown): string {
  switch (typeof value) {
    case 'boolean':
      return String(value);
    case 'string':
      return JSON.stringify(value);
    case 'bigint':
      return `(${value}n)`;
    case 'number':
      return Object.is(value, -0) ? '(-0)' : `(${String(value)})`;
  }
  if (value === null) return 'null';
  throw new NotCovered();
}

/** The source of one function, built node by node into statements that set locals. */
class Generator {
  readonly #ctors: ReadonlyMap<string, new () => object>;
  /** Values the source names as `k<i>` (constructors, functions, constant lists). */
  readonly bound: unknown[] = [];
  locals = 0;
  /** Iteration variables in scope, innermost last: CEL name and JavaScript local. */
  readonly #vars: { name: string; js: string }[] = [];

  constructor(ctors: ReadonlyMap<string, new () => object>) {
    this.#ctors = ctors;
  }

  bind(value: unknown): string {
    this.bound.push(value);
    return `k${this.bound.length - 1}`;
  }

  local(): string {
    return `t${this.locals++}`;
  }

  /**
   * A statement returning FALLBACK unless `v` has type `t` as cel-js's `matchesValueType` would say
   * yes to, or stricter (a `Set` or `Map` where cel-js takes one too).
   */
  check(v: string, t: CheckedType): string {
    switch (t.kind) {
      case 'primitive':
        if (t.name === 'null') return `if (${v} !== null) return F;`;
        if (TYPEOF[t.name] === undefined) throw new NotCovered();
        return `if (typeof ${v} !== "${TYPEOF[t.name]}") return F;`;
      case 'list':
        return `if (${v} === null || ${v} === undefined || ${v}.constructor !== Array) return F;`;
      case 'map':
        return `if (${v} === null || typeof ${v} !== "object" || (${v}.constructor !== Object && ${v}.constructor !== undefined)) return F;`;
      case 'message': {
        const ctor = this.#ctors.get(t.name);
        if (ctor === undefined) throw new NotCovered();
        return `if (${v} === null || ${v} === undefined || ${v}.constructor !== ${this.bind(ctor)}) return F;`;
      }
      default:
        throw new NotCovered();
    }
  }

  gen(n: Node, out: string[]): Code {
    if (n.meta?.alternate !== undefined) return { js: this.#macro(n, out) };
    if (n.meta?.macro !== undefined) throw new NotCovered();
    switch (n.op) {
      case 'value':
        return { js: literal(n.args), constant: { value: n.args } };
      case 'list':
        return this.#list(n, out);
      case 'id':
        return { js: this.#id(n, out) };
      case '.':
        return { js: this.#field(n, out) };
      case '!_':
      case '-_': {
        const arg = node(n.args);
        const t = typeOf(arg).name;
        if (n.op === '!_' ? t !== 'bool' : t !== 'double' && t !== 'int') throw new NotCovered();
        const a = this.gen(arg, out).js;
        const r = this.local();
        out.push(`${r} = ${n.op === '!_' ? '!' : '-'}${a};`);
        return { js: r };
      }
      case '&&':
      case '||':
        return { js: this.#logical(n, out) };
      case '?:':
        return { js: this.#ternary(n, out) };
      case 'in':
        return { js: this.#in(n, out) };
      case 'call':
      case 'rcall':
        return { js: this.#call(n, out) };
      default:
        return this.#binary(n, out);
    }
  }

  /** A list literal: a new array per evaluation as cel-js makes one, or one frozen array of constants. */
  #list(n: Node, out: string[]): Code {
    typeOf(n);
    const items = (n.args as unknown[]).map((x) => this.gen(node(x), out));
    if (items.every((i) => i.constant !== undefined)) {
      const value = Object.freeze(items.map((i) => i.constant!.value));
      return { js: this.bind(value), constant: { value } };
    }
    const r = this.local();
    out.push(`${r} = [${items.map((i) => i.js).join(', ')}];`);
    return { js: r };
  }

  /** A variable: an iteration variable (checked when set), else the activation's, checked. */
  #id(n: Node, out: string[]): string {
    const name = n.args;
    if (typeof name !== 'string') throw new NotCovered();
    for (let i = this.#vars.length - 1; i >= 0; i--)
      if (this.#vars[i]!.name === name) return this.#vars[i]!.js;
    const t = typeOf(n);
    const r = this.local();
    out.push(`${r} = act[${JSON.stringify(name)}];`, this.check(r, t));
    return r;
  }

  /** `x.f` on a message (its class checked where it was read) or a map (`velocity.x`, `lists.x`). */
  #field(n: Node, out: string[]): string {
    const [objNode, key] = n.args as [unknown, unknown];
    if (typeof key !== 'string') throw new NotCovered();
    const obj = node(objNode);
    const kind = typeOf(obj).kind;
    const t = typeOf(n);
    const o = this.gen(obj, out).js;
    const k = JSON.stringify(key);
    const r = this.local();
    // A map was checked to be a plain object where it was read; cel-js reads own keys only.
    if (kind === 'map') out.push(`if (!hasOwn(${o}, ${k})) return F;`);
    else if (kind !== 'message') throw new NotCovered();
    out.push(`${r} = ${o}[${k}];`, this.check(r, t));
    return r;
  }

  /** `&&` and `||`: both answered booleans, or fall back (an error either side may be absorbed). */
  #logical(n: Node, out: string[]): string {
    const [ln, rn] = (n.args as unknown[]).map(node) as [Node, Node];
    if (typeOf(ln).name !== 'bool' || typeOf(rn).name !== 'bool') throw new NotCovered();
    const decides = n.op === '||';
    const a = this.gen(ln, out).js;
    const r = this.local();
    const inner: string[] = [];
    const b = this.gen(rn, inner).js;
    out.push(
      `if (${a} === ${decides}) ${r} = ${decides};`,
      `else if (${a} !== ${!decides}) return F;`,
      'else {',
      ...inner,
      `if (typeof ${b} !== "boolean") return F;`,
      `${r} = ${b};`,
      '}',
    );
    return r;
  }

  #ternary(n: Node, out: string[]): string {
    typeOf(n);
    const [cn, ln, rn] = (n.args as unknown[]).map(node) as [Node, Node, Node];
    if (typeOf(cn).name !== 'bool') throw new NotCovered();
    const c = this.gen(cn, out).js;
    const left: string[] = [];
    const right: string[] = [];
    const l = this.gen(ln, left).js;
    const rr = this.gen(rn, right).js;
    const r = this.local();
    out.push(
      `if (${c} === true) {`,
      ...left,
      `${r} = ${l};`,
      `} else if (${c} === false) {`,
      ...right,
      `${r} = ${rr};`,
      '} else return F;',
    );
    return r;
  }

  /** `x in list`: cel-js's `listIncludes` (`isEqual` per element) for a string, bool, int or double `x`. */
  #in(n: Node, out: string[]): string {
    const [vn, ln] = (n.args as unknown[]).map(node) as [Node, Node];
    const vt = typeOf(vn).name;
    if (typeOf(ln).kind !== 'list') throw new NotCovered();
    const numeric = vt === 'double' || vt === 'int';
    if (!numeric && vt !== 'string' && vt !== 'bool') throw new NotCovered();
    const x = this.gen(vn, out).js;
    const list = this.gen(ln, out);
    const r = this.local();
    if (!numeric && list.constant !== undefined) {
      // Same answers as `===` per element for a string or a bool (a Set compares by SameValueZero).
      out.push(`${r} = ${this.bind(new Set(list.constant.value as unknown[]))}.has(${x});`);
      return r;
    }
    const other = vt === 'double' ? 'bigint' : 'number';
    const y = this.local();
    // `isEqual`: an int and a double are equal when their values are.
    const numericEqual = numeric ? ` || (typeof ${y} === "${other}" && ${x} == ${y})` : '';
    out.push(
      `${r} = false;`,
      `for (let i = 0; i < ${list.js}.length; i++) {`,
      `${y} = ${list.js}[i];`,
      `if (${y} === ${x}${numericEqual}) { ${r} = true; break; }`,
      '}',
    );
    return r;
  }

  #call(n: Node, out: string[]): string {
    const args = n.args as unknown[];
    const receiver = n.op === 'rcall' ? node(args[1]) : undefined;
    const argNodes = (args[n.op === 'rcall' ? 2 : 1] as unknown[]).map(node);
    const sig = (t: CheckedType) => (t.kind === 'list' ? 'list' : t.name);
    const types = argNodes.map((a) => sig(typeOf(a))).join(', ');
    const key =
      receiver === undefined ? `${args[0]}(${types})` : `${sig(typeOf(receiver))}.${args[0]}(${types})`;
    const f = FUNCTIONS[key];
    if (f === undefined || typeOf(n).name !== f.returns) throw new NotCovered();
    const parts = [...(receiver === undefined ? [] : [receiver]), ...argNodes].map(
      (a) => this.gen(a, out).js,
    );
    const r = this.local();
    out.push(`${r} = ${this.bind(f.fn)}(${parts.join(', ')});`, this.check(r, typeOf(n)));
    return r;
  }

  /** `list.exists(x, p)` and `list.all(x, p)`, as cel-js expands them (a quantifier comprehension). */
  #macro(n: Node, out: string[]): string {
    const alt = n.meta!.alternate!;
    const name = n.op === 'rcall' ? (n.args as unknown[])[0] : undefined;
    const c = alt.args as Record<string, unknown>;
    if (alt.op !== 'comprehension' || c.kind !== 'quantifier' || c.errorsAreFatal !== false)
      throw new NotCovered();
    if (name !== 'exists' && name !== 'all') throw new NotCovered();
    const init = node(c.init);
    const step = node(c.step);
    const [pred, yes, no] = (step.args as unknown[]).map(node) as [Node, Node, Node];
    // The expansion cel-js 8 makes: init false (exists) or true (all), step `p ? true : false`.
    if (
      init.op !== 'value' ||
      init.args !== (name === 'all') ||
      step.op !== '?:' ||
      yes.op !== 'value' ||
      yes.args !== true ||
      no.op !== 'value' ||
      no.args !== false ||
      typeof c.iterVarName !== 'string' ||
      typeOf(pred).name !== 'bool'
    )
      throw new NotCovered();
    const iterable = node(c.iterable);
    const listType = typeOf(iterable);
    if (listType.kind !== 'list' || listType.valueType === undefined) throw new NotCovered();
    const list = this.gen(iterable, out).js;
    const item = this.local();
    this.#vars.push({ name: c.iterVarName, js: item });
    const body: string[] = [];
    const p = this.gen(pred, body).js;
    this.#vars.pop();
    // exists stops at the first true, all at the first false.
    const stop = name === 'exists';
    const r = this.local();
    out.push(
      `${r} = ${!stop};`,
      `for (let i = 0; i < ${list}.length; i++) {`,
      // cel-js's comprehension checks the evaluation budget before each element (budgetComprehensions).
      'if (budgetSpent()) return F;',
      `${item} = ${list}[i];`,
      this.check(item, listType.valueType),
      ...body,
      `if (${p} === ${stop}) { ${r} = ${stop}; break; }`,
      `if (${p} !== ${!stop}) return F;`,
      '}',
    );
    return r;
  }

  /** The operator cel-js resolves for the checked types, for the primitive types the subset covers. */
  #binary(n: Node, out: string[]): Code {
    typeOf(n);
    const args = n.args;
    if (!Array.isArray(args) || args.length !== 2) throw new NotCovered();
    const [ln, rn] = args.map(node) as [Node, Node];
    const lt = typeOf(ln);
    const rt = typeOf(rn);
    if (lt.kind !== 'primitive' || rt.kind !== 'primitive') throw new NotCovered();
    const op = n.op;
    const l = lt.name;
    const rtn = rt.name;
    const numeric = (t: string) => t === 'double' || t === 'int';
    let expr: (a: string, b: string) => string;
    let post = '';
    if (COMPARISONS.has(op)) {
      // cel-js: `a < b` for bool, string, int and double pairs (int and double mixed too).
      if (!((l === rtn && (l === 'bool' || l === 'string')) || (numeric(l) && numeric(rtn))))
        throw new NotCovered();
      expr = (a, b) => `${a} ${op} ${b}`;
    } else if (op === '==' || op === '!=') {
      // Only the same type on both sides: cel-js's checker refuses `double == int` and friends.
      if (l !== rtn || (TYPEOF[l] === undefined && l !== 'null')) throw new NotCovered();
      expr = (a, b) => `${a} ${op}= ${b}`;
    } else if (ARITHMETIC.has(op) && (l === 'double' || rtn === 'double')) {
      // double op double (cel-js), double op int and int op double (cel-environment.ts: as doubles).
      if (!numeric(l) || !numeric(rtn) || op === '%') throw new NotCovered();
      const num = (v: string, t: string) => (t === 'int' ? `Number(${v})` : v);
      expr = (a, b) => `${num(a, l)} ${op} ${num(b, rtn)}`;
    } else if (ARITHMETIC.has(op) && l === 'int' && rtn === 'int') {
      expr = (a, b) => `${a} ${op} ${b}`;
      // cel-js raises on overflow of + - * and on a zero divisor of / and %.
      post = op === '/' || op === '%' ? 'zero' : 'overflow';
    } else if (op === '+' && l === 'string' && rtn === 'string') {
      expr = (a, b) => `${a} + ${b}`;
    } else throw new NotCovered();
    // Both sides are evaluated, left first, as cel-js does.
    const left = this.gen(ln, out);
    const right = this.gen(rn, out);
    if (post !== '' && left.constant !== undefined && right.constant !== undefined) {
      const folded = foldInt(op, left.constant.value as bigint, right.constant.value as bigint);
      if (folded !== undefined) return { js: literal(folded), constant: { value: folded } };
    }
    // An int constant against a double compares as the double it is exactly, if it is one (V8
    // compares a number with a bigint far slower).
    const a = l === 'int' && rtn === 'double' ? asDouble(left) : left.js;
    const b = rtn === 'int' && l === 'double' ? asDouble(right) : right.js;
    const r = this.local();
    if (post === 'zero') out.push(`if (${b} === 0n) return F;`);
    out.push(`${r} = ${expr(a, b)};`);
    if (post === 'overflow')
      out.push(`if (${r} > ${literal(INT_MAX)} || ${r} < ${literal(INT_MIN)}) return F;`);
    return { js: r };
  }
}

/**
 * The function of a checked expression, or undefined when any part of it is outside the subset.
 * `ctors`: the class of each message type (`messageConstructors`). What a function it calls throws
 * becomes {@link FALLBACK} too.
 */
export function compileFastPath(
  ast: ASTNode,
  ctors: ReadonlyMap<string, new () => object>,
): FastExpression | undefined {
  const g = new Generator(ctors);
  const body: string[] = [];
  let result: string;
  try {
    result = g.gen(node(ast), body).js;
  } catch (e) {
    if (e instanceof NotCovered) return undefined;
    throw e;
  }
  const locals = Array.from({ length: g.locals }, (_, i) => `t${i}`);
  const source = [
    ...g.bound.map((_, i) => `const k${i} = K[${i}];`),
    'return function fastPath(act) {',
    locals.length > 0 ? `let ${locals.join(', ')};` : '',
    'try {',
    ...body,
    `return ${result};`,
    '} catch { return F; }',
    '};',
  ].join('\n');
  let make: (...args: unknown[]) => FastExpression;
  try {
    make = new Function('F', 'K', 'hasOwn', 'budgetSpent', source) as typeof make;
  } catch (e) {
    // Node run with --disallow-code-generation-from-strings: cel-js evaluates every rule.
    if (e instanceof EvalError) return undefined;
    throw e;
  }
  return make(FALLBACK, g.bound, Object.hasOwn, evaluationBudgetSpent);
}
