/**
 * A time budget per policy evaluation. CEL evaluation is synchronous and cannot be interrupted, so
 * the budget is cooperative: the evaluator checks it before each rule, and the functions that can
 * cost (`matches`, `inCidr`, called once per element inside a comprehension) check it per call.
 * A rule that finds the budget spent raises an error, which its `onError` decides, instead of
 * holding the event loop (and every other login) behind one request.
 */

/** Default budget for one evaluation of a policy, in milliseconds. A normal one takes ~10 µs. */
export const DEFAULT_EVALUATION_BUDGET_MS = 20;

/** performance.now() past which the evaluation in progress is over budget; Infinity outside one. */
let deadlineMs = Number.POSITIVE_INFINITY;
let budgetMs = 0;

export class EvaluationBudgetExceeded extends Error {
  readonly code = 'RG_ERR_EVALUATION_BUDGET';
  constructor(ms: number) {
    super(`evaluation budget of ${ms} ms exhausted`);
    this.name = 'EvaluationBudgetExceeded';
  }
}

/** Starts the budget of the evaluation in progress (evaluations never interleave: they are synchronous). */
export function startEvaluationBudget(ms: number): void {
  budgetMs = ms;
  deadlineMs = performance.now() + ms;
}

/** Ends it, so that load-time evaluations of literal calls are never cut. */
export function endEvaluationBudget(): void {
  deadlineMs = Number.POSITIVE_INFINITY;
}

/** Whether the budget of the evaluation in progress is spent. */
export function evaluationBudgetSpent(): boolean {
  return deadlineMs !== Number.POSITIVE_INFINITY && performance.now() > deadlineMs;
}

/** Throws {@link EvaluationBudgetExceeded} when the budget of the evaluation in progress is spent. */
export function checkEvaluationBudget(): void {
  if (evaluationBudgetSpent()) throw new EvaluationBudgetExceeded(budgetMs);
}
