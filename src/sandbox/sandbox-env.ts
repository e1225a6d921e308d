import { z } from 'zod';
import { InputError } from '../errors/riskgate-error.ts';
import { UUID_PATTERN } from '../signals/identifiers.ts';
import { faultRulesSchema } from './faults/fault-rule.ts';
import type { SandboxCredentials, SignalThresholds } from './sandbox-config.ts';
import type { SandboxOptions } from './server.ts';

/** Env variable → credential it overrides (docs/sandbox.md, "Credentials" lists them). */
export const CREDENTIAL_ENV: Record<string, keyof SandboxCredentials> = {
  SANDBOX_SERVICE_ID: 'serviceId',
  SANDBOX_ORGANIZATION_ID: 'organizationId',
  SANDBOX_ADMIN_API_KEY: 'adminApiKey',
  SANDBOX_SERVICE_LOG_API_KEY: 'serviceLogApiKey',
  SANDBOX_ORGANIZATION_LOG_API_KEY: 'organizationLogApiKey',
  SANDBOX_CALLBACK_SIGNATURE_KEY: 'callbackSignatureKey',
  SANDBOX_RETRIEVAL_CLIENT_ID: 'retrievalClientId',
  SANDBOX_RETRIEVAL_CLIENT_SECRET: 'retrievalClientSecret',
  SANDBOX_COLLECTION_CLIENT_ID: 'collectionClientId',
  SANDBOX_COLLECTION_CLIENT_SECRET: 'collectionClientSecret',
  SANDBOX_SIGNALS_AUDIENCE: 'signalsAudience',
  SANDBOX_COLLECTION_AUDIENCE: 'collectionAudience',
  SANDBOX_IDP: 'idp',
};

/** Env variable → threshold it overrides. */
export const THRESHOLD_ENV: Record<string, keyof SignalThresholds> = {
  SANDBOX_GEOVELOCITY_THRESHOLD_KMH: 'geovelocityThresholdKmh',
  SANDBOX_RAT_MIN_MOUSE_EVENTS: 'ratMinMouseEvents',
  SANDBOX_RAT_MIN_KEYSTROKE_EVENTS: 'ratMinKeystrokeEvents',
  SANDBOX_RAT_MIN_PRIOR_SESSIONS: 'ratMinPriorSessions',
  SANDBOX_RAT_BATCH_LOOKBACK_DAYS: 'ratBatchLookbackDays',
};

const UUID_CREDENTIALS = new Set<keyof SandboxCredentials>([
  'serviceId',
  'organizationId',
  'retrievalClientId',
  'collectionClientId',
]);

const port = z.coerce.number().int().min(0).max(65_535);
const positiveInt = z.coerce.number().int().positive();
const nonNegative = z.coerce.number().nonnegative();

function fail(field: string, message: string): never {
  throw new InputError(`${field}: ${message}`, [{ field, message }]);
}

function parseWith<T>(schema: z.ZodType<T>, field: string, value: string): T {
  const r = schema.safeParse(value);
  if (!r.success) fail(field, r.error.issues[0]!.message);
  return r.data;
}

/**
 * Reads the sandbox's options from the environment (zod-checked; an invalid value throws an
 * InputError naming the variable). Defaults: port 4010, host 127.0.0.1, the default scenario.
 */
export function sandboxOptionsFromEnv(
  env: Record<string, string | undefined>,
): SandboxOptions & { port: number } {
  const options: SandboxOptions & { port: number } = {
    port: env.SANDBOX_PORT ? parseWith(port, 'SANDBOX_PORT', env.SANDBOX_PORT) : 4010,
    host: env.SANDBOX_HOST || '127.0.0.1',
  };
  const credentials: Partial<SandboxCredentials> = {};
  for (const [name, key] of Object.entries(CREDENTIAL_ENV)) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    if (UUID_CREDENTIALS.has(key) && !UUID_PATTERN.test(v)) fail(name, 'must be a UUID');
    credentials[key] = v;
  }
  if (Object.keys(credentials).length > 0) options.credentials = credentials;
  const thresholds: Partial<SignalThresholds> = {};
  for (const [name, key] of Object.entries(THRESHOLD_ENV)) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    thresholds[key] = parseWith(key === 'geovelocityThresholdKmh' ? nonNegative : positiveInt, name, v);
  }
  if (Object.keys(thresholds).length > 0) options.thresholds = thresholds;
  if (env.SANDBOX_TOKEN_LIFETIME_SECONDS) {
    options.tokenLifetimeSeconds = parseWith(
      positiveInt,
      'SANDBOX_TOKEN_LIFETIME_SECONDS',
      env.SANDBOX_TOKEN_LIFETIME_SECONDS,
    );
  }
  if (env.SANDBOX_SCENARIO) options.scenario = env.SANDBOX_SCENARIO;
  if (env.SANDBOX_FAULTS) {
    let raw: unknown;
    try {
      raw = JSON.parse(env.SANDBOX_FAULTS);
    } catch {
      fail('SANDBOX_FAULTS', 'must be JSON: an array of fault rules or { "rules": [...] }');
    }
    const rules = Array.isArray(raw) ? raw : (raw as { rules?: unknown })?.rules;
    const parsed = faultRulesSchema.safeParse(rules);
    if (!parsed.success) {
      const i = parsed.error.issues[0]!;
      fail(`SANDBOX_FAULTS${i.path.map((p) => `[${String(p)}]`).join('')}`, i.message);
    }
    options.faults = parsed.data;
  }
  return options;
}
