import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { MAX_DECIDE_BODY_BYTES } from '../decide/decide-request.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { PROBLEM_CONTENT_TYPE, problemOf } from '../http/problem-details.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import type { AdmissionControl, ShedReason } from './admission-control.ts';

/**
 * The cheapest refusal riskgate can make: a `POST /decide` that admission control sheds is answered
 * from the node:http listener, before the web framework builds a Request, runs its middleware or
 * serialises a problem, with a body prepared once. Under a 5x burst on a small CPU share the refusals
 * are most of the work, so their cost decides how much is left for the decisions admitted.
 * Only when the policy has no overload verdict (that answer needs the caller's key and the policy,
 * so it stays in the app). The answer, headers and metrics are the app's own.
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
    in_flight: Buffer.from(
      JSON.stringify(
        problemOf(
          ErrorCode.OVERLOADED,
          'riskgate has as many decisions in flight as it allows; retry shortly.',
        ),
      ),
    ),
    event_loop_delay: Buffer.from(
      JSON.stringify(
        problemOf(ErrorCode.OVERLOADED, 'riskgate is overloaded (its event loop is behind); retry shortly.'),
      ),
    ),
  };
  return (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'POST' && req.url === '/decide' && !o.hasOverloadVerdict()) {
      const reason = o.admission.check();
      if (reason !== undefined) {
        o.metrics.requestStarted();
        o.metrics.recordShed(reason, 'refused');
        const body = bodies[reason];
        // The connection stays open when the unread body is small (Node discards it): closing it
        // made every refused client reconnect, and under a burst the reconnections, not the
        // refusals, were the work (bench/RESULTS.md). A chunked or large body still closes it.
        const length = Number(req.headers['content-length'] ?? 0);
        const keep = req.headers['transfer-encoding'] === undefined && length <= MAX_DECIDE_BODY_BYTES;
        res.writeHead(503, {
          'content-type': PROBLEM_CONTENT_TYPE,
          'content-length': body.length,
          'retry-after': String(o.admission.retryAfterSeconds),
          ...(keep ? {} : { connection: 'close' }),
        });
        res.end(body);
        o.metrics.requestFinished(503, ErrorCode.OVERLOADED);
        return;
      }
    }
    listener(req, res);
  };
}
