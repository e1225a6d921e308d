import { z } from 'zod';
import { ErrorCode, isRiskgateError, RiskgateError } from '../errors/riskgate-error.ts';
import type { OutboxEntry, OutboxStatus } from './outbox-store.ts';

/** An outbox entry as operators see it (GET /actions, `riskgate actions list`). */
export interface OutboxEntryView {
  id: string;
  decisionId: string;
  type: string;
  target: string;
  status: OutboxStatus;
  attempts: number;
  createdAt: string;
  nextAttemptAt?: string;
  updatedAt: string;
  lastError?: string;
  reason?: string;
}

export function outboxEntryView(e: OutboxEntry): OutboxEntryView {
  return {
    id: e.spec.id,
    decisionId: e.spec.decisionId,
    type: e.spec.type,
    target: e.spec.target,
    status: e.status,
    attempts: e.attempts,
    createdAt: new Date(e.createdAtMs).toISOString(),
    ...(e.status === 'pending' && { nextAttemptAt: new Date(e.nextAttemptAtMs).toISOString() }),
    updatedAt: new Date(e.updatedAtMs).toISOString(),
    ...(e.lastError !== undefined && { lastError: e.lastError }),
    ...(e.reason !== undefined && { reason: e.reason }),
  };
}

/** The query of GET /actions. */
export const actionsQuerySchema = z.strictObject({
  status: z.enum(['pending', 'delivered', 'dead', 'dropped']).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

/**
 * `work` (a store call of an operator endpoint), its failure made `RG_ERR_OUTBOX_UNAVAILABLE`
 * (503): a store that is down or stalled is not a bug of riskgate's. The store's own error may
 * name its server, so it stays out of the answer.
 */
export async function fromOutboxStore<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (isRiskgateError(error)) throw error;
    throw new RiskgateError(
      ErrorCode.OUTBOX_UNAVAILABLE,
      'The outbox store did not answer (down, refused or too slow); try again shortly.',
      { cause: error },
    );
  }
}
