import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import { refusalClosesConnection } from '../problem/early-refusal.ts';
import { PROBLEM_CONTENT_TYPE, problemOf } from '../problem/problem-details.ts';
import { type AdmissionControl, overloadDetail, type ShedReason } from './admission-control.ts';
import { AdmissionTicket, attachTicket } from './admission-ticket.ts';

/**
 * The cheapest refusal riskgate can make: a `POST /decide` (or `POST /feedback`, the other caller
 * endpoint, which shares the decisions' CPU) that admission control sheds is answered
 * from the node:http listener, before the web framework builds a Request, runs its middleware or
 * serialises a problem, with a body prepared once. Under a 5x burst on a small CPU share the refusals
 * are most of the work, so their cost decides how much is left for the decisions admitted.
 * Only when the policy has no overload verdict (that answer needs the caller's key and the policy,
 * so it stays in the app). The answer, headers and metrics are the app's own. A request let through
 * carries its admission ticket into the app (admission-ticket.ts): when it was read (a decision's
 * deadline runs from there, not from its handler) and whether it was admitted here.
 */

export function shedBeforeApp(
  listener: RequestListener,
  o: {
    admission: AdmissionControl;
    metrics: RiskgateMetrics;
    /** Whether the active policy answers overload with a verdict (then the app sheds). */
    hasOverloadVerdict: () => boolean;
  },
): RequestListener {
  const bodies: Record<ShedReason, Buffer> = {
    in_flight: Buffer.from(JSON.stringify(problemOf(ErrorCode.OVERLOADED, overloadDetail('in_flight')))),
    event_loop_delay: Buffer.from(
      JSON.stringify(problemOf(ErrorCode.OVERLOADED, overloadDetail('event_loop_delay'))),
    ),
  };
  return (req: IncomingMessage, res: ServerResponse) => {
    const decide = req.url === '/decide';
    if (req.method !== 'POST' || !(decide || req.url === '/feedback')) {
      listener(req, res);
      return;
    }
    const at = performance.now();
    // Only a decision can be answered with the policy's overload verdict; feedback is refused here.
    let admitted = false;
    if (!decide || !o.hasOverloadVerdict()) {
      const reason = o.admission.check();
      if (reason !== undefined) {
        o.metrics.requestStarted();
        o.metrics.recordShed(reason, 'refused');
        const body = bodies[reason];
        const close = refusalClosesConnection(
          503,
          req.headers['content-length'],
          req.headers['transfer-encoding'],
        );
        res.writeHead(503, {
          'content-type': PROBLEM_CONTENT_TYPE,
          'content-length': body.length,
          'retry-after': String(o.admission.retryAfterSeconds),
          ...(close && { connection: 'close' }),
        });
        res.end(body);
        o.metrics.requestFinished(503, ErrorCode.OVERLOADED);
        return;
      }
      admitted = true;
    }
    attachTicket(req, new AdmissionTicket(at, admitted));
    listener(req, res);
  };
}
