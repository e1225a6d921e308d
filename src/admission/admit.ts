import type { IncomingMessage } from 'node:http';
import type { Context, MiddlewareHandler } from 'hono';
import { withDirectGuard } from '../edge/direct-form.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import { problemOf, problemResponse } from '../problem/problem-details.ts';
import { type AdmissionControl, overloadDetail, type ShedReason } from './admission-control.ts';
import { AdmissionTicket, ticketOf } from './admission-ticket.ts';

declare module 'hono' {
  interface ContextVariableMap {
    /** Set by `admit`: when the request arrived, and its place in flight (admission-ticket.ts). */
    admission: AdmissionTicket;
  }
}

export interface AdmitOptions {
  /** Without it every request is started (it still gets a ticket: its arrival time). */
  admission: AdmissionControl | undefined;
  metrics: Pick<RiskgateMetrics, 'recordShed'>;
  /**
   * A shed request's answer other than the 503 (a decision's overload verdict, src/decide/), or
   * undefined for the 503. Default: the 503.
   */
  answerShed?: ((c: Context, reason: ShedReason) => Response | undefined) | undefined;
}

/**
 * Admission at the edge of a caller endpoint, before authentication, body and fan-out: a shed
 * request costs a header parse and a short answer (admission-control.ts). Shed, the caller gets
 * 503 problem+json with Retry-After, or `answerShed`'s answer. Admitted, the handler finds its
 * ticket in `c.get('admission')`.
 */
export function admit(o: AdmitOptions): MiddlewareHandler {
  const { admission } = o;
  // Not async: the release rides on `next()`'s own promise (an async layer is a promise, an await
  // and a resume more on every request; issue 32).
  const middleware: MiddlewareHandler = (c, next) => {
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
    const ticket = ticketOf(incoming) ?? new AdmissionTicket(performance.now(), false);
    if (admission !== undefined) {
      // Checked once per request: the listener already did unless the policy answers overload
      // with a verdict (which needs the caller's key and the policy, so it is decided here).
      if (!ticket.admitted) {
        const shed = admission.check();
        if (shed !== undefined)
          return Promise.resolve(o.answerShed?.(c, shed) ?? refused(o, admission, shed));
        ticket.admitted = true;
      }
      ticket.enter(admission);
    }
    c.set('admission', ticket);
    return next().then(
      () => ticket.release(),
      (error: unknown) => {
        ticket.release();
        throw error;
      },
    );
  };
  // Directly: a request the listener admitted (or with no admission control); one still to be
  // checked is hono's (checking counts a shed, and a shed decision may be answered with a verdict).
  return withDirectGuard(middleware, {
    check: (req, vars) => {
      const ticket = ticketOf(req) ?? new AdmissionTicket(performance.now(), false);
      vars.admission = ticket;
      return admission === undefined || ticket.admitted;
    },
    enter: (_req, vars) => {
      if (admission !== undefined) vars.admission!.enter(admission);
    },
    leave: (_req, vars) => vars.admission!.release(),
  });
}

function refused(o: AdmitOptions, admission: AdmissionControl, reason: ShedReason): Response {
  o.metrics.recordShed(reason, 'refused');
  return problemResponse(problemOf(ErrorCode.OVERLOADED, overloadDetail(reason)), {
    'retry-after': String(admission.retryAfterSeconds),
  });
}
