import type { ASTNode, ParseResult } from '@marcbachmann/cel-js';

/**
 * A budget of riskgate's own work per policy evaluation. CEL evaluation is synchronous and cannot
 * be interrupted, so the budget is cooperative: the evaluator checks it before each rule, every
 * comprehension (`exists`, `all`, `exists_one`, `filter`, `map`) checks it before each element,
 * and the functions that can cost (`matches`, `inCidr`) check it per call. A rule that finds the
 * budget spent fails with {@link EvaluationBudgetExceeded}; the evaluator treats that as a degraded
 * evaluation (policies/README.md, "Degraded decisions"), never as evidence.
 *
 * The budget is the thread's CPU time, not wall time: a process that is descheduled or throttled
 * (a cgroup CPU quota, a busy host) must not see its rules fail for time the scheduler took. Wall
 * time is the cheap first check (`performance.now()`, ~40 ns): CPU time can only be less, so while
 * wall time is within the budget nothing else is read. Once wall time passes it, the CPU clock
 * (`process.threadCpuUsage()`, ~0.3 µs) is read and the budget is counted in CPU time from there:
 * an evaluation gets at most about twice its budget of CPU, and none of it can be taken by the
 * scheduler. No evaluation within its budget of wall time pays for the CPU clock. The kernel
 * accounts thread CPU time per scheduler tick (up to 4 ms on Linux): a budget is meant to be
 * several ticks (the default 20 ms is), and a tiny one runs out at the first tick.
 *
 * Even the wall clock is not read at every check: a check that finds wall time within the budget
 * lets the next {@link CHECKS_PER_CLOCK_READ} - 1 checks pass unread. A live evaluation checks
 * before each of its ~20 rules, each a fraction of a microsecond, and the clock read was about a
 * tenth of the evaluation. Past the budget, at most that many more checks pass: a few rules or
 * comprehension elements (each check is before one), microseconds against a budget of
 * milliseconds; a runaway comprehension still ends within that many elements of the read that
 * finds the budget spent. The first check of an evaluation, and every check once wall time has
 * passed the budget, reads the clock.
 */

/** Default budget for one evaluation of a policy, in milliseconds. A normal one takes ~10 µs. */
export const DEFAULT_EVALUATION_BUDGET_MS = 20;

/** performance.now() past which the CPU clock is consulted; Infinity outside an evaluation. */
let wallCheckAtMs = Number.POSITIVE_INFINITY;
let budgetMs = 0;
/** Thread CPU time (µs) when wall time first passed the budget; -1 until then. */
let cpuFromUs = -1;
/** Sticky: once spent, the rest of the evaluation is over budget, whatever CEL did with the error. */
let spent = false;

/** Checks per wall-clock read while wall time is within the budget (see above). */
export const CHECKS_PER_CLOCK_READ = 8;
/** Checks left to pass without reading the clock. */
let uncheckedLeft = 0;

export class EvaluationBudgetExceeded extends Error {
  readonly code = 'RG_ERR_EVALUATION_BUDGET';
  constructor(ms: number) {
    super(`evaluation budget of ${ms} ms CPU exhausted`);
    this.name = 'EvaluationBudgetExceeded';
  }
}

function threadCpuUs(): number {
  const u = process.threadCpuUsage();
  return u.user + u.system;
}

/**
 * Starts the budget of the evaluation in progress (evaluations never interleave: they are
 * synchronous). `ms` may be fractional (tests use a microsecond).
 */
export function startEvaluationBudget(ms: number): void {
  budgetMs = ms;
  wallCheckAtMs = ms === Number.POSITIVE_INFINITY ? ms : performance.now() + ms;
  cpuFromUs = -1;
  spent = false;
  uncheckedLeft = 0;
}

/** Ends it, so that load-time evaluations of literal calls are never cut. */
export function endEvaluationBudget(): void {
  wallCheckAtMs = Number.POSITIVE_INFINITY;
  spent = false;
}

/** Whether the budget of the evaluation in progress is spent (it stays spent until the next start). */
export function evaluationBudgetSpent(): boolean {
  if (spent) return true;
  // No budget (a replay's `budgetMs: Infinity`, or outside an evaluation): no clock to read. It was
  // read before every rule, about a tenth of an evaluation once rules run as generated functions.
  if (wallCheckAtMs === Number.POSITIVE_INFINITY) return false;
  if (uncheckedLeft > 0) {
    uncheckedLeft--;
    return false;
  }
  const nowMs = performance.now();
  if (nowMs <= wallCheckAtMs) {
    uncheckedLeft = CHECKS_PER_CLOCK_READ - 1;
    return false;
  }
  const cpuUs = threadCpuUs();
  if (cpuFromUs < 0) {
    cpuFromUs = cpuUs;
    wallCheckAtMs = nowMs + budgetMs;
    return false;
  }
  const usedMs = (cpuUs - cpuFromUs) / 1000;
  if (usedMs >= budgetMs) {
    spent = true;
    return true;
  }
  // CPU time never runs faster than wall time: no need to read the CPU clock again before this.
  wallCheckAtMs = nowMs + (budgetMs - usedMs);
  return false;
}

/**
 * Whether a check has found the budget spent during this evaluation (no clock read): the cheap
 * question after a rule, whose own checks would have found it.
 */
export function evaluationBudgetFoundSpent(): boolean {
  return spent;
}

/** Throws {@link EvaluationBudgetExceeded} when the budget of the evaluation in progress is spent. */
export function checkEvaluationBudget(): void {
  if (evaluationBudgetSpent()) throw new EvaluationBudgetExceeded(budgetMs);
}

/** The message of an exhausted budget of `ms` (for explanations). */
export function budgetExceededMessage(ms: number): string {
  return new EvaluationBudgetExceeded(ms).message;
}

type Condition = (accu: unknown) => boolean;
interface ComprehensionArgs {
  condition?: Condition;
  [key: string]: unknown;
}

function isNode(x: unknown): x is ASTNode {
  return typeof x === 'object' && x !== null && 'op' in x && 'args' in x;
}

/**
 * Makes every comprehension of a parsed expression check the budget before each element. cel-js
 * expands the macros at parse time into `comprehension` nodes whose loop calls `args.condition`
 * (when set) before each step: a condition that checks the budget, then defers to the macro's own
 * (`exists` stops at the first true), is the one per-element hook the library offers. A spent
 * budget throws out of the loop, outside CEL's error absorption.
 */
export function budgetComprehensions(fn: ParseResult): void {
  const seen = new Set<object>();
  const visit = (x: unknown): void => {
    if (Array.isArray(x)) {
      for (const y of x) visit(y);
      return;
    }
    if (!isNode(x) || seen.has(x)) return;
    seen.add(x);
    const meta = (x as unknown as { meta?: { alternate?: unknown; macro?: Record<string, unknown> } }).meta;
    if (meta?.alternate !== undefined) visit(meta.alternate);
    if (meta?.macro !== undefined) for (const v of Object.values(meta.macro)) if (isNode(v)) visit(v);
    // Not in cel-js's public node types: the macros' expansion.
    if ((x.op as string) === 'comprehension') {
      const args = (x as { args: unknown }).args as ComprehensionArgs;
      const own = args.condition;
      args.condition =
        own === undefined
          ? () => {
              checkEvaluationBudget();
              return true;
            }
          : (accu) => {
              checkEvaluationBudget();
              return own(accu);
            };
      for (const v of Object.values(args)) if (isNode(v)) visit(v);
      return;
    }
    visit(x.args);
  };
  visit(fn.ast);
}
