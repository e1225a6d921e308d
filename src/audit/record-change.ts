import type { Context } from 'hono';
import type { Principal } from '../edge/caller-auth.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { AuditAction, AuditEntry, AuditTrail } from '../operators/audit-trail.ts';
import { auditUnavailable } from './audit-routes.ts';

/** A change an operator is about to make, as a route describes it. */
export interface AuditedChange {
  action: AuditAction;
  /** What it is done to: a decisionId, an outbox entry id, a policy name. */
  target: string;
  /** What helps a reader (a label and note). Never a secret. */
  detail?: Record<string, unknown>;
}

/**
 * Records a change in the audit trail before it is made (`edge.recordChange`): who (the request's
 * operator), when, from where. Rejects with RG_ERR_AUDIT_UNAVAILABLE (503) when it cannot be
 * written, or when there is no audit trail: the route then refuses the change and does not make it.
 */
export function changeRecorder(o: {
  audit: AuditTrail | undefined;
  clientAddress: (c: Context) => string;
  log: (line: Record<string, unknown>) => void;
}): (c: Context, change: AuditedChange) => Promise<AuditEntry> {
  return async (c, change) => {
    const operator = (c.get('principal') as Principal | undefined)?.operator;
    if (operator === undefined) {
      throw new RiskgateError(ErrorCode.INTERNAL, `${change.action} recorded without an operator`);
    }
    if (o.audit === undefined) {
      throw auditUnavailable('No audit trail is configured, so no change can be made.');
    }
    try {
      return await o.audit.record({
        actor: operator.name,
        role: operator.role,
        keyId: operator.keyId,
        action: change.action,
        target: change.target,
        from: o.clientAddress(c),
        ...(change.detail !== undefined && { detail: change.detail }),
      });
    } catch (error) {
      o.log({
        level: 'error',
        msg: 'audit trail write failed: change refused',
        action: change.action,
        error: error instanceof Error ? error.message : String(error),
      });
      throw auditUnavailable('The audit trail cannot record this change, so it was not made.', error);
    }
  };
}
