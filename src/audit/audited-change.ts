import type { Context } from 'hono';
import type { ErrorCode } from '../errors/riskgate-error.ts';
import { storeAnswer } from '../store/store-unavailable.ts';
import type { AuditedChange, ChangeAudit } from './record-change.ts';

/**
 * The reads and audited changes of one store of the system of record (the review queue, the policy
 * versions), as their operations (shared by the API, the console and the CLI) make them: a change
 * is written to the audit trail once, first (`edge.recordChange`: refused, 503, and never made
 * when the trail cannot take it), then made; a store that does not answer is the 503 `code`
 * naming it (src/store/store-unavailable.ts), never a change that seemed made.
 */
export interface StoreChanges {
  /** `work` (a read, or a write no entry announces), its failure the store's 503. */
  answer<T>(work: Promise<T>): Promise<T>;
  /** `change` written to the audit trail, then (only then) made by `make`, its failure the store's 503. */
  audited<T>(
    c: Context,
    edge: Pick<ChangeAudit, 'recordChange'>,
    change: AuditedChange,
    make: () => Promise<T>,
  ): Promise<T>;
}

/** The reads and audited changes of the store `store` names ("The review queue database"). */
export function storeChanges(code: ErrorCode, store: string): StoreChanges {
  const answer = <T>(work: Promise<T>) => storeAnswer(work, code, store);
  return {
    answer,
    async audited(c, edge, change, make) {
      await edge.recordChange(c, change);
      return answer(make());
    },
  };
}
