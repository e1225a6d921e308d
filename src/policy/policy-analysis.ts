import type { ASTNode } from '@marcbachmann/cel-js';
import type { CelBinding } from './cel-environment.ts';
import { POLICY_SIGNAL_NAMES, type PolicySignalName } from './inputs/input-values.ts';

/**
 * Static analysis of one compiled expression: which inputs it reads (so the decision service
 * fetches only those), and which it handles the unavailability of itself by reading
 * `<input>.available` (`signals.<name>.available`, `user.available`, `history.available`).
 */
export interface ExpressionRefs {
  /** The inputs (rows of the input table) the expression reads, by name. */
  inputs: Set<string>;
  /** Inputs whose `.available` the expression reads: it is evaluated even when they are unavailable. */
  aware: Set<string>;
  /** The counters it names (`velocity.<name>`). */
  velocityNames: Set<string>;
  /** The lists it names (`lists.<name>`). */
  listNames: Set<string>;
  /**
   * The fields of each signal's view it reads (`signals.<name>.<field>`), by input name:
   * {@link EVERY_FIELD} when it reads the view otherwise (as a whole value, by a computed index).
   */
  signalFields: Map<string, Set<string>>;
}

/** In `signalFields`: the whole view may be read. */
export const EVERY_FIELD = '*';

const SIGNAL_NAME_SET: ReadonlySet<string> = new Set(POLICY_SIGNAL_NAMES);

function isNode(x: unknown): x is ASTNode {
  return typeof x === 'object' && x !== null && 'op' in x && 'args' in x;
}

function isId(n: ASTNode, name: string): boolean {
  return n.op === 'id' && n.args === name;
}

/** The signal named by `signals.<name>` or `signals["<name>"]`, if `n` is one. */
function signalOf(n: ASTNode): PolicySignalName | undefined {
  if ((n.op === '.' || n.op === '.?') && isNode(n.args[0]) && isId(n.args[0], 'signals')) {
    const f = n.args[1];
    return SIGNAL_NAME_SET.has(f) ? (f as PolicySignalName) : undefined;
  }
  if ((n.op === '[]' || n.op === '[?]') && isNode(n.args[0]) && isId(n.args[0], 'signals')) {
    const idx = n.args[1];
    if (isNode(idx) && idx.op === 'value' && typeof idx.args === 'string' && SIGNAL_NAME_SET.has(idx.args)) {
      return idx.args as PolicySignalName;
    }
  }
  return undefined;
}

/** An input of the table by its CEL binding: the signals by field, the others by variable. */
interface InputLookup {
  byVariable: ReadonlyMap<string, { name: string; availability: boolean }>;
  signals: ReadonlyMap<string, string>;
}

const lookups = new WeakMap<readonly { name: string; cel: CelBinding }[], InputLookup>();

function lookupOf(table: readonly { name: string; cel: CelBinding }[]): InputLookup {
  let known = lookups.get(table);
  if (known === undefined) {
    const byVariable = new Map<string, { name: string; availability: boolean }>();
    const signals = new Map<string, string>();
    for (const row of table) {
      if (row.cel.field === undefined)
        byVariable.set(row.cel.variable, { name: row.name, availability: row.cel.availability });
      else if (row.cel.variable === 'signals') signals.set(row.cel.field, row.name);
    }
    known = { byVariable, signals };
    lookups.set(table, known);
  }
  return known;
}

/** What `ast` reads of the inputs of `table` (rows: `{ name, cel }`). */
export function analyzeExpression(
  ast: ASTNode,
  table: readonly { name: string; cel: CelBinding }[],
): ExpressionRefs {
  const { byVariable, signals } = lookupOf(table);
  const refs: ExpressionRefs = {
    inputs: new Set(),
    aware: new Set(),
    velocityNames: new Set(),
    listNames: new Set(),
    signalFields: new Map(),
  };
  const readField = (name: string, field: string) => {
    let fields = refs.signalFields.get(name);
    if (fields === undefined) {
      fields = new Set();
      refs.signalFields.set(name, fields);
    }
    fields.add(field);
  };
  const visit = (x: unknown): void => {
    if (Array.isArray(x)) {
      for (const y of x) visit(y);
      return;
    }
    if (!isNode(x)) return;
    const n = x;
    const sig = signalOf(n);
    if (sig) {
      // Reached other than by one of its fields (below): any of them may be read.
      const name = signals.get(sig);
      if (name !== undefined) {
        refs.inputs.add(name);
        readField(name, EVERY_FIELD);
      }
      return;
    }
    if (n.op === '.' || n.op === '.?') {
      const [obj, field] = n.args;
      if (isNode(obj) && field === 'available') {
        const inner = signalOf(obj);
        const named =
          inner !== undefined ? signals.get(inner) : obj.op === 'id' ? byVariable.get(obj.args) : undefined;
        const name =
          typeof named === 'string' ? named : named?.availability === true ? named.name : undefined;
        if (name !== undefined) refs.aware.add(name);
      }
      if (isNode(obj) && isId(obj, 'velocity') && typeof field === 'string') refs.velocityNames.add(field);
      if (isNode(obj) && isId(obj, 'lists') && typeof field === 'string') refs.listNames.add(field);
      const name = isNode(obj) && typeof field === 'string' ? signalOf(obj) : undefined;
      const input = name === undefined ? undefined : signals.get(name);
      if (input !== undefined) {
        refs.inputs.add(input);
        readField(input, field);
        return;
      }
      visit(obj);
      return;
    }
    if ((n.op === '[]' || n.op === '[?]') && isNode(n.args[0])) {
      const idx = n.args[1];
      const named = isNode(idx) && idx.op === 'value' && typeof idx.args === 'string' ? idx.args : undefined;
      if (named !== undefined && isId(n.args[0], 'velocity')) refs.velocityNames.add(named);
      if (named !== undefined && isId(n.args[0], 'lists')) refs.listNames.add(named);
    }
    if (n.op === 'id') {
      // `signals` as a whole value: every signal may be read.
      if (n.args === 'signals') for (const name of signals.values()) refs.inputs.add(name);
      else {
        const row = byVariable.get(n.args);
        if (row !== undefined) refs.inputs.add(row.name);
      }
      return;
    }
    if (n.op === 'value') return;
    visit(n.args);
  };
  visit(ast);
  return refs;
}

/** A leading conjunct `signals.<name>.<bool field>` (or its negation) the evaluator checks in JS. */
export interface RuleGuard {
  signal: PolicySignalName;
  field: string;
  expect: boolean;
}

/**
 * Guards of a `when`: the top-level `&&` conjuncts that read one boolean field of a signal. When a
 * guard fails, the expression is false whatever the rest says (CEL's `&&` is false if either side
 * is false, errors included), so the evaluator skips the CEL call: a plain property read instead.
 */
export function extractGuards(
  ast: ASTNode,
  boolFields: (signal: PolicySignalName) => ReadonlySet<string>,
): RuleGuard[] {
  const conjuncts: ASTNode[] = [];
  const flatten = (n: ASTNode): void => {
    if (n.op === '&&') {
      for (const a of n.args) if (isNode(a)) flatten(a);
    } else conjuncts.push(n);
  };
  flatten(ast);
  const guards: RuleGuard[] = [];
  for (const c of conjuncts) {
    let n = c;
    let expect = true;
    if (n.op === '!_' && isNode(n.args)) {
      n = n.args;
      expect = false;
    }
    if (n.op !== '.' || !isNode(n.args[0])) continue;
    const signal = signalOf(n.args[0]);
    const field = n.args[1];
    if (signal && boolFields(signal).has(field)) guards.push({ signal, field, expect });
  }
  return guards;
}
