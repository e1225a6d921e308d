import type { Context, MiddlewareHandler } from 'hono';
import type { Principal } from '../edge/caller-auth.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { AuditAction, AuditEntry, AuditOutcome, AuditTrail } from '../operators/audit-trail.ts';
import { problemCodeOf, toProblem } from '../problem/problem-details.ts';
import { auditUnavailable } from './audit-routes.ts';

/** A change an operator is about to make, as a route describes it. */
export interface AuditedChange {
  action: AuditAction;
  /** What it is done to: a decisionId, an outbox entry id, a policy name. */
  target: string;
  /** What helps a reader (a label and note). Never a secret. */
  detail?: Record<string, unknown>;
}

/** The edge's side of the audit trail: the intent before a change, its outcome after. */
export interface ChangeAudit {
  /**
   * Records a change in the audit trail before it is made (`edge.recordChange`): who (the
   * request's operator), when, from where. Rejects with RG_ERR_AUDIT_UNAVAILABLE (503) when it
   * cannot be written, or when there is no audit trail: the route then refuses the change and does
   * not make it.
   */
  recordChange(c: Context, change: AuditedChange): Promise<AuditEntry>;
  /**
   * The outcome of `c`'s changes when its answer does not say it (`edge.changeOutcome`): a policy
   * reload that failed is answered 200 `{ok: false}`, and must not read `done`.
   */
  changeOutcome(c: Context, outcome: AuditOutcome): void;
  /**
   * Middleware around every route: once a request that recorded changes is answered, writes each
   * one's outcome from the answer (see `outcomeOfAnswer`), before the answer leaves.
   */
  settleChanges: MiddlewareHandler;
}

/**
 * What became of a request's change, read from how it was answered: `done` for a 2xx or 3xx (a
 * console form redirects), `refused` for a 4xx (the change was not possible: gone meanwhile, not
 * found), `failed` for a 5xx or a throw (a database that did not take the write), each refusal or
 * failure with its `RG_ERR_*` code when the answer has one. The routes answer a change's success
 * only once it is made, so a `done` is never a change that was not.
 */
export function outcomeOfAnswer(c: Context): AuditOutcome {
  if (c.error !== undefined) {
    const problem = toProblem(c.error);
    return { status: problem.status < 500 ? 'refused' : 'failed', code: problem.code };
  }
  const status = c.res.status;
  const code = problemCodeOf(c.res);
  if (status < 400) return { status: 'done' };
  return { status: status < 500 ? 'refused' : 'failed', ...(code !== undefined && { code }) };
}

/** The intent and outcome of the changes of each request, over `o.audit`. */
export function changeAudit(o: {
  audit: AuditTrail | undefined;
  clientAddress: (c: Context) => string;
  log: (line: Record<string, unknown>) => void;
}): ChangeAudit {
  // Per request: the entries written, until its answer settles them.
  const intents = new WeakMap<Context, AuditEntry[]>();
  // Per request: what a route said of its changes' outcome, over what its answer says.
  const declared = new WeakMap<Context, AuditOutcome>();
  return {
    changeOutcome(c, outcome) {
      declared.set(c, outcome);
    },
    async recordChange(c, change) {
      const operator = (c.get('principal') as Principal | undefined)?.operator;
      if (operator === undefined) {
        throw new RiskgateError(ErrorCode.INTERNAL, `${change.action} recorded without an operator`);
      }
      if (o.audit === undefined) {
        throw auditUnavailable('No audit trail is configured, so no change can be made.');
      }
      let entry: AuditEntry;
      try {
        entry = await o.audit.record({
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
      intents.set(c, [...(intents.get(c) ?? []), entry]);
      return entry;
    },
    async settleChanges(c, next) {
      await next();
      const entries = intents.get(c);
      if (entries === undefined || o.audit === undefined) return;
      intents.delete(c);
      const answered = outcomeOfAnswer(c);
      // A failure the answer shows wins over what the route declared before it threw.
      const outcome = answered.status === 'done' ? (declared.get(c) ?? answered) : answered;
      for (const entry of entries) {
        // The change stands whatever happens here: a lost outcome leaves the entry `unknown`,
        // never the answer failed.
        await o.audit.settle(entry.id, outcome).catch((error: unknown) => {
          o.log({
            level: 'error',
            msg: 'audit outcome write failed: the entry reads unknown',
            action: entry.action,
            entryId: entry.id,
            outcome: outcome.status,
            error: error instanceof Error ? error.message : String(error),
          });
        });
      }
    },
  };
}
