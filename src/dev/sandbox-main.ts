import { audienceScope } from '../auth/token-manager.ts';
import { isRiskgateError } from '../errors/riskgate-error.ts';
import { oauthClientsOf } from '../sandbox/oauth/oauth-clients.ts';
import type { SandboxCredentials } from '../sandbox/sandbox-config.ts';
import { CREDENTIAL_ENV, sandboxOptionsFromEnv } from '../sandbox/sandbox-env.ts';
import { startSandbox } from '../sandbox/server.ts';
import { loadOrCreateDevApiKey, loadOrCreateDevOpsKey } from './dev-api-key.ts';
import { sandboxUpstream } from './embedded-sandbox.ts';
import { writeSandboxEnvFile } from './sandbox-env-file.ts';

/**
 * `npm run sandbox`: the vendor emulator on SANDBOX_PORT (default 4010). Prints its URL and
 * credentials; stops on SIGTERM/SIGINT. Values overridden from the environment are not echoed: the
 * banner names the variable instead, so a real secret set there never reaches a terminal or a log.
 */
async function main(): Promise<void> {
  const options = sandboxOptionsFromEnv(process.env);
  const sandbox = await startSandbox(options);
  const overridden = new Map<keyof SandboxCredentials, string>();
  for (const [name, key] of Object.entries(CREDENTIAL_ENV)) if (process.env[name]) overridden.set(key, name);
  const show = (key: keyof SandboxCredentials) =>
    overridden.has(key) ? `(from ${overridden.get(key)})` : sandbox.config.credentials[key];

  const c = sandbox.config.credentials;
  const [retrieval, collection] = oauthClientsOf(c);
  const lines = [
    `riskgate sandbox listening on ${sandbox.url}`,
    '',
    `  OAuth token       POST ${sandbox.url}/oauth/v2/token   (JWKS: /oauth/v2/keys)`,
    `  Trust Signals     ${sandbox.url}/api/v1/signals/...   collections: POST /api/v1/collections`,
    `  Admin API         ${sandbox.url}/srv/admin/v1/...`,
    `  Log API           ${sandbox.url}/logs/v1/...`,
    `  Control           ${sandbox.url}/sandbox/stats | faults | reset | clock | info`,
    '',
    `  service ID                 ${show('serviceId')}`,
    `  organization ID            ${show('organizationId')}`,
    `  Admin API key              ${show('adminApiKey')}`,
    `  service Log API key        ${show('serviceLogApiKey')}`,
    `  organization Log API key   ${show('organizationLogApiKey')}`,
    `  callback signature key     ${show('callbackSignatureKey')}`,
    `  Retrieval client           ${show('retrievalClientId')} / ${show('retrievalClientSecret')}`,
    `    scope                    ${audienceScope(c.idp, retrieval!.audience)}`,
    `  Collection client          ${show('collectionClientId')} / ${show('collectionClientSecret')}`,
    `    scope                    ${audienceScope(c.idp, collection!.audience)}`,
    `  token lifetime             ${sandbox.config.tokenLifetimeSeconds} s`,
    '',
    '  demo accounts: alice bob mallory trudy carol dave (docs/sandbox.md)',
  ];
  // riskgate's configuration for this sandbox, for a riskgate started on its own (README, "Quick
  // start"); the caller and operator keys are the development keys `npm start` uses, so printed curls work for both.
  const stateDir = process.env.RISKGATE_STATE_DIR || '.riskgate';
  const envFile = writeSandboxEnvFile(
    stateDir,
    sandboxUpstream(sandbox),
    loadOrCreateDevApiKey(stateDir).key,
    loadOrCreateDevOpsKey(stateDir).key,
  );
  lines.push(`  riskgate settings          ${envFile}  (npx tsx --env-file=${envFile} src/main.ts)`);
  process.stdout.write(`${lines.join('\n')}\n`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`${signal}: stopping sandbox\n`);
    sandbox.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  const message = isRiskgateError(err) ? err.message : err instanceof Error ? err.message : String(err);
  process.stderr.write(`sandbox: ${message}\n`);
  process.exit(1);
});
