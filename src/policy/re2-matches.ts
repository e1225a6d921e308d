import { LRUCache } from 'lru-cache';
import { RE2JS } from 're2js';

/**
 * CEL's `matches` with RE2 semantics, in linear time. cel-js runs `matches` on JavaScript's
 * backtracking RegExp: `^(\w+\s?)*$` against a 27-character user agent blocked the process for
 * half a second, doubling per character. RE2 (re2js, pure JS) has no backtracking, and the syntax
 * it accepts is the one the CEL specification names, so a policy means the same on another CEL
 * engine. Lookarounds and back-references are syntax errors, refused at load.
 */

/** The name `matches` calls are compiled to: same length, so error offsets stay those of the source. */
export const RE2_MATCHES_NAME = '_re2mat';

/** Patterns are policy literals, or (rarely) request values: bounded so a caller cannot grow it. */
const compiled = new LRUCache<string, RE2JS | Error>({ max: 512 });

/** Compiles `pattern` with RE2 syntax, or returns the syntax error (cached either way). */
export function compileRe2(pattern: string): RE2JS | Error {
  let re = compiled.get(pattern);
  if (re === undefined) {
    try {
      re = RE2JS.compile(pattern);
    } catch (e) {
      re = new Error(re2ErrorMessage(e));
    }
    compiled.set(pattern, re);
  }
  return re;
}

/** RE2JS's message without its "error parsing regexp: " prefix. */
export function re2ErrorMessage(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  return message.replace(/^error parsing regexp: /, '');
}

/** `s.matches(pattern)`: whether `pattern` matches anywhere in `s` (unanchored, like CEL). */
export function re2Matches(s: string, pattern: string): boolean {
  const re = compileRe2(pattern);
  if (re instanceof Error) throw new Error(`matches: invalid regular expression: ${re.message}`);
  return re.matcher(s).find();
}

interface CallNode {
  op: string;
  args: unknown;
  input: string;
  range: { start: number; end: number };
}

function isCallNode(x: unknown): x is CallNode {
  return typeof x === 'object' && x !== null && 'op' in x && 'args' in x;
}

/**
 * The expression with every `x.matches(p)` call renamed to {@link RE2_MATCHES_NAME}, or undefined
 * when it has none. The name is found in the source between the receiver and the argument, by the
 * parsed tree, so a string literal that happens to contain `.matches(` is left alone.
 */
export function renameMatchesCalls(ast: unknown, expr: string): string | undefined {
  const starts: number[] = [];
  const visit = (x: unknown): void => {
    if (Array.isArray(x)) {
      for (const y of x) visit(y);
      return;
    }
    if (!isCallNode(x) || x.op === 'value' || x.op === 'id') return;
    if (x.op === 'rcall') {
      const [name, receiver, args] = x.args as [string, CallNode, CallNode[]];
      if (name === 'matches' && args.length === 1) {
        const between = expr.slice(receiver.range.end, args[0]!.range.start);
        const at = between.lastIndexOf('matches');
        if (at >= 0) starts.push(receiver.range.end + at);
      }
    }
    visit(x.args);
  };
  visit(ast);
  if (starts.length === 0) return undefined;
  let out = expr;
  for (const s of starts) out = out.slice(0, s) + RE2_MATCHES_NAME + out.slice(s + RE2_MATCHES_NAME.length);
  return out;
}
