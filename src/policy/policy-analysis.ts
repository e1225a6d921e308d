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
      visit(obj);
      return;
    }
    if (n.op === 'id') {
      if (n.args === 'user') refs.user = true;
      else if (n.args === 'devices') refs.devices = true;
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
