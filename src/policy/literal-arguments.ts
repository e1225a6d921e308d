import type { ASTNode, Environment } from '@marcbachmann/cel-js';
import { parseCidr } from '../net/ip-cidr.ts';
import { closestName } from '../text/name-suggestion.ts';
import { compileRe2 } from './re2-matches.ts';

/**
 * Load-time checks of literal arguments that the type checker cannot see: a string is a string to
 * it, so `ip.inCidr("10.0.0.0/33")`, `matches("(bot")` or `getHours("Europe/Zurch")` type-check,
 * then throw on every evaluation, and a rule that fails closed would deny every login. A literal
 * is known at load, so it is checked at load.
 */

export interface LiteralIssue {
  /** Offset of the offending literal (or call) in the expression. */
  offset: number;
  message: string;
  severity: 'error' | 'warning';
}

/** Timestamp accessors whose one argument is a time zone (cel-js evaluates it with Intl). */
const TIME_ZONE_METHODS: ReadonlySet<string> = new Set([
  'getDate',
  'getDayOfMonth',
  'getDayOfWeek',
  'getDayOfYear',
  'getFullYear',
  'getHours',
  'getMilliseconds',
  'getMinutes',
  'getMonth',
  'getSeconds',
]);

function isNode(x: unknown): x is ASTNode {
  return typeof x === 'object' && x !== null && 'op' in x && 'args' in x;
}

function stringLiteral(n: ASTNode | undefined): string | undefined {
  return n !== undefined && n.op === 'value' && typeof n.args === 'string' ? n.args : undefined;
}

let timeZones: readonly string[] | undefined;

function checkTimeZone(method: string, zone: string): string | undefined {
  try {
    // The same call cel-js makes at run time (toLocaleString with this timeZone).
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return undefined;
  } catch {
    timeZones ??= Intl.supportedValuesOf('timeZone');
    const best = closestName(zone, timeZones);
    const hint = best
      ? ` (did you mean "${best}"?)`
      : /^[+-]\d/.test(zone)
        ? '; a fixed offset is written "+01:00", or as an IANA name such as "Etc/GMT-1" for UTC+1'
        : '; use an IANA name such as "Europe/Zurich" or "UTC"';
    return `${method}: unknown time zone "${zone}"${hint}`;
  }
}

function checkRegExp(pattern: string): string | undefined {
  // Compiled as evaluation compiles it: RE2 syntax (CEL's), no lookarounds or back-references.
  const re = compileRe2(pattern);
  if (!(re instanceof Error)) return undefined;
  const hint = /\(\?<?[=!]|\\[1-9]|\\k</.test(pattern)
    ? " (lookarounds and back-references need backtracking, which RE2, CEL's regex syntax, leaves out to run in linear time)"
    : '';
  return `matches: invalid regular expression "${pattern}": ${re.message}${hint}`;
}

/**
 * Checks the literal arguments of `inCidr` (CIDR syntax), `matches` (the pattern compiles) and the
 * time-zone argument of timestamp accessors (a zone Intl knows), and evaluates every call whose
 * operands are all literals (`timestamp("…")`, `duration("…")`, `int("…")`) to report the error it
 * would raise on every evaluation.
 */
export function checkLiteralArguments(ast: ASTNode, env: Environment): LiteralIssue[] {
  const issues: LiteralIssue[] = [];
  const visit = (x: unknown): void => {
    if (Array.isArray(x)) {
      for (const y of x) visit(y);
      return;
    }
    if (!isNode(x)) return;
    const n = x;
    if (n.op === 'value' || n.op === 'id') return;
    if (n.op === 'rcall' || n.op === 'call') {
      const [name, ...rest] = n.args as [string, ...unknown[]];
      const operands = (n.op === 'rcall' ? [rest[0], ...(rest[1] as unknown[])] : rest[0]) as ASTNode[];
      const args = n.op === 'rcall' ? operands.slice(1) : operands;
      const arg = args[0];
      const literal = args.length === 1 ? stringLiteral(arg) : undefined;
      const before = issues.length;
      if (literal !== undefined && n.op === 'rcall') {
        const offset = arg!.range.start;
        if (name === 'inCidr' && parseCidr(literal) === null) {
          issues.push({
            offset,
            message: `inCidr: "${literal}" is not a CIDR (address/prefix: IPv4 /0-32, IPv6 /0-128, e.g. "10.0.0.0/8")`,
            severity: 'error',
          });
        } else if (name === 'matches') {
          const message = checkRegExp(literal);
          if (message) issues.push({ offset, message, severity: 'error' });
        } else if (TIME_ZONE_METHODS.has(name)) {
          const message = checkTimeZone(name, literal);
          if (message) issues.push({ offset, message, severity: 'error' });
        }
      }
      if (issues.length === before && operands.length > 0 && operands.every((o) => o.op === 'value')) {
        try {
          env.evaluate(n.input.slice(n.range.start, n.range.end));
        } catch (e) {
          const summary = (e as { summary?: unknown }).summary;
          const message = typeof summary === 'string' ? summary : String(e).split('\n', 1)[0]!;
          issues.push({
            offset: n.range.start,
            message: `${name}(…) fails on every evaluation: ${message}`,
            severity: 'error',
          });
        }
      }
      visit(operands);
      return;
    }
    visit(n.args);
  };
  visit(ast);
  return issues;
}
