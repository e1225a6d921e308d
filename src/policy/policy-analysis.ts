import type { ASTNode } from '@marcbachmann/cel-js';
import { POLICY_SIGNAL_NAMES, type PolicySignalName } from './policy-types.ts';

/**
 * Static analysis of one compiled expression: which signals and Admin reads it references (so the
 * decision service fetches only those), and which signals it handles the unavailability of itself
 * by reading `signals.<name>.available`.
 */
export interface ExpressionRefs {
  signals: Set<PolicySignalName>;
  /** Signals whose `.available` the expression reads: it is evaluated even when they are unavailable. */
  availabilityAware: Set<PolicySignalName>;
  user: boolean;
  /** Reads `user.available`. */
  userAware: boolean;
  devices: boolean;
  /** Reads `velocity`; `velocityNames` are the counters it names (`velocity.<name>`). */
  velocity: boolean;
  velocityNames: Set<string>;
  /** Reads `history`; `historyAware` when it reads `history.available`. */
  history: boolean;
  historyAware: boolean;
  /** Reads `lists`; `listNames` are the lists it names (`lists.<name>`). */
  lists: boolean;
  listNames: Set<string>;
}

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

export function analyzeExpression(ast: ASTNode): ExpressionRefs {
  const refs: ExpressionRefs = {
    signals: new Set(),
    availabilityAware: new Set(),
    user: false,
    userAware: false,
    devices: false,
    velocity: false,
    velocityNames: new Set(),
    history: false,
    historyAware: false,
    lists: false,
    listNames: new Set(),
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
      refs.signals.add(sig);
      return;
    }
    if (n.op === '.' || n.op === '.?') {
      const [obj, field] = n.args;
      const inner = isNode(obj) ? signalOf(obj) : undefined;
      if (inner && field === 'available') refs.availabilityAware.add(inner);
      if (isNode(obj) && isId(obj, 'user') && field === 'available') refs.userAware = true;
      if (isNode(obj) && isId(obj, 'history') && field === 'available') refs.historyAware = true;
      if (isNode(obj) && isId(obj, 'velocity') && typeof field === 'string') refs.velocityNames.add(field);
      if (isNode(obj) && isId(obj, 'lists') && typeof field === 'string') refs.listNames.add(field);
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
      if (n.args === 'user') refs.user = true;
      else if (n.args === 'devices') refs.devices = true;
      else if (n.args === 'velocity') refs.velocity = true;
      else if (n.args === 'history') refs.history = true;
      else if (n.args === 'lists') refs.lists = true;
      // `signals` as a whole value: every signal may be read.
      else if (n.args === 'signals') for (const s of POLICY_SIGNAL_NAMES) refs.signals.add(s);
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
