import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { UpstreamConfig } from '../config/riskgate-config.ts';

/** The file `npm run sandbox` writes under RISKGATE_STATE_DIR for riskgate to run against it. */
export const SANDBOX_ENV_FILE = 'sandbox.env';

/**
 * The environment that configures riskgate for a vendor at `upstream`, exactly as for the real
 * vendor (the same variables as `riskgate.env.example`), plus the caller key. A started sandbox
 * writes it so `node --env-file` can point a separately started riskgate at it.
 */
export function riskgateEnvFor(upstream: UpstreamConfig, apiKey: string, opsKey?: string): string {
  return `${[
    '# Written by `npm run sandbox`: riskgate configured for this sandbox as for a real vendor.',
    '# npx tsx --env-file=.riskgate/sandbox.env src/main.ts',
    ...Object.entries(riskgateEnvRecord(upstream, apiKey, opsKey)).map(([k, v]) => `${k}=${v}`),
  ].join('\n')}\n`;
}

/**
 * The same as variables: what the primary of RISKGATE_WORKERS hands its workers in development
 * (without `apiKey`, the vendor's variables alone; `opsKey`, the development operator key).
 */
export function riskgateEnvRecord(
  upstream: UpstreamConfig,
  apiKey?: string,
  opsKey?: string,
): Record<string, string> {
  const entries: [string, string | undefined][] = [
    ['RISKGATE_API_KEYS', apiKey],
    ['RISKGATE_OPS_KEYS', opsKey],
    ['RISKGATE_SERVICE_ID', upstream.serviceId],
    ['RISKGATE_SIGNALS_URL', upstream.signalsUrl],
    ['RISKGATE_AUTH_URL', upstream.authUrl],
    ['RISKGATE_CLIENT_ID', upstream.clientId],
    ['RISKGATE_CLIENT_SECRET', upstream.clientSecret],
    ['RISKGATE_SIGNALS_AUDIENCE', upstream.signalsAudience],
    ['RISKGATE_SIGNALS_IDP', upstream.signalsIdp],
    ['RISKGATE_ADMIN_URL', upstream.adminUrl],
    ['RISKGATE_ADMIN_API_KEY', upstream.adminApiKey],
    ['RISKGATE_LOGS_URL', upstream.logsUrl],
    ['RISKGATE_LOG_API_KEY', upstream.logApiKey],
    ['RISKGATE_CALLBACK_SIGNATURE_KEY', upstream.callbackSignatureKey],
  ];
  return Object.fromEntries(entries.filter((e): e is [string, string] => e[1] !== undefined));
}

/** Writes `riskgateEnvFor(...)` to `<stateDir>/sandbox.env` (mode 0600: it holds credentials). */
export function writeSandboxEnvFile(
  stateDir: string,
  upstream: UpstreamConfig,
  apiKey: string,
  opsKey?: string,
): string {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const file = join(stateDir, SANDBOX_ENV_FILE);
  writeFileSync(file, riskgateEnvFor(upstream, apiKey, opsKey), { mode: 0o600 });
  return file;
}
