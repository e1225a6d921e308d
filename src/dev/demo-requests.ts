import type { DecideRequest } from '../decide/decide-request.ts';

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
    `Console: ${b.operatorUrl ?? b.riskgateUrl}/console    (sign in with ${b.opsKey !== undefined ? 'the development operator key above' : 'a RISKGATE_OPS_KEYS key'}; after the three logins above it shows their decisions, and why mallory was denied and locked out)`,
    '',
    'Decision log lines follow on stdout. Ctrl-C stops riskgate and the sandbox.',
    '',
  );
  process.stdout.write(`${lines.join('\n')}\n`);
}
