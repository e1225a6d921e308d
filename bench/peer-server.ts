/**
 * The peer (issue 32): the shipped policy hand-written as a plain node:http + undici service, the
 * second reference riskgate is compared with. Where the FLOOR (bench/floor-server.ts) only makes
 * the calls, the peer does what a team writing this service by hand would ship: it checks the
 * body (400 naming the field), makes the same vendor calls as riskgate and the FLOOR
 * (bench/plain-vendor-calls.ts: signals with the policy's timeouts and params, the remote access
 * tool batched, the Admin reads behind a 2-second cache), scores the answers with the rules of
 * policies/login.yaml that the bench's logins can reach, answers the same verdict with its reasons,
 * writes one decision-log line per decision to a file, and runs the same actions (the step-up
 * one-time code before answering, lock-out, restricted factors and device archiving after it,
 * through the outbox file).
 *
 * Not written by hand (the bench's logins never reach them, and the bench checks every verdict
 * against riskgate's): velocity counters (three IP addresses per account, far under the thresholds),
 * the Log API history (the bench gives riskgate no Log API), overrides, the deadline, admission.
 *
 * Env: those of bench/plain-vendor-calls.ts, PEER_PORT (0: any), PEER_DECISION_LOG (a file;
 * default in REFERENCE_STATE_DIR), PEER_API_KEY (the Bearer key callers must send, as riskgate's
 * RISKGATE_API_KEYS; unset: none asked). `GET /bench/process` and `GET /bench/hello`:
 * bench/reference-http.ts.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DecideRequest } from '../src/decide/decide-request.ts';
import { type Answers, adminWrite, fetchToken, gather, userPath } from './plain-vendor-calls.ts';
import { answeredBenchRoute, readBody } from './reference-http.ts';

/** policies/login.yaml: per-input timeouts (ms) and what an unavailable input adds. */
const TIMEOUT_MS: Record<string, number> = {
  remoteAccessTool: 200,
  newBrowser: 150,
  latestProximity: 150,
  geovelocity: 200,
  activeCall: 150,
  user: 200,
  devices: 200,
};
const UNAVAILABLE_SCORE: Record<string, number> = {
  remoteAccessTool: 40,
  newBrowser: 20,
  geovelocity: 20,
  activeCall: 10,
  user: 20,
};
/** Inputs a risk-raising rule reads: one of them missing holds the verdict at challenge at least. */
const RAISING = new Set(['remoteAccessTool', 'newBrowser', 'geovelocity', 'activeCall', 'user', 'devices']);
const CHALLENGE = 40;
const DENY = 80;
const MAX_UNAVAILABLE_SCORE = 60;

const log = createWriteStream(
  process.env.PEER_DECISION_LOG ?? join(process.env.REFERENCE_STATE_DIR ?? tmpdir(), 'peer-decisions.ndjson'),
  { flags: 'a' },
);

interface Device {
  device_id?: string;
  enrolled?: boolean;
  type?: string;
  device_integrity?: string;
  migrated_at?: number;
  version_supported?: boolean;
}
interface User {
  status?: string;
  max_attempts?: number;
  failed_attempts?: number;
}
type Verdict = 'allow' | 'challenge' | 'deny';
interface Scored {
  verdict: Verdict;
  score: number;
  reasons: { id: string; score?: number; verdict?: Verdict }[];
  actions: string[];
  suppressStepUp: boolean;
  degraded: boolean;
  unavailable: string[];
}

/** The shipped policy's rules on one login's answers (policies/login.yaml, same ids). */
export function score(a: Answers, nowSeconds: number): Scored {
  const s: Scored = {
    verdict: 'allow',
    score: 0,
    reasons: [],
    actions: [],
    suppressStepUp: false,
    degraded: false,
    unavailable: [],
  };
  let hard: Verdict | undefined;
  const add = (id: string, points: number) => {
    s.score += points;
    s.reasons.push({ id, score: points });
  };
  const harden = (id: string, verdict: Verdict) => {
    s.reasons.push({ id, verdict });
    if (hard !== 'deny') hard = verdict;
  };
  let unavailableScore = 0;
  const inputs: [string, unknown][] = [
    ...Object.entries(a.signals),
    ['user', a.user],
    ['devices', a.devices],
  ];
  for (const [name, value] of inputs) {
    if (value !== null) continue;
    s.unavailable.push(name);
    unavailableScore += UNAVAILABLE_SCORE[name] ?? 0;
    if (RAISING.has(name)) s.degraded = true;
  }
  const user = a.user as User | null | undefined;
  if (user) {
    if (['locked_out', 'disabled', 'archived'].includes(user.status ?? '')) harden('account-locked', 'deny');
    if (user.status === 'bypass') add('account-bypass', 20);
    const max = user.max_attempts ?? 0;
    if (max > 0 && (user.failed_attempts ?? 0) >= max / 2) add('failed-attempts-high', 30);
  }
  const { remoteAccessTool: rat, newBrowser: nb, latestProximity: prox, geovelocity: geo } = a.signals;
  const ratAnomaly = rat?.success === true && rat.result?.anomaly === true;
  if (ratAnomaly && (rat.result?.anomalyConfidence ?? 0) >= 0.9) {
    harden('rat-confirmed', 'deny');
    s.actions.push('lockOut');
  } else if (ratAnomaly) add('rat-suspected', 50);
  if (rat && !rat.success && ['insufficient_observations', 'no_user_baseline'].includes(rat.reason ?? '')) {
    add('rat-unscored', 10);
  }
  if (nb && !nb.success && nb.reason === 'insufficient_observations' && !rat?.success) {
    harden('no-telemetry', 'challenge');
  }
  if (nb?.success && nb.result?.known === false) {
    add('new-browser', 40);
    if (nb.result.mismatchedFields?.includes('browser_os')) add('new-browser-os-changed', 10);
  }
  // The rule reads the remote access tool's answer: where that has none (a mobile login, a failed
  // lookup) riskgate cannot evaluate it, and a risk-lowering rule it cannot evaluate does not apply.
  if (prox?.success && (prox.result?.proximityConfidence ?? 0) >= 0.8 && rat?.success && !ratAnomaly) {
    add('near-enrolled-phone', -30);
  }
  if (geo?.success && geo.result?.anomaly) {
    add('impossible-travel', 60);
    if ((geo.result.maxSpeedKmh ?? 0) >= 3000) add('impossible-travel-extreme', 20);
  }
  if (a.signals.activeCall?.success && a.signals.activeCall.result?.onCall) {
    add('on-active-call', 45);
    s.actions.push('pushOnly');
    s.suppressStepUp = true;
  }
  const devices = ((a.devices as { devices?: Device[] } | null | undefined)?.devices ?? []) as Device[];
  if (devices.some((d) => d.enrolled && ['failed', 'compromised'].includes(d.device_integrity ?? ''))) {
    add('device-integrity-failed', 40);
    s.actions.push('archiveCompromisedDevice');
  }
  if (devices.some((d) => (d.migrated_at ?? 0) > 0 && nowSeconds - d.migrated_at! < 3 * 86400)) {
    add('device-recently-migrated', 25);
  }
  if (devices.some((d) => d.enrolled && ['ios', 'android'].includes(d.type ?? '') && !d.version_supported)) {
    add('device-app-outdated', 10);
  }
  if (s.unavailable.length >= 3) harden('vendor-outage', 'challenge');
  s.score += Math.min(unavailableScore, MAX_UNAVAILABLE_SCORE);
  const byScore: Verdict = s.score >= DENY ? 'deny' : s.score >= CHALLENGE ? 'challenge' : 'allow';
  s.verdict = hard === 'deny' || byScore === 'deny' ? 'deny' : (hard ?? byScore);
  if (s.degraded && s.verdict === 'allow') s.verdict = 'challenge';
  return s;
}

/** 400 naming the field when the body cannot be a login (the checks the peer's calls depend on). */
function invalidField(r: Record<string, unknown>): string | undefined {
  const id = /^[A-Za-z0-9-]{1,50}$/;
  if (typeof r.accountId !== 'string' || !id.test(r.accountId)) return 'accountId';
  for (const f of ['userId', 'unitId', 'interactionId', 'ip', 'userAgent'] as const) {
    if (r[f] !== undefined && typeof r[f] !== 'string') return f;
  }
  if (r.platform !== undefined && r.platform !== 'browser' && r.platform !== 'mobile') return 'platform';
  return undefined;
}

function send(res: ServerResponse, status: number, body: unknown, type = 'application/json'): void {
  res.statusCode = status;
  res.setHeader('content-type', type);
  res.end(JSON.stringify(body));
}

const apiKey =
  process.env.PEER_API_KEY === undefined ? undefined : Buffer.from(`Bearer ${process.env.PEER_API_KEY}`);
function authorized(req: IncomingMessage): boolean {
  if (apiKey === undefined) return true;
  const given = Buffer.from(req.headers.authorization ?? '');
  return given.length === apiKey.length && timingSafeEqual(given, apiKey);
}

async function decide(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!authorized(req))
    return send(res, 401, { title: 'Unauthorized', status: 401 }, 'application/problem+json');
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(await readBody(req)) as Record<string, unknown>;
  } catch {
    return send(res, 400, { title: 'Malformed JSON', status: 400 }, 'application/problem+json');
  }
  const field = body !== null && typeof body === 'object' ? invalidField(body) : 'body';
  if (field !== undefined) {
    return send(res, 400, { title: 'Invalid field', status: 400, field }, 'application/problem+json');
  }
  const r = body as unknown as DecideRequest;
  const decisionId = randomUUID();
  const answers = await gather(r, (name) => TIMEOUT_MS[name]);
  const scored = score(answers, Math.floor(Date.now() / 1000));
  const user = userPath(r);
  const actions: { type: string; status: string; oneTimeCode?: string }[] = [];
  if (scored.verdict === 'challenge' && !scored.suppressStepUp && user !== undefined) {
    const code = (await adminWrite(
      'POST',
      `${user}/one_time_code`,
      { length: 8, valid_secs: 300 },
      undefined,
      200,
    ).catch(() => undefined)) as { code?: string } | undefined;
    actions.push({
      type: 'one_time_code',
      status: code ? 'done' : 'failed',
      ...(code?.code && { oneTimeCode: code.code }),
    });
  }
  const after: (() => Promise<unknown>)[] = [];
  if (user !== undefined) {
    for (const action of scored.actions) {
      const id = `${decisionId}:${action}`;
      if (action === 'lockOut' && r.firstFactor === 'passed') {
        after.push(() => adminWrite('PUT', user, { status: 'locked_out' }, id, 2000));
        actions.push({ type: 'lock_out_user', status: 'queued' });
      } else if (action === 'pushOnly') {
        after.push(() => adminWrite('PUT', user, { allowed_factors: ['approve', 'mobile_auth'] }, id, 2000));
        actions.push({ type: 'restrict_factors', status: 'queued' });
      } else if (action === 'archiveCompromisedDevice') {
        const devices = (answers.devices as { devices?: Device[] } | undefined)?.devices ?? [];
        for (const d of devices) {
          if (!d.enrolled || !['failed', 'compromised'].includes(d.device_integrity ?? '')) continue;
          const path = `${user.slice(0, user.indexOf('/users/'))}/devices/${d.device_id}`;
          after.push(() => adminWrite('DELETE', path, undefined, `${id}:${d.device_id}`, 2000));
          actions.push({ type: 'archive_device', status: 'queued' });
        }
      }
    }
  }
  const answer = {
    decisionId,
    verdict: scored.verdict,
    score: scored.score,
    reasons: scored.reasons,
    actions,
    degraded: scored.degraded,
  };
  log.write(`${JSON.stringify({ at: new Date().toISOString(), request: r, inputs: answers, ...answer })}\n`);
  send(res, 200, answer);
  for (const run of after) void run().catch(() => {});
}

await fetchToken();
const server = createServer((req, res) => {
  if (answeredBenchRoute(req, res)) return;
  if (req.method !== 'POST' || req.url !== '/decide')
    return send(res, 404, { title: 'Not found', status: 404 });
  decide(req, res).catch(() => send(res, 500, { title: 'Internal error', status: 500 }));
});
server.keepAliveTimeout = 5000;
// A clean exit on the harness's SIGTERM, so `--cpu-prof` writes its profile (bench/hot-path-cpu.ts).
process.once('SIGTERM', () => process.exit(0));
server.listen(Number(process.env.PEER_PORT ?? 0), '127.0.0.1', () => {
  process.stderr.write(`peer listening on ${(server.address() as { port: number }).port}\n`);
});
