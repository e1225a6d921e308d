import { request } from 'undici';
import type { UpstreamConfig } from '../config/riskgate-config.ts';
import type { SandboxCredentials } from '../sandbox/sandbox-config.ts';
import { type RunningSandbox, startSandbox } from '../sandbox/server.ts';
import { formatRfc2822, signRequest } from '../vendor-auth/hmac-signature.ts';

/**
 * Development only: the sandbox riskgate runs against when no vendor is configured (`npm start`).
 * src/riskgate-process.ts loads this file with a dynamic import in sandbox mode only, so the production import
 * graph never reaches src/sandbox/ (and the container image leaves both out).
 *
 * In-process rather than a child process: one lifecycle (Ctrl-C or SIGTERM stops both), no
 * readiness polling or IPC, port 0 works, and a failure to start is an exception with a stack.
 */

export interface EmbeddedSandbox {
  url: string;
  /** The vendor settings that point riskgate's clients at this sandbox. */
  upstream: UpstreamConfig;
  /** The Admin API user id of each username (for the demo commands). */
  userIds(usernames: readonly string[]): Promise<Record<string, string | undefined>>;
  stop(): Promise<void>;
}

/** Starts the sandbox with the default scenario (the demo accounts) on `port` (0 = any free port). */
export async function startEmbeddedSandbox(port: number): Promise<EmbeddedSandbox> {
  const running = await startSandbox({ port, scenario: 'default' });
  return {
    url: running.url,
    upstream: sandboxUpstream(running),
    userIds: (usernames) => lookUpUserIds(running, usernames),
    stop: () => running.stop(),
  };
}

/** The vendor settings of a running sandbox: every API on its one origin, its well-known credentials. */
export function sandboxUpstream(running: {
  url: string;
  config: { credentials: SandboxCredentials };
}): UpstreamConfig {
  const { url } = running;
  const c = running.config.credentials;
  return {
    serviceId: c.serviceId,
    signalsUrl: `${url}/api/v1`,
    authUrl: url,
    clientId: c.retrievalClientId,
    clientSecret: c.retrievalClientSecret,
    signalsAudience: c.signalsAudience,
    signalsIdp: c.idp,
    adminUrl: url,
    adminApiKey: c.adminApiKey,
    logsUrl: url,
    logApiKey: c.serviceLogApiKey,
    callbackSignatureKey: c.callbackSignatureKey,
  };
}

/** The Admin API user id of each username (undefined when there is no such user). */
export async function lookUpUserIds(
  running: RunningSandbox,
  usernames: readonly string[],
): Promise<Record<string, string | undefined>> {
  const out: Record<string, string | undefined> = {};
  for (const username of usernames) {
    out[username] = await lookUpUserId(running.url, running.config.credentials, username);
  }
  return out;
}

/**
 * `GET /users?username=` on the sandbox's Admin API, signed like any Admin call (docs/vendor-api.md#signing).
 */
async function lookUpUserId(
  url: string,
  c: SandboxCredentials,
  username: string,
): Promise<string | undefined> {
  const u = new URL('/srv/admin/v1/users', url);
  u.searchParams.set('username', username);
  const date = formatRfc2822(new Date());
  const authorization = signRequest(
    { date, method: 'GET', host: u.host, protocol: u.protocol, path: u.pathname, query: u.searchParams },
    c.serviceId,
    c.adminApiKey,
  );
  const res = await request(u, { headers: { 'svc-date': date, authorization }, headersTimeout: 2000 });
  const body = (await res.body.json()) as { users?: { username: string; user_id: string }[] };
  return body.users?.find((user) => user.username === username)?.user_id;
}
