import type { DecideRequest } from '../decide/decide-request.ts';
import { DEFAULT_HISTORY_MAX_LAG_SECONDS } from '../features/history-features.ts';

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
   * Where to read the Log API follower's lag first (the operator surface and its key): the logins
   * wait (at most `waitMs`, default 20 000) until the event history is read, so they are decided
   * on every input as any later login is, not degraded by a follower still starting.
   */
  metrics?: { url: string; opsKey: string; waitMs?: number };
}): Promise<Record<string, string>> {
  if (o.metrics !== undefined) await historyCaughtUp(o.metrics);
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

/** Waits until the follower's lag gauge reads a window behind now (history readable), or gives up. */
async function historyCaughtUp(m: { url: string; opsKey: string; waitMs?: number }): Promise<void> {
  const until = Date.now() + (m.waitMs ?? 20_000);
  while (Date.now() < until) {
    try {
      const res = await fetch(`${m.url}/metrics`, {
        headers: { authorization: `Bearer ${m.opsKey}` },
        signal: AbortSignal.timeout(2000),
      });
      const lag = /^riskgate_log_follower_lag_seconds (\S+)$/m.exec(await res.text())?.[1];
      // 0 until the follower has a cursor; then seconds behind now (the vendor's ingestion delay).
      if (lag !== undefined && Number(lag) > 0 && Number(lag) < DEFAULT_HISTORY_MAX_LAG_SECONDS / 2) return;
    } catch {
      // Not answering yet: asked again.
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
