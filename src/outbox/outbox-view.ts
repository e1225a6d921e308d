import { z } from 'zod';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { storeAnswer } from '../store/store-unavailable.ts';
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

/** `work`, its failure the 503 `RG_ERR_OUTBOX_UNAVAILABLE` (src/store/store-unavailable.ts). */
export const fromOutboxStore = <T>(work: Promise<T>) =>
  storeAnswer(work, ErrorCode.OUTBOX_UNAVAILABLE, 'The outbox store');
