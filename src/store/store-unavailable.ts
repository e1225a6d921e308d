import { type ErrorCode, isRiskgateError, RiskgateError } from '../errors/riskgate-error.ts';

/**
 * `work` (a store or database call of an endpoint), its failure made the 503 `code`: a store that
 * is down, refused or stalled is not a bug of riskgate's, and its own error may name its server (a
 * Redis or PostgreSQL URL), so it stays out of the answer (kept as the cause, for the log). A
 * RiskgateError passes as it is. `store` names it in the answer ("The outbox store").
 */
export async function storeAnswer<T>(work: Promise<T>, code: ErrorCode, store: string): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (isRiskgateError(error)) throw error;
    throw new RiskgateError(code, `${store} did not answer (down, refused or too slow); try again shortly.`, {
      cause: error,
    });
  }
}
