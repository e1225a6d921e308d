/**
 * The FLOOR server (issue 13): what a /decide costs with nothing of riskgate's own, to compare
 * riskgate's CPU per decision and throughput with in the same run. node:http and undici; per
 * decision the same upstream calls riskgate makes for the shipped policy on the same body (the
 * signals the body's platform allows, the remote access tool as a one-item batch POST, the Admin
 * user and devices reads behind the same 2-second cache), built with riskgate's own query and
 * signing functions (a floor still has to say the same things to the vendor), and the Admin
 * writes the shipped policy's actions make for what the vendor answered (issue 22: without them the
 * FLOOR made ~3.0 upstream calls per decision against riskgate's ~3.5): a confirmed remote access
 * tool locks the user out (`rat-confirmed`, a deny), a phone on a call restricts the factors
 * (`on-active-call`), an unknown browser otherwise fetches the step-up one-time code (a challenge's
 * `stepUp`, before answering, as riskgate does). Those three conditions are the whole of its
 * "policy": no validation of the request or the answers, no scoring, no decision log, no metrics,
 * no tracing. It answers `{"verdict":"allow"}` once every call is back.
 *
 * Env: the RISKGATE_* vendor variables the bench gives riskgate, FLOOR_PORT (0: any). Prints
 * `floor listening on <port>` on stderr. `GET /bench/process` as in bench/riskgate-under-bench.ts.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent, request } from 'undici';
import { ADMIN_PREFIX, signAdminRequest } from '../src/admin/admin-client.ts';
import type { DecideRequest } from '../src/decide/decide-request.ts';
import { applicability, buildSignalQuery } from '../src/policy/inputs/signal-queries.ts';
import type { PolicySignalName } from '../src/policy/policy-types.ts';
import { newBrowserQuery, proximityQuery, singleUnitQuery } from '../src/signals/signal-params.ts';
import { createSigningKey } from '../src/vendor-auth/hmac-signature.ts';

const env = process.env;
const signalsUrl = new URL(env.RISKGATE_SIGNALS_URL!);
const adminUrl = new URL(env.RISKGATE_ADMIN_URL!);
const serviceId = env.RISKGATE_SERVICE_ID!;
const agent = new Agent({ connections: 128, keepAliveTimeout: 30_000 });
const signer = {
  serviceId,
  apiKey: createSigningKey(env.RISKGATE_ADMIN_API_KEY!),
  host: adminUrl.host,
  protocol: adminUrl.protocol,
};
/** The signals the shipped policy reads (`npx riskgate policy check policies/login.yaml`). */
const SIGNALS: PolicySignalName[] = [
  'remoteAccessTool',
  'newBrowser',
  'latestProximity',
  'geovelocity',
  'activeCall',
];
const signalsPath = `${signalsUrl.pathname.replace(/\/$/, '')}/signals/`;
const prefix = `?serviceId=${serviceId}`;

let token = '';
async function fetchToken(): Promise<void> {
  const audience = env.RISKGATE_SIGNALS_AUDIENCE!;
  const scope = audience.startsWith('urn:')
    ? audience
    : `urn:${env.RISKGATE_SIGNALS_IDP}:iam:org:project:id:${audience}:aud`;
  const basic = Buffer.from(`${env.RISKGATE_CLIENT_ID}:${env.RISKGATE_CLIENT_SECRET}`).toString('base64');
  const res = await request(`${env.RISKGATE_AUTH_URL}/oauth/v2/token`, {
    method: 'POST',
    dispatcher: agent,
    headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: `grant_type=client_credentials&scope=${encodeURIComponent(scope)}`,
  });
  token = ((await res.body.json()) as { access_token: string }).access_token;
}

/** The parts of the vendor's answers the actions depend on. */
interface SignalAnswer {
  success?: boolean;
  result?: { anomaly?: boolean; anomalyConfidence?: number; onCall?: boolean; known?: boolean };
}

async function signal(path: string): Promise<SignalAnswer> {
  const res = await request(`${signalsUrl.origin}${path}`, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
  });
  return (await res.body.json()) as SignalAnswer;
}

async function ratBatch(r: DecideRequest): Promise<SignalAnswer | undefined> {
  const item = {
    serviceId,
    accountId: r.accountId,
    unitId: r.unitId,
    verificationStatus: r.verificationStatus,
    interactionId: r.interactionId,
  };
  const res = await request(`${signalsUrl.origin}${signalsPath}remote-access-tool`, {
    method: 'POST',
    dispatcher: agent,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify([item]),
  });
  return ((await res.body.json()) as { results?: SignalAnswer[] }).results?.[0];
}

const adminCache = new Map<string, { at: number; value: Promise<unknown> }>();
function admin(path: string): Promise<unknown> {
  const hit = adminCache.get(path);
  if (hit !== undefined && performance.now() - hit.at < 2000) return hit.value;
  const signed = signAdminRequest(signer, new Date().toUTCString(), 'GET', path, undefined, undefined);
  const value = request(`${adminUrl.origin}${signed.path}`, {
    dispatcher: agent,
    headers: signed.headers,
  }).then((res) => res.body.json());
  adminCache.set(path, { at: performance.now(), value });
  return value;
}

/** A signed Admin write (riskgate's `updateUser` / `createOneTimeCode`); a changed user drops its cached reads. */
async function adminWrite(method: 'PUT' | 'POST', path: string, body: unknown): Promise<void> {
  const json = JSON.stringify(body);
  const signed = signAdminRequest(signer, new Date().toUTCString(), method, path, undefined, json);
  const res = await request(`${adminUrl.origin}${signed.path}`, {
    method,
    dispatcher: agent,
    headers: signed.headers,
    body: json,
  });
  await res.body.text();
  if (method === 'PUT' && res.statusCode !== 304) adminCache.delete(path);
}

/** The vendor's answers of one decision, by signal. */
type Answers = Partial<Record<PolicySignalName, SignalAnswer | undefined>>;

function callsFor(r: DecideRequest, answers: Answers): Promise<unknown>[] {
  const now = Date.now();
  const calls: Promise<unknown>[] = [];
  const keep = (name: PolicySignalName) => (a: SignalAnswer | undefined) => {
    answers[name] = a;
  };
  for (const name of SIGNALS) {
    if (applicability(name, r) !== 'ok') continue;
    const q = buildSignalQuery(name, r, undefined) as never;
    switch (name) {
      case 'remoteAccessTool':
        calls.push(ratBatch(r).then(keep(name)));
        break;
      case 'newBrowser':
        calls.push(signal(`${signalsPath}new-browser${newBrowserQuery(prefix, q, now)}`).then(keep(name)));
        break;
      case 'latestProximity':
        calls.push(signal(`${signalsPath}latest-proximity${proximityQuery(prefix, q, now)}`));
        break;
      case 'geovelocity':
        calls.push(signal(`${signalsPath}geovelocity${singleUnitQuery(prefix, q, now)}`));
        break;
      case 'activeCall':
        calls.push(signal(`${signalsPath}active-call${singleUnitQuery(prefix, q, now)}`).then(keep(name)));
        break;
    }
  }
  if (r.userId !== undefined) {
    calls.push(admin(`${ADMIN_PREFIX}/users/${r.userId}`));
    calls.push(admin(`${ADMIN_PREFIX}/users/${r.userId}/devices`));
  }
  return calls;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      data += c;
    });
    req.on('end', () => resolve(data));
    req.on('error', reject);
  });
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method === 'GET' && req.url?.startsWith('/bench/process')) {
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({ pid: process.pid, cpuUsage: process.cpuUsage(), memoryUsage: process.memoryUsage() }),
    );
    return;
  }
  if (req.method === 'GET' && req.url === '/bench/hello') {
    res.end('Hello, World!');
    return;
  }
  const r = JSON.parse(await readBody(req)) as DecideRequest;
  const answers: Answers = {};
  await Promise.allSettled(callsFor(r, answers));
  const rat = answers.remoteAccessTool;
  const denied =
    rat?.success === true && rat.result?.anomaly === true && (rat.result.anomalyConfidence ?? 0) >= 0.9;
  const onCall = answers.activeCall?.success === true && answers.activeCall.result?.onCall === true;
  const newBrowser = answers.newBrowser?.success === true && answers.newBrowser.result?.known === false;
  const user = r.userId === undefined ? undefined : `${ADMIN_PREFIX}/users/${r.userId}`;
  // The challenge's one-time code comes before the answer (it carries it); on a call it is withheld.
  if (user !== undefined && newBrowser && !denied && !onCall) {
    await adminWrite('POST', `${user}/one_time_code`, { length: 8, valid_secs: 300 }).catch(() => {});
  }
  res.setHeader('content-type', 'application/json');
  res.end('{"verdict":"allow"}');
  // The Admin writes follow the answer, as riskgate's outbox runs them.
  if (user !== undefined && denied) void adminWrite('PUT', user, { status: 'locked_out' }).catch(() => {});
  if (user !== undefined && onCall) {
    void adminWrite('PUT', user, { allowed_factors: ['approve', 'mobile_auth'] }).catch(() => {});
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
server.listen(Number(env.FLOOR_PORT ?? 0), '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.stderr.write(`floor listening on ${address.port}\n`);
});
