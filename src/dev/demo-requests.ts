import { get } from 'node:http';
import type { DecideRequest } from '../decide/decide-request.ts';
import { sleep } from '../timing/sleep.ts';

/**
 * The demo logins `npm start` prints as curl commands, one per expected verdict on the sandbox's
 * default scenario. The end-to-end tests send exactly these.
 */
export const DEMO_ACCOUNTS = [
  { username: 'alice', expected: 'allow' },
  { username: 'bob', expected: 'challenge' },
  { username: 'mallory', expected: 'deny' },
] as const;

/**
 * A browser login of `username` on its web unit, compared with its enrolled phone app, sent by a
 * login backend that has checked the password (`firstFactor: passed`): without it mallory's deny
 * would stand but her lock-out be withheld (policies/README.md, "A lock-out is never a weapon").
 */
export function demoRequest(username: string, userId: string | undefined): DecideRequest {
  const request: DecideRequest = {
    accountId: username,
    ...(userId !== undefined && { userId }),
    platform: 'browser',
    unitId: `${username}-web`,
    verificationStatus: 'unverified',
    interactionId: `${username}-login-1`,
    baseline: { unitId: `${username}-app`, verificationStatus: 'verified' },
    firstFactor: 'passed',
  };
  return request;
}

/** A copy-pasteable curl command sending `request` to `baseUrl` with `apiKey`. */
export function curlCommand(baseUrl: string, apiKey: string, request: DecideRequest): string {
  return [
    `curl -s ${baseUrl}/decide`,
    `-H 'authorization: Bearer ${apiKey}'`,
    `-H 'content-type: application/json'`,
    `-d '${JSON.stringify(request)}'`,
  ].join(' ');
}

export interface DemoBanner {
  riskgateUrl: string;
  sandboxUrl: string;
  apiKey: string;
  /** True when the key was generated (not from RISKGATE_API_KEYS). */
  /** Where the development key is kept; undefined when the key is the caller's own (RISKGATE_API_KEYS). */
  keyFile: string | undefined;
  /** The operator key, when generated for development (unset: RISKGATE_OPS_KEYS is the operator's own). */
  opsKey?: string | undefined;
  /** Where the development operator key is kept. */
  opsKeyFile?: string | undefined;
  userIds: Record<string, string | undefined>;
  /** Where the operator surface is (the ops port's URL when RISKGATE_OPS_PORT is set). Default `riskgateUrl`. */
  operatorUrl?: string | undefined;
  /** The verdicts of the demo logins `sendDemoLogins` sent at start (by username), when it did. */
  sent?: Record<string, string> | undefined;
}

/**
 * Sends each demo login once (`npm start` on the embedded sandbox), so a newcomer opening the
 * console finds decisions to read, mallory's deny and its lock-out among them. Each request has an
 * explicit timeout (`timeoutMs`, default 5000); a failure is that login's `failed`, never a throw.
 */
export async function sendDemoLogins(o: {
  riskgateUrl: string;
  apiKey: string;
  userIds: Record<string, string | undefined>;
  timeoutMs?: number;
  /**
   * Where to wait for readiness first: the logins wait (see `untilReady`) until `/readyz` answers
   * 200, so they are decided on every input the policy reads (the token held, the event history
   * read) as any later login is, not degraded by a start still warming up.
   */
  readiness?: ReadinessWait;
}): Promise<Record<string, string>> {
  if (o.readiness !== undefined) await untilReady(o.readiness);
  const verdicts: Record<string, string> = {};
  for (const { username } of DEMO_ACCOUNTS) {
    try {
      const res = await fetch(`${o.riskgateUrl}/decide`, {
        method: 'POST',
        headers: { authorization: `Bearer ${o.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(demoRequest(username, o.userIds[username])),
        signal: AbortSignal.timeout(o.timeoutMs ?? 5000),
      });
      const body = (await res.json()) as { verdict?: unknown };
      verdicts[username] = res.ok && typeof body.verdict === 'string' ? body.verdict : 'failed';
    } catch {
      verdicts[username] = 'failed';
    }
  }
  return verdicts;
}

const WHAT_HAPPENS: Record<string, string> = {
  allow: 'allow: a known browser next to the enrolled phone',
  challenge: 'challenge: a new browser; the answer carries a one-time code for step-up',
  deny: 'deny: a remote-controlled browser; the account is locked out after the answer',
};

/** Prints what `npm start` shows once riskgate listens on the embedded sandbox. */
export function printDemo(b: DemoBanner): void {
  const lines = [
    '',
    `riskgate is listening on ${b.riskgateUrl}, on the embedded sandbox (vendor APIs emulated at ${b.sandboxUrl}).`,
    b.keyFile !== undefined
      ? `Development caller key: ${b.apiKey} (kept in ${b.keyFile} across restarts; set RISKGATE_API_KEYS to choose your own)`
      : 'Caller key: the first of RISKGATE_API_KEYS.',
    '',
    'Try a login of each demo account:',
    '',
  ];
  for (const { username, expected } of DEMO_ACCOUNTS) {
    lines.push(`  # ${username}, ${WHAT_HAPPENS[expected]}`);
    lines.push(`  ${curlCommand(b.riskgateUrl, b.apiKey, demoRequest(username, b.userIds[username]))}`);
    lines.push('');
  }
  lines.push(
    `Also: ${['healthz', 'readyz'].map((p) => `${b.riskgateUrl}/${p}`).join('  ')}; with an operator key (operator endpoints):`,
    b.opsKey !== undefined
      ? `  curl -s -H 'authorization: Bearer ${b.opsKey}' ${b.riskgateUrl}/policies    (and /metrics, /openapi.json, /actions)\n  Development operator key: kept in ${b.opsKeyFile} (set RISKGATE_OPS_KEYS to choose your own); caller keys never open these.`
      : `  curl -s -H 'authorization: Bearer <a RISKGATE_OPS_KEYS key>' ${b.riskgateUrl}/policies    (and /metrics, /openapi.json, /actions)`,
    '',
    `Console: ${b.operatorUrl ?? b.riskgateUrl}/console    (sign in with ${b.opsKey !== undefined ? 'the development operator key above' : 'a RISKGATE_OPS_KEYS key'}; ${
      b.sent === undefined
        ? 'after the three logins above it shows their decisions'
        : `each demo login was sent once at start (${Object.entries(b.sent)
            .map(([user, verdict]) => `${user}: ${verdict}`)
            .join(', ')}), so it shows their decisions`
    }, and why mallory was denied and locked out)`,
    '',
    'Decision log lines follow on stdout. Ctrl-C stops riskgate and the sandbox.',
    '',
  );
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** How `untilReady` polls. */
export interface ReadinessWait {
  /** riskgate's base URL (`/readyz` is on every surface, without a key). */
  url: string;
  /** Between polls until the first 200, milliseconds (the run of 200s after it goes at once). Default 100. */
  intervalMs?: number;
  /** Longest wait, milliseconds: past it, go on anyway. Default 20 000. */
  waitMs?: number;
  /**
   * 200 answers in a row that count as ready. With several workers on one port each poll is a new
   * connection the kernel hands to any of them, so several in a row make it likely that every
   * worker was asked (8 in a row miss a worker not yet ready 1 time in 256 with 2 workers).
   * Default 1.
   */
  inARow?: number;
}

/**
 * Polls `GET /readyz` (a new connection each time) every `intervalMs` until it answered 200
 * `inARow` times in a row (asked one after the other once the first came), or `waitMs` is over.
 * True when ready.
 */
export async function untilReady(w: ReadinessWait): Promise<boolean> {
  const intervalMs = w.intervalMs ?? 100;
  const until = performance.now() + (w.waitMs ?? 20_000);
  const wanted = w.inARow ?? 1;
  let inARow = 0;
  while (performance.now() < until) {
    inARow = (await readyzStatus(`${w.url}/readyz`, 2000)) === 200 ? inARow + 1 : 0;
    if (inARow >= wanted) return true;
    if (inARow === 0) await sleep(intervalMs);
  }
  return false;
}

/** `GET url`'s status on a connection of its own (0 when it fails or takes over `timeoutMs`). */
function readyzStatus(url: string, timeoutMs: number): Promise<number> {
  return new Promise((resolve) => {
    const req = get(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}
