import { readFileSync } from 'node:fs';
import { isIPv4 } from 'node:net';
import { z } from 'zod';
import type { StateTarget } from '../database/state-databases.ts';
import type { TrustedProxy } from '../edge/caller-auth.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { closestName } from '../text/name-suggestion.ts';
import { SETTINGS, type SettingName } from './settings.ts';

export { defaultWorkers } from './settings.ts';

/**
 * riskgate's configuration, read from environment variables once at start (src/riskgate-process.ts) and
 * validated here, from the settings table (src/config/settings.ts: each variable, its parser, default
 * and documentation, and the field it fills). A missing or malformed value stops the process with a
 * message naming the variable; a secret's value never appears in a message.
 */

type Settings = typeof SETTINGS;
type ValueOf<N extends SettingName> = z.output<Settings[N]['schema']>;
type Fills<N extends SettingName> = Settings[N]['fills'];
type Flatten<T> = { [K in keyof T]: T[K] } & {};
type FieldsOf<T> = Flatten<T>;
/** The fields named `field` in the table. */
type TopFields = {
  [N in SettingName as Fills<N> extends `${string}.${string}` ? never : Fills<N>]: ValueOf<N>;
};
type SectionName =
  Fills<SettingName> extends infer F ? (F extends `${infer S}.${string}` ? S : never) : never;
/** The fields named `section.field`, one object per section. */
type Sections = {
  [S in SectionName]: FieldsOf<{
    [N in SettingName as Fills<N> extends `${S}.${infer F}` ? F : never]: ValueOf<N>;
  }>;
};
/** Every field as its setting parses it, before the settings read together (loadConfig) shape it. */
type ParsedSettings = TopFields & Sections;

/** Where decision log lines go (RISKGATE_DECISION_LOG). */
export type DecisionLogTarget = ValueOf<'RISKGATE_DECISION_LOG'>;

/** The vendor's endpoints and credentials (the table's `upstream.*`). Absent in sandbox mode. */
export type UpstreamConfig = Sections['upstream'];

/** Where riskgate's events go and how they are signed (RISKGATE_WEBHOOK_*, docs/webhooks.md). */
export type WebhookConfig = Flatten<
  Omit<Sections['webhooks'], 'urls' | 'secrets' | 'retryHorizonMs'> & {
    urls: string[];
    secrets: string[];
    /** Undefined: the outbox's horizon alone. */
    retryHorizonMs?: number | undefined;
  }
>;

/** Where velocity counters and event history live (RISKGATE_FEATURE_STORE). */
export type FeatureStoreTarget = { kind: 'memory' } | { kind: 'redis'; url: string };

/**
 * The configuration the rest of src/ reads: each field as its setting in src/config/settings.ts
 * documents it, except those several settings shape together, below.
 */
export type RiskgateConfig = Flatten<
  Omit<ParsedSettings, 'host' | 'featureStore' | 'database' | 'upstream' | 'webhooks' | 'trustedProxy'> & {
    /** RISKGATE_HOST, or by mode: `127.0.0.1` on the sandbox, `0.0.0.0` with a vendor. */
    host: string;
    featureStore: FeatureStoreTarget;
    /** RISKGATE_DATABASE; SQLite in RISKGATE_STATE_DIR. */
    database: StateTarget;
    /** The vendor's APIs; undefined means sandbox mode (RISKGATE_SIGNALS_URL unset). */
    upstream: UpstreamConfig | undefined;
    /** Undefined when RISKGATE_WEBHOOK_URLS is not set. */
    webhooks: WebhookConfig | undefined;
    /** Undefined when RISKGATE_TRUSTED_PROXIES is not set: no proxy is trusted, every identity header ignored. */
    trustedProxy: TrustedProxy | undefined;
  }
>;

const NAMES = Object.keys(SETTINGS) as SettingName[];
const isVendor = (name: SettingName) => 'vendor' in SETTINGS[name];

/** Variables that may also be given as `<NAME>_FILE` (a path whose content is the value). */
export const SECRET_VARIABLES: readonly SettingName[] = NAMES.filter((name) => 'secret' in SETTINGS[name]);

/**
 * Every variable `loadConfig` reads (besides `<NAME>_FILE` for secrets). riskgate.env.example and
 * the README's configuration table list exactly these (test/config-documentation.test.ts).
 */
export const CONFIG_VARIABLES: readonly string[] = NAMES;

const schemaOf = (names: SettingName[]) =>
  z.object(Object.fromEntries(names.map((name) => [name, SETTINGS[name].schema])));
const serviceSchema = schemaOf(NAMES.filter((name) => !isVendor(name)));
const vendorSchema = schemaOf(NAMES.filter(isVendor));

function configError(message: string): RiskgateError {
  return new RiskgateError(ErrorCode.INVALID_CONFIG, message);
}

/**
 * The first issue as `<VARIABLE> <what is wrong>`. A required variable (`required`: the vendor's,
 * with no default) that is unset, or set but empty as a copied env file leaves it, is "required":
 * what its format must be is beside the point until it has a value.
 */
function firstIssue(
  error: z.ZodError,
  env: Readonly<Record<string, string | undefined>>,
  required = false,
): string {
  const issue = error.issues[0]!;
  const variable = String(issue.path[0] ?? '');
  const raw = env[variable];
  if (raw === undefined) return `${variable} is required`;
  if (required && raw.trim() === '') return `${variable} is required (it is set, but empty)`;
  return `${variable} ${issue.message}`;
}

/** Parses the variables `names` of `env` and puts each where its entry says: `port`, or `section.field`. */
function parseInto(
  schema: z.ZodObject,
  env: Readonly<Record<string, string | undefined>>,
  required: boolean,
): Record<string, unknown> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) throw configError(firstIssue(parsed.error, env, required));
  const fields: Record<string, unknown> = {};
  for (const name of Object.keys(schema.shape) as SettingName[]) {
    const value = (parsed.data as Record<string, unknown>)[name];
    const [section, field] = SETTINGS[name].fills.split('.') as [string, string | undefined];
    if (field === undefined) {
      fields[section] = value;
    } else {
      fields[section] = { ...(fields[section] as Record<string, unknown> | undefined), [field]: value };
    }
  }
  return fields;
}

/**
 * `RISKGATE_*` names riskgate reads that are not configuration: the worker index the primary gives
 * each worker (src/cluster/worker-processes.ts).
 */
const INTERNAL_VARIABLES = ['RISKGATE_WORKER_INDEX'];

/** A `RISKGATE_*` variable riskgate does not read, with the known name it most resembles. */
export interface UnknownVariable {
  name: string;
  /** The variable probably meant (at most two edits away), if any. */
  suggestion: string | undefined;
}

/**
 * The `RISKGATE_*` variables in `env` that riskgate does not read: a typo (`RISKGATE_PORTT`) would
 * otherwise leave the setting at its default without a word. Known: every configuration variable,
 * `<NAME>_FILE` for the secrets, and riskgate's internal ones.
 */
export function unknownVariables(env: Readonly<Record<string, string | undefined>>): UnknownVariable[] {
  const known = [...CONFIG_VARIABLES, ...SECRET_VARIABLES.map((n) => `${n}_FILE`), ...INTERNAL_VARIABLES];
  return Object.keys(env)
    .filter((name) => name.startsWith('RISKGATE_') && !known.includes(name))
    .sort()
    .map((name) => ({ name, suggestion: closestName(name, known) }));
}

/** The start-up warning for an unknown variable: `RISKGATE_PORTT is not a riskgate variable (did you mean RISKGATE_PORT?)`. */
export function describeUnknownVariable(unknown: UnknownVariable): string {
  const hint = unknown.suggestion === undefined ? '' : ` (did you mean ${unknown.suggestion}?)`;
  return `${unknown.name} is not a riskgate variable, ignored${hint}`;
}

/**
 * Resolves `<NAME>_FILE` secrets into `<NAME>`. Setting both is an error (which one wins would be
 * a guess); a trailing newline, as editors and `echo` write, is dropped.
 */
export function resolveSecretFiles(
  env: Readonly<Record<string, string | undefined>>,
  readFile: (path: string) => string = (p) => readFileSync(p, 'utf8'),
): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = { ...env };
  for (const name of SECRET_VARIABLES) {
    const file = env[`${name}_FILE`];
    if (file === undefined || file === '') continue;
    if (env[name] !== undefined && env[name] !== '') {
      throw configError(`${name} and ${name}_FILE are both set; set only one`);
    }
    try {
      out[name] = readFile(file).replace(/\r?\n$/, '');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'read error';
      throw configError(`${name}_FILE: cannot read ${file} (${code})`);
    }
  }
  return out;
}

/**
 * Builds the configuration from `env` (normally `process.env`). Throws a `RiskgateError` with
 * code `RG_ERR_INVALID_CONFIG` whose message names the first bad variable.
 */
export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  readFile?: (path: string) => string,
): RiskgateConfig {
  const resolved = resolveSecretFiles(env, readFile);
  const s = parseInto(serviceSchema, resolved, false) as Omit<ParsedSettings, 'upstream'>;
  const upstream = upstreamOf(resolved);
  if (upstream !== undefined && s.apiKeys === undefined) {
    throw configError('RISKGATE_API_KEYS is required when an upstream is configured');
  }
  if (s.decisionLogRedaction.some((r) => r.mode === 'hash') && s.decisionLogHashKey === undefined) {
    throw configError(
      'RISKGATE_DECISION_LOG_HASH_KEY is required when RISKGATE_DECISION_LOG_REDACT hashes a field',
    );
  }
  checkOperatorSurface(s);
  const featureStore: FeatureStoreTarget =
    s.featureStore === undefined || s.featureStore === 'memory'
      ? { kind: 'memory' }
      : { kind: 'redis', url: s.featureStore };
  const database: StateTarget =
    s.database === 'sqlite'
      ? { kind: 'sqlite', dir: s.stateDir }
      : s.database === 'memory'
        ? { kind: 'memory' }
        : { kind: 'postgres', url: s.database };
  checkStateSharing({
    featureStoreSet: s.featureStore !== undefined,
    featureStore,
    database,
    outbox: s.outbox,
  });
  return {
    ...s,
    host: s.host ?? (upstream === undefined ? '127.0.0.1' : '0.0.0.0'),
    featureStore,
    database,
    upstream,
    webhooks: webhookConfigOf(s.webhooks),
    trustedProxy: s.trustedProxy.proxies === undefined ? undefined : s.trustedProxy,
    headersTimeoutMs: Math.min(s.headersTimeoutMs, s.requestTimeoutMs),
  } as RiskgateConfig;
}

/** The vendor's settings (undefined in sandbox mode), checked together. */
function upstreamOf(resolved: Readonly<Record<string, string | undefined>>): UpstreamConfig | undefined {
  const given = (name: string) => resolved[name] !== undefined && resolved[name] !== '';
  if (!given('RISKGATE_SIGNALS_URL')) {
    const stray = Object.keys(vendorSchema.shape).find(given);
    if (stray) throw configError(`RISKGATE_SIGNALS_URL is required when ${stray} is set`);
    return undefined;
  }
  const { upstream } = parseInto(vendorSchema, resolved, true) as Pick<ParsedSettings, 'upstream'>;
  if (!upstream.signalsAudience.startsWith('urn:') && upstream.signalsIdp === undefined) {
    throw configError(
      'RISKGATE_SIGNALS_IDP is required unless RISKGATE_SIGNALS_AUDIENCE is the whole scope URN (urn:<idp>:iam:org:project:id:<audience>:aud)',
    );
  }
  if ((upstream.logsUrl === undefined) !== (upstream.logApiKey === undefined)) {
    throw configError(
      upstream.logsUrl === undefined
        ? 'RISKGATE_LOGS_URL is required when RISKGATE_LOG_API_KEY is set'
        : 'RISKGATE_LOG_API_KEY is required when RISKGATE_LOGS_URL is set',
    );
  }
  return upstream;
}

/** The operator surface's settings, checked together. */
function checkOperatorSurface(
  s: Pick<ParsedSettings, 'port' | 'opsPort' | 'opsHost' | 'opsKeys' | 'trustedProxy'>,
) {
  if (s.opsPort !== undefined && s.opsPort !== 0 && s.opsPort === s.port) {
    throw configError(
      'RISKGATE_OPS_PORT must differ from RISKGATE_PORT (unset it to serve both on one port)',
    );
  }
  if (s.opsPort !== undefined && s.opsKeys === undefined && !isLoopbackHost(s.opsHost)) {
    throw configError(
      `RISKGATE_OPS_KEYS is required when the ops port listens beyond this machine (RISKGATE_OPS_HOST=${s.opsHost}): set RISKGATE_OPS_KEYS, or unset RISKGATE_OPS_HOST to listen on 127.0.0.1`,
    );
  }
  const { identityHeader, proxies, operators } = s.trustedProxy;
  if (identityHeader !== undefined && proxies === undefined) {
    throw configError(
      'RISKGATE_TRUSTED_PROXIES is required when RISKGATE_TRUSTED_IDENTITY_HEADER is set: the identity header is believed only from those addresses (anyone else reaching the port could write any name into it)',
    );
  }
  if ((identityHeader === undefined) !== (operators === undefined)) {
    throw configError(
      identityHeader === undefined
        ? 'RISKGATE_TRUSTED_IDENTITY_HEADER is required when RISKGATE_SSO_OPERATORS is set'
        : 'RISKGATE_SSO_OPERATORS is required when RISKGATE_TRUSTED_IDENTITY_HEADER is set (identity:role,...: who may operate, and as what)',
    );
  }
}

/** RISKGATE_WEBHOOK_*: receivers and secrets go together. Neither value is ever in a message. */
function webhookConfigOf(w: Sections['webhooks']): WebhookConfig | undefined {
  if (w.urls === undefined) {
    if (w.secrets !== undefined) {
      throw configError('RISKGATE_WEBHOOK_URLS is required when RISKGATE_WEBHOOK_SECRET is set');
    }
    return undefined;
  }
  if (w.secrets === undefined) {
    throw configError('RISKGATE_WEBHOOK_SECRET is required when RISKGATE_WEBHOOK_URLS is set');
  }
  return { ...w, urls: w.urls, secrets: w.secrets };
}

/**
 * Replicated means shared: state is either every replica's (PostgreSQL and Redis) or this process's
 * own (SQLite under the state dir, memory), never some of each. Counters and the Log API follower's
 * lease on a shared Redis with an embedded database made replicas that count one burst together
 * while each denies from lists, lock-outs and an audit trail of its own (a list entry added on one
 * replica allowed on the next); a shared database with counters in memory made each replica count
 * its share of a burst, never the whole; promised actions in memory beside a shared database are
 * each replica's own, lost with it while the lock-out records they belong to stay. A single
 * riskgate on PostgreSQL with counters in memory is legitimate, so it is allowed when said:
 * RISKGATE_FEATURE_STORE=memory. Both variables are named; neither value is (a URL may carry a
 * password).
 */
function checkStateSharing(state: {
  featureStoreSet: boolean;
  featureStore: FeatureStoreTarget;
  database: StateTarget;
  outbox: RiskgateConfig['outbox'];
}): void {
  const { featureStore, database } = state;
  if (featureStore.kind === 'redis' && database.kind !== 'postgres') {
    throw configError(
      `RISKGATE_FEATURE_STORE keeps velocity counters and the Log API follower's lease on Redis, shared by replicas, but RISKGATE_DATABASE (${database.kind}) keeps lists, lock-outs, the outbox and the audit trail in this process alone: set RISKGATE_DATABASE to the postgres:// URL every replica uses, or RISKGATE_FEATURE_STORE=memory for one riskgate on its own`,
    );
  }
  if (database.kind === 'postgres' && featureStore.kind === 'memory' && !state.featureStoreSet) {
    throw configError(
      'RISKGATE_DATABASE is PostgreSQL, shared by replicas, but RISKGATE_FEATURE_STORE is unset, which keeps velocity counters and the Log API history in this process alone (each replica would count its share of a burst): set RISKGATE_FEATURE_STORE to the redis:// URL every replica uses, or RISKGATE_FEATURE_STORE=memory for one riskgate on its own',
    );
  }
  if (database.kind === 'postgres' && state.outbox.kind === 'memory') {
    throw configError(
      'RISKGATE_OUTBOX=memory keeps promised actions in this process alone (lost with it), but RISKGATE_DATABASE is PostgreSQL, shared by replicas, and keeps the lock-outs those actions belong to: unset RISKGATE_OUTBOX to keep the actions in that database',
    );
  }
}

/**
 * Whether `host` is a loopback interface (127.0.0.0/8, ::1, localhost): reachable from this
 * machine (or pod) alone. Anything else, `0.0.0.0` and `::` included, is a network.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIPv4(v4) && v4.startsWith('127.');
}
