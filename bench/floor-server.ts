/**
 * The FLOOR server (issue 13): what a /decide costs with nothing of riskgate's own, to compare
 * riskgate's CPU per decision and throughput with in the same run. node:http, and per decision the
 * vendor calls of bench/plain-vendor-calls.ts: the same upstream reads riskgate makes for the
 * shipped policy on the same body (the remote access tool batched as riskgate batches it, issue 32),
 * and the Admin writes the shipped policy's actions make for what the vendor answered (issue 22),
 * each appended to a local outbox file first as riskgate's outbox appends it (issue 32): a
 * confirmed remote access tool locks the user out (`rat-confirmed`, a deny), a phone on a call
 * restricts the factors (`on-active-call`), an unknown browser otherwise fetches the step-up
 * one-time code (a challenge's `stepUp`, before answering, as riskgate does). Those three
 * conditions are the whole of its "policy": no validation of the request or the answers, no
 * timeouts, no scoring, no decision log, no metrics, no tracing. It answers `{"verdict":"allow"}`
 * once every call is back (its verdicts are not checked: it has none).
 *
 * Env: those of bench/plain-vendor-calls.ts, FLOOR_PORT (0: any). Prints `floor listening on
 * <port>` on stderr. `GET /bench/process` and `GET /bench/hello`: bench/reference-http.ts.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { DecideRequest } from '../src/decide/decide-request.ts';
import { adminWrite, fetchToken, gather, userPath } from './plain-vendor-calls.ts';
import { answeredBenchRoute, readBody } from './reference-http.ts';

let decisions = 0;
async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (answeredBenchRoute(req, res)) return;
  const r = JSON.parse(await readBody(req)) as DecideRequest;
  const id = `floor-${process.pid}-${++decisions}`;
  const { signals } = await gather(r, () => undefined);
  const rat = signals.remoteAccessTool;
  const denied =
    rat?.success === true && rat.result?.anomaly === true && (rat.result.anomalyConfidence ?? 0) >= 0.9;
  const onCall = signals.activeCall?.success === true && signals.activeCall.result?.onCall === true;
  const newBrowser = signals.newBrowser?.success === true && signals.newBrowser.result?.known === false;
  const user = userPath(r);
  // The challenge's one-time code comes before the answer (it carries it); on a call it is withheld.
  if (user !== undefined && newBrowser && !denied && !onCall) {
    await adminWrite('POST', `${user}/one_time_code`, { length: 8, valid_secs: 300 }).catch(() => {});
  }
  res.setHeader('content-type', 'application/json');
  res.end('{"verdict":"allow"}');
  // The Admin writes follow the answer, as riskgate's outbox runs them.
  if (user !== undefined && denied) {
    void adminWrite('PUT', user, { status: 'locked_out' }, `${id}:lock_out_user`).catch(() => {});
  }
  if (user !== undefined && onCall) {
    void adminWrite(
      'PUT',
      user,
      { allowed_factors: ['approve', 'mobile_auth'] },
      `${id}:restrict_factors`,
    ).catch(() => {});
  }
}

await fetchToken();
const server = createServer((req, res) => {
  handle(req, res).catch(() => {
    res.statusCode = 500;
    res.end();
  });
});
server.keepAliveTimeout = 5000;
server.listen(Number(process.env.FLOOR_PORT ?? 0), '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.stderr.write(`floor listening on ${address.port}\n`);
});
