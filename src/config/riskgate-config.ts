import { readFileSync } from 'node:fs';
import { isIPv4 } from 'node:net';
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import type { StateTarget } from '../database/state-databases.ts';
import type { TrustedProxy } from '../edge/caller-auth.ts';
import { parseTrustedProxies } from '../edge/client-address.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { RiskgateEventType } from '../events/riskgate-event.ts';
import { OPERATOR_ROLES, type OperatorRole } from '../operators/operator.ts';
import { OPERATOR_NAME, parseOperatorKeyEntries } from '../operators/operator-keys.ts';
import { serviceIdSchema } from '../signals/identifiers.ts';
import { DEFAULT_WINDOW_MS, MAX_WINDOW_MS } from '../signals/rat-batcher.ts';
import { DEFAULT_RAT_CACHE_TTL_MS } from '../signals/signals-client.ts';
import { closestName } from '../text/name-suggestion.ts';
import { DEFAULT_REDACTION, parseRedaction, type RedactionRule } from './redaction-rules.ts';

/**
 * riskgate's configuration, read from environment variables once at start (src/riskgate-process.ts) and
 * validated here. A missing or malformed value stops the process with a message naming the
 * variable; a secret's value never appears in a message.
 */

/** Where decision log lines go. */
export type DecisionLogTarget = { kind: 'stdout' } | { kind: 'file'; path: string } | { kind: 'off' };

/** The vendor's endpoints and credentials. Absent in sandbox mode. */
export interface UpstreamConfig {
  serviceId: string;
  signalsUrl: string;
  authUrl: string;
  clientId: string;
  clientSecret: string;
  /** The signals audience, or the whole scope URN `urn:<idp>:iam:org:project:id:<audience>:aud`. */
  signalsAudience: string;
  /** The `<idp>` of the scope URN; required when `signalsAudience` is not already the URN. */
  signalsIdp: string | undefined;
  adminUrl: string;
  adminApiKey: string;
  /** Log API; optional: when set, its events keep the Admin read cache current (off the hot path). */
  logsUrl: string | undefined;
  logApiKey: string | undefined;
  /** Without it, `POST /callbacks/admin` is not served. */
  callbackSignatureKey: string | undefined;
}

export interface RiskgateConfig {
  /** Listening port. Default 8080. */
  port: number;
  /**
   * Interface to listen on (both ports). Default `127.0.0.1` in sandbox mode (a development
   * machine), `0.0.0.0` with a vendor configured (a container, behind its network policy).
   */
  host: string;
  /**
   * A separate port for /metrics, /policies, /openapi.json and /actions (then not served on
   * `port`); undefined: they are served on `port`, behind a key. /healthz and /readyz are on both.
   */
  opsPort: number | undefined;
  /**
   * Interface the ops port listens on. Default `127.0.0.1`: the operator endpoints stay on the
   * machine (or pod) unless told otherwise; a non-loopback address needs `opsKeys`.
   */
  opsHost: string;
  /**
   * Keys for the operator endpoints, on whichever port serves them. Undefined: no key opens them
   * (403), except the development key `npm start` generates on the embedded sandbox. Caller keys
   * never do.
   */
  opsKeys: string[] | undefined;
  /**
   * An authenticating proxy in front of riskgate (RISKGATE_TRUSTED_PROXIES): requests from its
   * addresses are attributed to their X-Forwarded-For client, and, with
   * RISKGATE_TRUSTED_IDENTITY_HEADER, to the operator that header names (RISKGATE_SSO_OPERATORS
   * gives each a role). Undefined: no proxy is trusted; every identity header is ignored.
   */
  trustedProxy: TrustedProxy | undefined;
  /**
   * `POST /feedback`: labels per second each key may send (token bucket, per process; default 10),
   * how many at once (default 50), and how many recent decisions this process remembers to know
   * their caller key (default 100,000, at most 24 h).
   */
  feedback: { ratePerSecond: number; burst: number; maxDecisions: number };
  /**
   * The console (`/console`): the key its session cookies are signed with (default: derived from
   * the operator keys, the same on every replica), how long a session lasts (minutes, default 480)
   * and whether the cookie is marked Secure over plain HTTP (TLS ended at a proxy; default false).
   */
  console: { sessionKey: string | undefined; sessionMinutes: number; secureCookie: boolean };
  /** Caller keys for `Authorization: Bearer`; undefined only in sandbox mode (a key is generated). */
  apiKeys: string[] | undefined;
  /** Policy file or directory. Default `policies/`. */
  policyPath: string;
  /** A candidate policy evaluated beside the active one on live traffic, never acting. */
  shadowPolicyPath: string | undefined;
  /** Per-decision deadline, milliseconds. Default 300. */
  deadlineMs: number;
  /**
   * How long an input the active policy reads (the token, the event history, the lists) may fall
   * behind, once warm, before `/readyz` answers 503, milliseconds. Default 10 000.
   */
  readyGraceMs: number;
  decisionLog: DecisionLogTarget;
  /** Fields of decision log lines dropped, hashed or truncated. Default: display names dropped. */
  decisionLogRedaction: RedactionRule[];
  /** Key of the `hash` redaction (HMAC-SHA256); required when a rule hashes. */
  decisionLogHashKey: string | undefined;
  /**
   * While the decision log destination fails: `answer` (default) keeps deciding and alarms
   * (/healthz, metrics, service log); `refuse` answers 503 and reports not ready, for deployments
   * where no decision may go unaudited.
   */
  decisionLogOnFailure: 'answer' | 'refuse';
  /**
   * Where promised actions are kept until delivered (RISKGATE_OUTBOX): `database` (default; the
   * control state's database, RISKGATE_DATABASE: durable, shared by replicas on PostgreSQL, and a
   * lock-out's entries written in one transaction with its record), or `memory` (not durable:
   * lost with the process; tests and development).
   */
  outbox: { kind: 'database' } | { kind: 'memory' };
  /** How long an action is retried before it is dead-lettered, milliseconds. Default 24 h. */
  outboxHorizonMs: number;
  /**
   * Where velocity counters and event history live (RISKGATE_FEATURE_STORE): `memory` (this
   * process; the primary's with RISKGATE_WORKERS > 1) or `redis` (shared by replicas). Default:
   * memory.
   */
  featureStore: { kind: 'memory' } | { kind: 'redis'; url: string };
  /**
   * Where the state lives, control state and decisions (RISKGATE_DATABASE): `sqlite` (default;
   * `control.sqlite` and `decisions.sqlite` in the state dir, shared by the workers of one host:
   * src/database/state-files.ts), `memory` (this process only, lost with it: tests), or a
   * `postgres://` URL (every replica writes to one store, both kinds in the one database).
   */
  database: StateTarget;
  /**
   * The decision store (src/decision-store/): every decision, its labels and its actions' outcomes
   * in the database, for the console and `GET /decisions`. `enabled` (RISKGATE_DECISION_STORE, on
   * by default); `bufferRecords` waiting before new ones are dropped (RISKGATE_DECISION_STORE_BUFFER,
   * default 20 000); kept `retentionDays` (RISKGATE_DECISION_RETENTION_DAYS, default 30) and at
   * most `maxBytes` of logged lines (RISKGATE_DECISION_STORE_MAX_MB, default 1024 MiB).
   */
  decisionStore: { enabled: boolean; bufferRecords: number; retentionDays: number; maxBytes: number };
  /** The vendor's APIs; undefined means sandbox mode (no upstream configured). */
  upstream: UpstreamConfig | undefined;
  /** Signed webhooks (docs/webhooks.md); undefined when RISKGATE_WEBHOOK_URLS is not set. */
  webhooks: WebhookConfig | undefined;
  /** Port of the embedded sandbox in sandbox mode. Default 4010. */
  sandboxPort: number;
  /** Where riskgate keeps state across restarts (the Log API checkpoint). Default `.riskgate/`. */
  stateDir: string;
  /**
   * Most open connections to the Trust Signals origin. Default 128. A connection carries one call
   * at a time, so this caps calls in flight: at 1000 decisions/s, ~2.5 calls each and the vendor's
   * mean of ~18 ms (p50 15, p99 60), about 45 are open; fewer and calls queue for a socket.
   */
  signalsConnections: number;
  /** Most open connections to the Admin API origin (reads and actions). Default 64. */
  adminConnections: number;
  /**
   * Longest a remote-access-tool lookup waits for companions while a batch is in flight, ms.
   * Default 1 (0 to 50). Longer windows send fewer, fuller batch POSTs (vendor calls and rate-limit
   * budget) at the price of that wait on the signal's latency: bench/RESULTS.md has the curve.
   */
  ratBatchWindowMs: number;
  /** Lifetime of a cached remote-access-tool answer, ms; 0 turns the cache off. Default 5000. */
  ratCacheMs: number;
  /** Admission control: most decisions in flight per process before new ones are shed. Default 1000. */
  maxInFlight: number;
  /**
   * Admission control: event-loop delay (queueing before a handler runs) past which new requests
   * are shed while riskgate has a queue of its own (8 or more in flight; the host's noise alone
   * never sheds), ms. Default 100; 0 sheds only what queued past the whole deadline.
   */
  maxEventLoopDelayMs: number;
  /**
   * Processes serving the port (node:cluster). Default: {@link defaultWorkers} (1 on 2 CPUs or
   * fewer, else one per available CPU); 1 runs riskgate in this process alone (containers: scale pods).
   */
  workers: number;
  /** How the Admin user is checked against the account before riskgate acts. Default `username`. */
  subjectBinding: 'username' | 'off';
  /**
   * Most open client connections. Past it a new one closes the longest idle connection, or is
   * refused at once when none is idle (src/http/accept-sockets.ts). Default 8192.
   */
  maxConnections: number;
  /**
   * Listening sockets on the port (SO_REUSEPORT, Linux): how many new connections one busy turn of
   * the event loop can accept (src/http/accept-sockets.ts). Default 64; 1 is a plain listen. With
   * RISKGATE_WORKERS > 1, each worker binds that many of its own (the port shared by SO_REUSEPORT).
   */
  acceptSockets: number;
  /**
   * A client must send its request headers within this long, and a connection that sends nothing
   * is closed after it, milliseconds. Default 5000.
   */
  headersTimeoutMs: number;
  /** A client must send its whole request within this long, milliseconds. Default 10 000. */
  requestTimeoutMs: number;
}

/** Where riskgate's events go and how they are signed (RISKGATE_WEBHOOK_*, docs/webhooks.md). */
export interface WebhookConfig {
  /** Receivers, each sent every event (may carry credentials: never logged). */
  urls: string[];
  /**
   * Signing secrets, the first the newest: each delivery carries one `v1,` signature per secret
   * (rotation). A `whsec_<base64>` secret's key is its decoded bytes (Standard Webhooks), any
   * other secret's its UTF-8 bytes.
   */
  secrets: string[];
  /** The event types sent. Default: lock-outs and list changes. */
  events: RiskgateEventType[];
  /** Timeout of one delivery attempt, milliseconds. Default 5000. */
  timeoutMs: number;
  /**
   * How long one delivery is retried before it is dead-lettered, milliseconds
   * (RISKGATE_WEBHOOK_RETRY_HORIZON_SECONDS; default 3 600 000, one hour), never past the outbox's
   * own horizon. A receiver's events of one user or list go out in order, so this is also the
   * longest one event it refuses holds the others back. Undefined: the outbox's horizon alone.
   */
  retryHorizonMs?: number | undefined;
}

/** Variables that may also be given as `<NAME>_FILE` (a path whose content is the value). */
export const SECRET_VARIABLES = [
  'RISKGATE_API_KEYS',
  // A Redis URL may carry a password.
  'RISKGATE_FEATURE_STORE',
  // A PostgreSQL URL may carry a password.
  'RISKGATE_DATABASE',
  'RISKGATE_DECISION_LOG_HASH_KEY',
  'RISKGATE_OPS_KEYS',
  'RISKGATE_CONSOLE_SESSION_KEY',
  'RISKGATE_CLIENT_SECRET',
  'RISKGATE_ADMIN_API_KEY',
  'RISKGATE_LOG_API_KEY',
  'RISKGATE_CALLBACK_SIGNATURE_KEY',
  // A receiver's URL may carry a password or a token.
  'RISKGATE_WEBHOOK_URLS',
  'RISKGATE_WEBHOOK_SECRET',
] as const;

/** Upstream variables: any of them set without RISKGATE_SIGNALS_URL is a half-configured vendor. */
const UPSTREAM_VARIABLES = [
  'RISKGATE_SERVICE_ID',
  'RISKGATE_AUTH_URL',
  'RISKGATE_CLIENT_ID',
  'RISKGATE_CLIENT_SECRET',
  'RISKGATE_SIGNALS_AUDIENCE',
  'RISKGATE_SIGNALS_IDP',
  'RISKGATE_ADMIN_URL',
  'RISKGATE_ADMIN_API_KEY',
  'RISKGATE_LOGS_URL',
  'RISKGATE_LOG_API_KEY',
] as const;

/**
 * A numeric variable, in plain words: unset means `fallback`; set but empty (`RISKGATE_PORT=` in an
 * env file) is an error rather than a silent 0; anything else must be a number within bounds. The
 * value is echoed in the message: only non-secret variables are numeric.
 */
function numberVariable(options: { min: number; max: number; fallback: number; whole?: boolean }) {
  const whole = options.whole ?? true;
  const range = `${whole ? 'a whole number' : 'a number'} from ${options.min} to ${options.max}`;
  return z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined) return options.fallback;
      const text = raw.trim();
      if (text === '') {
        ctx.addIssue({
          code: 'custom',
          message: `is set but empty: unset it for the default (${options.fallback}), or give ${range}`,
        });
        return z.NEVER;
      }
      const value = Number(text);
      const shaped = whole ? /^\d+$/.test(text) : /^\d+(\.\d+)?$/.test(text);
      if (!shaped || value < options.min || value > options.max) {
        ctx.addIssue({ code: 'custom', message: `must be ${range}, not "${text.slice(0, 40)}"` });
        return z.NEVER;
      }
      return value;
    });
}

/** A listening port; 0 asks the system for a free one (tests). */
/**
 * RISKGATE_WORKERS when unset, for `cpus` available CPUs (`os.availableParallelism()`): one process
 * on 2 CPUs or fewer, where a second worker and the primary relaying for it cost more CPU per
 * decision than they add (docs/operations.md, "Workers"); one per CPU above that.
 */
export function defaultWorkers(cpus: number): number {
  return cpus <= 2 ? 1 : cpus;
}

const port = (fallback: number) => numberVariable({ min: 0, max: 65535, fallback });
/** A comment after a value in an env file becomes part of it under docker --env-file: refused, not parsed as a #fragment. */
const NO_COMMENT =
  'must not contain spaces or a # (a comment after a value in an env file becomes part of the value)';
const httpUrl = z
  .string()
  .refine((u) => !/[\s#]/.test(u), NO_COMMENT)
  .pipe(z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }))
  .transform((u) => u.replace(/\/+$/, ''));
const nonEmpty = z.string().trim().min(1, 'must not be empty');
const optionalEmptyAsUndefined = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (v === '' ? undefined : v), schema.optional());

/** A comma-separated list of bearer keys. */
const keyList = z
  .string()
  .transform((s) =>
    s
      .split(',')
      .map((k) => k.trim())
      .filter((k) => k.length > 0),
  )
  .pipe(
    z
      .array(
        z
          .string()
          .min(16, 'each key must be at least 16 characters')
          .refine((k) => !/[\s#]/.test(k), NO_COMMENT),
      )
      .min(1, 'lists no key'),
  );

/**
 * RISKGATE_OPS_KEYS: comma-separated `name:role:key` entries or plain keys (an `admin` named by its
 * key id; src/operators/operator-keys.ts). Kept as entries; every message names the operator, never the key.
 */
const opsKeyList = z
  .string()
  .transform((s) =>
    s
      .split(',')
      .map((k) => k.trim())
      .filter((k) => k.length > 0),
  )
  .transform((entries, ctx) => {
    if (entries.length === 0) {
      ctx.addIssue({ code: 'custom', message: 'lists no key' });
      return z.NEVER;
    }
    if (entries.some((k) => /[\s#]/.test(k))) {
      ctx.addIssue({ code: 'custom', message: NO_COMMENT });
      return z.NEVER;
    }
    const parsed = parseOperatorKeyEntries(entries);
    if (typeof parsed === 'string') {
      ctx.addIssue({ code: 'custom', message: parsed });
      return z.NEVER;
    }
    return entries;
  });

const commaList = (s: string) =>
  s
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k.length > 0);

/** RISKGATE_SSO_OPERATORS: `identity:role,...` (an identity as the proxy sends it, an email). */
const ssoOperators = z.string().transform((text, ctx) => {
  const operators = new Map<string, OperatorRole>();
  for (const entry of commaList(text)) {
    const colon = entry.lastIndexOf(':');
    const identity = entry.slice(0, Math.max(colon, 0)).toLowerCase();
    const role = entry.slice(colon + 1);
    if (colon < 0 || !(OPERATOR_ROLES as readonly string[]).includes(role)) {
      ctx.addIssue({
        code: 'custom',
        message: `entries are identity:role with a role of ${OPERATOR_ROLES.join(', ')} (not ${JSON.stringify(entry.slice(0, 80))})`,
      });
      return z.NEVER;
    }
    if (!OPERATOR_NAME.test(identity) || operators.has(identity)) {
      ctx.addIssue({
        code: 'custom',
        message: operators.has(identity)
          ? `names ${identity} twice`
          : `names ${JSON.stringify(identity.slice(0, 80))}: an identity must be 1-64 letters, digits, ".", "_", "-" or "@"`,
      });
      return z.NEVER;
    }
    operators.set(identity, role as OperatorRole);
  }
  if (operators.size === 0) {
    ctx.addIssue({ code: 'custom', message: 'lists no operator' });
    return z.NEVER;
  }
  return operators;
});

/** Headers a proxy's identity must never be read from: riskgate or the proxy give them other meanings. */
const RESERVED_HEADERS = [
  'authorization',
  'cookie',
  'host',
  'x-forwarded-for',
  'content-type',
  'content-length',
];

/** The event types a webhook may carry (src/events/riskgate-event.ts). */
const WEBHOOK_EVENT_TYPES: readonly [RiskgateEventType, ...RiskgateEventType[]] = [
  'lockout.created',
  'lockout.ended',
  'list.entry_added',
  'list.entry_removed',
  'decision.denied',
  'decision.challenged',
];

/** A comma-separated list of `item`s, none empty. */
const commaListOf = <T extends z.ZodType<unknown, string>>(item: T, none: string) =>
  z
    .string()
    .transform((s) =>
      s
        .split(',')
        .map((k) => k.trim())
        .filter((k) => k.length > 0),
    )
    .pipe(z.array(item).min(1, none));

const baseSchema = z.object({
  RISKGATE_PORT: port(8080),
  SANDBOX_PORT: port(4010),
  RISKGATE_API_KEYS: optionalEmptyAsUndefined(keyList),
  RISKGATE_HOST: optionalEmptyAsUndefined(nonEmpty),
  RISKGATE_OPS_PORT: optionalEmptyAsUndefined(
    z
      .string()
      .trim()
      .regex(/^\d+$/, 'must be a whole number from 0 to 65535')
      .transform(Number)
      .pipe(z.number().max(65535, 'must be a whole number from 0 to 65535')),
  ),
  RISKGATE_OPS_HOST: optionalEmptyAsUndefined(nonEmpty),
  RISKGATE_OPS_KEYS: optionalEmptyAsUndefined(opsKeyList),
  RISKGATE_TRUSTED_PROXIES: optionalEmptyAsUndefined(
    z.string().transform((text, ctx) => {
      const proxies = parseTrustedProxies(commaList(text));
      if (typeof proxies === 'string' || proxies.length === 0) {
        ctx.addIssue({ code: 'custom', message: typeof proxies === 'string' ? proxies : 'lists no address' });
        return z.NEVER;
      }
      return proxies;
    }),
  ),
  RISKGATE_TRUSTED_IDENTITY_HEADER: optionalEmptyAsUndefined(
    z
      .string()
      .trim()
      .toLowerCase()
      .regex(/^[a-z0-9-]{1,100}$/, 'must be a header name (letters, digits and -), e.g. X-Forwarded-Email')
      .refine(
        (h) => !RESERVED_HEADERS.includes(h),
        'must not be a header riskgate or the proxy reads otherwise',
      ),
  ),
  RISKGATE_SSO_OPERATORS: optionalEmptyAsUndefined(ssoOperators),
  RISKGATE_FEEDBACK_RATE: numberVariable({ min: 0.01, max: 100_000, fallback: 10, whole: false }),
  RISKGATE_FEEDBACK_BURST: numberVariable({ min: 1, max: 100_000, fallback: 50 }),
  RISKGATE_FEEDBACK_DECISIONS: numberVariable({ min: 1, max: 10_000_000, fallback: 100_000 }),
  RISKGATE_CONSOLE_SESSION_KEY: optionalEmptyAsUndefined(
    z.string().min(32, 'must be at least 32 characters'),
  ),
  RISKGATE_CONSOLE_SESSION_MINUTES: numberVariable({ min: 1, max: 10_080, fallback: 480 }),
  RISKGATE_CONSOLE_SECURE_COOKIE: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('false')
    .transform((v) => v === 'true'),
  RISKGATE_POLICY_PATH: nonEmpty.default('policies/'),
  RISKGATE_SHADOW_POLICY_PATH: optionalEmptyAsUndefined(nonEmpty),
  RISKGATE_DEADLINE_MS: numberVariable({ min: 10, max: 60_000, fallback: 300 }),
  RISKGATE_READY_GRACE_MS: numberVariable({ min: 0, max: 3_600_000, fallback: 10_000 }),
  RISKGATE_DECISION_LOG: nonEmpty.default('stdout'),
  RISKGATE_DECISION_LOG_REDACT: z
    .string()
    .default(DEFAULT_REDACTION)
    .transform((text, ctx) => {
      const rules = parseRedaction(text);
      if (typeof rules === 'string') {
        ctx.addIssue({ code: 'custom', message: rules });
        return z.NEVER;
      }
      return rules;
    }),
  RISKGATE_DECISION_LOG_HASH_KEY: optionalEmptyAsUndefined(
    z.string().min(16, 'must be at least 16 characters'),
  ),
  RISKGATE_OUTBOX: z
    .string()
    .trim()
    .default('database')
    // `sqlite` (the former default, its own file) now means the database: the file is drained into
    // it at the first start (docs/operations.md). The Redis outbox is gone: Redis keeps counters only.
    .refine((v) => v === 'database' || v === 'sqlite' || v === 'memory', {
      message:
        'must be database or memory (the outbox lives in RISKGATE_DATABASE; Redis keeps only the counters: RISKGATE_FEATURE_STORE)',
    }),
  RISKGATE_DATABASE: z
    .string()
    .trim()
    .default('sqlite')
    .refine((v) => v === 'sqlite' || v === 'memory' || /^postgres(ql)?:\/\/\S+$/.test(v), {
      message: 'must be sqlite, memory or a postgres:// URL',
    }),
  RISKGATE_FEATURE_STORE: optionalEmptyAsUndefined(
    z
      .string()
      .trim()
      .refine((v) => v === 'memory' || /^rediss?:\/\/\S+$/.test(v), {
        message: 'must be memory or a redis:// URL',
      }),
  ),
  RISKGATE_DECISION_STORE: z.enum(['on', 'off'], { error: 'must be on or off' }).default('on'),
  RISKGATE_DECISION_STORE_BUFFER: numberVariable({ min: 100, max: 1_000_000, fallback: 20_000 }),
  RISKGATE_DECISION_RETENTION_DAYS: numberVariable({ min: 1, max: 3650, fallback: 30 }),
  RISKGATE_DECISION_STORE_MAX_MB: numberVariable({ min: 1, max: 1_048_576, fallback: 1024 }),
  RISKGATE_OUTBOX_HORIZON_SECONDS: numberVariable({ min: 1, max: 30 * 24 * 3600, fallback: 24 * 3600 }),
  RISKGATE_DECISION_LOG_ON_FAILURE: z
    .enum(['answer', 'refuse'], { error: 'must be answer or refuse' })
    .default('answer'),
  RISKGATE_STATE_DIR: nonEmpty.default('.riskgate/'),
  RISKGATE_SIGNALS_CONNECTIONS: numberVariable({ min: 1, max: 4096, fallback: 128 }),
  RISKGATE_ADMIN_CONNECTIONS: numberVariable({ min: 1, max: 4096, fallback: 64 }),
  RISKGATE_RAT_BATCH_WINDOW_MS: numberVariable({
    min: 0,
    max: MAX_WINDOW_MS,
    fallback: DEFAULT_WINDOW_MS,
    whole: false,
  }),
  RISKGATE_RAT_CACHE_MS: numberVariable({ min: 0, max: 3_600_000, fallback: DEFAULT_RAT_CACHE_TTL_MS }),
  RISKGATE_MAX_IN_FLIGHT: numberVariable({ min: 1, max: 100_000, fallback: 1000 }),
  RISKGATE_MAX_EVENT_LOOP_DELAY_MS: numberVariable({ min: 0, max: 60_000, fallback: 100 }),
  RISKGATE_WORKERS: numberVariable({ min: 1, max: 256, fallback: defaultWorkers(availableParallelism()) }),
  RISKGATE_MAX_CONNECTIONS: numberVariable({ min: 16, max: 1_000_000, fallback: 8192 }),
  RISKGATE_ACCEPT_SOCKETS: numberVariable({ min: 1, max: 256, fallback: 64 }),
  RISKGATE_HEADERS_TIMEOUT_MS: numberVariable({ min: 100, max: 120_000, fallback: 5000 }),
  RISKGATE_REQUEST_TIMEOUT_MS: numberVariable({ min: 100, max: 600_000, fallback: 10_000 }),
  RISKGATE_SUBJECT_BINDING: z
    .enum(['username', 'off'], { error: 'must be username or off' })
    .default('username'),
  RISKGATE_SIGNALS_URL: optionalEmptyAsUndefined(httpUrl),
  ...webhookVariables(),
});

const upstreamSchema = z.object({
  RISKGATE_SERVICE_ID: serviceIdSchema,
  RISKGATE_SIGNALS_URL: httpUrl,
  RISKGATE_AUTH_URL: httpUrl,
  RISKGATE_CLIENT_ID: nonEmpty,
  RISKGATE_CLIENT_SECRET: nonEmpty,
  RISKGATE_SIGNALS_AUDIENCE: nonEmpty,
  RISKGATE_SIGNALS_IDP: optionalEmptyAsUndefined(
    z.string().regex(/^[A-Za-z0-9.-]+$/, 'must be a host-like name'),
  ),
  RISKGATE_ADMIN_URL: httpUrl,
  RISKGATE_ADMIN_API_KEY: nonEmpty,
  RISKGATE_LOGS_URL: optionalEmptyAsUndefined(httpUrl),
  RISKGATE_LOG_API_KEY: optionalEmptyAsUndefined(nonEmpty),
  RISKGATE_CALLBACK_SIGNATURE_KEY: optionalEmptyAsUndefined(nonEmpty),
});

function decisionStoreOf(b: z.output<typeof baseSchema>): RiskgateConfig['decisionStore'] {
  return {
    enabled: b.RISKGATE_DECISION_STORE === 'on',
    bufferRecords: b.RISKGATE_DECISION_STORE_BUFFER,
    retentionDays: b.RISKGATE_DECISION_RETENTION_DAYS,
    maxBytes: b.RISKGATE_DECISION_STORE_MAX_MB * 1024 * 1024,
  };
}

/**
 * Every variable `loadConfig` reads (besides `<NAME>_FILE` for secrets). riskgate.env.example and
 * the README's configuration table list exactly these (test/config-documentation.test.ts).
 */
export const CONFIG_VARIABLES: readonly string[] = [
  ...new Set([...Object.keys(baseSchema.shape), ...Object.keys(upstreamSchema.shape)]),
];

function configError(message: string): RiskgateError {
  return new RiskgateError(ErrorCode.INVALID_CONFIG, message);
}

/**
 * The first issue as `<VARIABLE> <what is wrong>`. A required variable (`required`: the schema has
 * no default for it) that is unset, or set but empty as a copied env file leaves it, is "required":
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

function parseDecisionLog(value: string): DecisionLogTarget {
  if (value === 'stdout') return { kind: 'stdout' };
  if (value === 'off') return { kind: 'off' };
  return { kind: 'file', path: value };
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
  const base = baseSchema.safeParse(resolved);
  if (!base.success) throw configError(firstIssue(base.error, resolved));
  const b = base.data;

  const upstream = upstreamOf(b, resolved);

  if (
    b.RISKGATE_DECISION_LOG_REDACT.some((r) => r.mode === 'hash') &&
    b.RISKGATE_DECISION_LOG_HASH_KEY === undefined
  ) {
    throw configError(
      'RISKGATE_DECISION_LOG_HASH_KEY is required when RISKGATE_DECISION_LOG_REDACT hashes a field',
    );
  }
  const opsHost = checkOperatorSurface(b);
  const featureStore = featureStoreOf(b.RISKGATE_FEATURE_STORE);
  const database: StateTarget =
    b.RISKGATE_DATABASE === 'sqlite'
      ? { kind: 'sqlite', dir: b.RISKGATE_STATE_DIR }
      : b.RISKGATE_DATABASE === 'memory'
        ? { kind: 'memory' }
        : { kind: 'postgres', url: b.RISKGATE_DATABASE };
  checkStateSharing(b, featureStore, database);
  return {
    port: b.RISKGATE_PORT,
    host: b.RISKGATE_HOST ?? (upstream === undefined ? '127.0.0.1' : '0.0.0.0'),
    opsPort: b.RISKGATE_OPS_PORT,
    opsHost,
    opsKeys: b.RISKGATE_OPS_KEYS,
    trustedProxy:
      b.RISKGATE_TRUSTED_PROXIES === undefined
        ? undefined
        : {
            proxies: b.RISKGATE_TRUSTED_PROXIES,
            identityHeader: b.RISKGATE_TRUSTED_IDENTITY_HEADER,
            operators: b.RISKGATE_SSO_OPERATORS,
          },
    apiKeys: b.RISKGATE_API_KEYS,
    feedback: {
      ratePerSecond: b.RISKGATE_FEEDBACK_RATE,
      burst: b.RISKGATE_FEEDBACK_BURST,
      maxDecisions: b.RISKGATE_FEEDBACK_DECISIONS,
    },
    console: {
      sessionKey: b.RISKGATE_CONSOLE_SESSION_KEY,
      sessionMinutes: b.RISKGATE_CONSOLE_SESSION_MINUTES,
      secureCookie: b.RISKGATE_CONSOLE_SECURE_COOKIE,
    },
    policyPath: b.RISKGATE_POLICY_PATH,
    shadowPolicyPath: b.RISKGATE_SHADOW_POLICY_PATH,
    deadlineMs: b.RISKGATE_DEADLINE_MS,
    readyGraceMs: b.RISKGATE_READY_GRACE_MS,
    decisionLog: parseDecisionLog(b.RISKGATE_DECISION_LOG),
    decisionLogRedaction: b.RISKGATE_DECISION_LOG_REDACT,
    decisionLogHashKey: b.RISKGATE_DECISION_LOG_HASH_KEY,
    decisionLogOnFailure: b.RISKGATE_DECISION_LOG_ON_FAILURE,
    outbox: b.RISKGATE_OUTBOX === 'memory' ? { kind: 'memory' } : { kind: 'database' },
    outboxHorizonMs: b.RISKGATE_OUTBOX_HORIZON_SECONDS * 1000,
    featureStore,
    database,
    decisionStore: decisionStoreOf(b),
    upstream,
    webhooks: webhookConfigOf(b),
    sandboxPort: b.SANDBOX_PORT,
    stateDir: b.RISKGATE_STATE_DIR,
    signalsConnections: b.RISKGATE_SIGNALS_CONNECTIONS,
    adminConnections: b.RISKGATE_ADMIN_CONNECTIONS,
    ratBatchWindowMs: b.RISKGATE_RAT_BATCH_WINDOW_MS,
    ratCacheMs: b.RISKGATE_RAT_CACHE_MS,
    maxInFlight: b.RISKGATE_MAX_IN_FLIGHT,
    maxEventLoopDelayMs: b.RISKGATE_MAX_EVENT_LOOP_DELAY_MS,
    workers: b.RISKGATE_WORKERS,
    subjectBinding: b.RISKGATE_SUBJECT_BINDING,
    maxConnections: b.RISKGATE_MAX_CONNECTIONS,
    acceptSockets: b.RISKGATE_ACCEPT_SOCKETS,
    headersTimeoutMs: Math.min(b.RISKGATE_HEADERS_TIMEOUT_MS, b.RISKGATE_REQUEST_TIMEOUT_MS),
    requestTimeoutMs: b.RISKGATE_REQUEST_TIMEOUT_MS,
  };
}

/** The vendor's settings (undefined in sandbox mode), checked together. */
function upstreamOf(
  b: z.output<typeof baseSchema>,
  resolved: Readonly<Record<string, string | undefined>>,
): UpstreamConfig | undefined {
  if (b.RISKGATE_SIGNALS_URL === undefined) {
    const stray = UPSTREAM_VARIABLES.find((name) => resolved[name] !== undefined && resolved[name] !== '');
    if (stray) throw configError(`RISKGATE_SIGNALS_URL is required when ${stray} is set`);
    return undefined;
  }
  const u = upstreamSchema.safeParse(resolved);
  if (!u.success) throw configError(firstIssue(u.error, resolved, true));
  if (b.RISKGATE_API_KEYS === undefined) {
    throw configError('RISKGATE_API_KEYS is required when an upstream is configured');
  }
  const d = u.data;
  const upstream: UpstreamConfig = {
    serviceId: d.RISKGATE_SERVICE_ID,
    signalsUrl: d.RISKGATE_SIGNALS_URL,
    authUrl: d.RISKGATE_AUTH_URL,
    clientId: d.RISKGATE_CLIENT_ID,
    clientSecret: d.RISKGATE_CLIENT_SECRET,
    signalsAudience: d.RISKGATE_SIGNALS_AUDIENCE,
    signalsIdp: d.RISKGATE_SIGNALS_IDP,
    adminUrl: d.RISKGATE_ADMIN_URL,
    adminApiKey: d.RISKGATE_ADMIN_API_KEY,
    logsUrl: d.RISKGATE_LOGS_URL,
    logApiKey: d.RISKGATE_LOG_API_KEY,
    callbackSignatureKey: d.RISKGATE_CALLBACK_SIGNATURE_KEY,
  };
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

/** The operator surface's settings, checked together: the ops host. */
function checkOperatorSurface(b: z.output<typeof baseSchema>): string {
  if (
    b.RISKGATE_OPS_PORT !== undefined &&
    b.RISKGATE_OPS_PORT !== 0 &&
    b.RISKGATE_OPS_PORT === b.RISKGATE_PORT
  ) {
    throw configError(
      'RISKGATE_OPS_PORT must differ from RISKGATE_PORT (unset it to serve both on one port)',
    );
  }
  const opsHost = b.RISKGATE_OPS_HOST ?? '127.0.0.1';
  if (b.RISKGATE_OPS_PORT !== undefined && b.RISKGATE_OPS_KEYS === undefined && !isLoopbackHost(opsHost)) {
    throw configError(
      `RISKGATE_OPS_KEYS is required when the ops port listens beyond this machine (RISKGATE_OPS_HOST=${opsHost}): set RISKGATE_OPS_KEYS, or unset RISKGATE_OPS_HOST to listen on 127.0.0.1`,
    );
  }
  const identityHeader = b.RISKGATE_TRUSTED_IDENTITY_HEADER;
  if (identityHeader !== undefined && b.RISKGATE_TRUSTED_PROXIES === undefined) {
    throw configError(
      'RISKGATE_TRUSTED_PROXIES is required when RISKGATE_TRUSTED_IDENTITY_HEADER is set: the identity header is believed only from those addresses (anyone else reaching the port could write any name into it)',
    );
  }
  if ((identityHeader === undefined) !== (b.RISKGATE_SSO_OPERATORS === undefined)) {
    throw configError(
      identityHeader === undefined
        ? 'RISKGATE_TRUSTED_IDENTITY_HEADER is required when RISKGATE_SSO_OPERATORS is set'
        : 'RISKGATE_SSO_OPERATORS is required when RISKGATE_TRUSTED_IDENTITY_HEADER is set (identity:role,...: who may operate, and as what)',
    );
  }
  return opsHost;
}

/**
 * RISKGATE_WEBHOOK_*: receivers, secrets, events, timeout. A URL's or a secret's value is never in
 * a message (both may be given as `_FILE`).
 */
function webhookVariables() {
  return {
    RISKGATE_WEBHOOK_URLS: optionalEmptyAsUndefined(
      commaListOf(
        z.string().refine((u) => !/[\s#]/.test(u) && /^https?:\/\/[^/]/.test(u) && URL.canParse(u), {
          error: 'must list http(s) URLs (comma-separated, no spaces or #)',
        }),
        'lists no URL',
      ),
    ),
    RISKGATE_WEBHOOK_SECRET: optionalEmptyAsUndefined(
      commaListOf(
        z
          .string()
          .min(32, 'each secret must be at least 32 characters')
          .refine((k) => !/[\s#]/.test(k), NO_COMMENT)
          .refine((k) => !k.startsWith('whsec_') || Buffer.from(k.slice(6), 'base64').length >= 24, {
            error: 'a whsec_ secret must hold at least 24 bytes of base64',
          }),
        'lists no secret',
      ),
    ),
    RISKGATE_WEBHOOK_EVENTS: commaListOf(
      z.enum(WEBHOOK_EVENT_TYPES, { error: `must list event types of: ${WEBHOOK_EVENT_TYPES.join(', ')}` }),
      'lists no event type',
    ).default(['lockout.created', 'lockout.ended', 'list.entry_added', 'list.entry_removed']),
    RISKGATE_WEBHOOK_TIMEOUT_MS: numberVariable({ min: 100, max: 30_000, fallback: 5000 }),
    RISKGATE_WEBHOOK_RETRY_HORIZON_SECONDS: numberVariable({ min: 1, max: 30 * 24 * 3600, fallback: 3600 }),
  };
}

function webhookConfigOf(b: {
  RISKGATE_WEBHOOK_URLS?: string[] | undefined;
  RISKGATE_WEBHOOK_SECRET?: string[] | undefined;
  RISKGATE_WEBHOOK_EVENTS: RiskgateEventType[];
  RISKGATE_WEBHOOK_TIMEOUT_MS: number;
  RISKGATE_WEBHOOK_RETRY_HORIZON_SECONDS: number;
}): WebhookConfig | undefined {
  if (b.RISKGATE_WEBHOOK_URLS === undefined) {
    if (b.RISKGATE_WEBHOOK_SECRET !== undefined) {
      throw configError('RISKGATE_WEBHOOK_URLS is required when RISKGATE_WEBHOOK_SECRET is set');
    }
    return undefined;
  }
  if (b.RISKGATE_WEBHOOK_SECRET === undefined) {
    throw configError('RISKGATE_WEBHOOK_SECRET is required when RISKGATE_WEBHOOK_URLS is set');
  }
  return {
    urls: b.RISKGATE_WEBHOOK_URLS,
    secrets: b.RISKGATE_WEBHOOK_SECRET,
    events: [...new Set(b.RISKGATE_WEBHOOK_EVENTS)],
    timeoutMs: b.RISKGATE_WEBHOOK_TIMEOUT_MS,
    retryHorizonMs: b.RISKGATE_WEBHOOK_RETRY_HORIZON_SECONDS * 1000,
  };
}

/**
 * Replicated means shared: state is either every replica's (PostgreSQL and Redis) or this process's
 * own (SQLite under the state dir, memory), never some of each. Counters and the Log API follower's
 * lease on a shared Redis with an embedded database made replicas that count one burst together
 * while each denies from lists, lock-outs and an audit trail of its own (a list entry added on one
 * replica allowed on the next); a shared database with counters in memory made each replica count
 * its share of a burst, never the whole. A single riskgate on PostgreSQL with counters in memory is
 * legitimate, so it is allowed when said: RISKGATE_FEATURE_STORE=memory. Both variables are named;
 * neither value is (a URL may carry a password).
 */
function checkStateSharing(
  b: z.output<typeof baseSchema>,
  featureStore: RiskgateConfig['featureStore'],
  database: StateTarget,
): void {
  if (featureStore.kind === 'redis' && database.kind !== 'postgres') {
    throw configError(
      `RISKGATE_FEATURE_STORE keeps velocity counters and the Log API follower's lease on Redis, shared by replicas, but RISKGATE_DATABASE (${database.kind}) keeps lists, lock-outs, the outbox and the audit trail in this process alone: set RISKGATE_DATABASE to the postgres:// URL every replica uses, or RISKGATE_FEATURE_STORE=memory for one riskgate on its own`,
    );
  }
  if (
    database.kind === 'postgres' &&
    featureStore.kind === 'memory' &&
    b.RISKGATE_FEATURE_STORE === undefined
  ) {
    throw configError(
      'RISKGATE_DATABASE is PostgreSQL, shared by replicas, but RISKGATE_FEATURE_STORE is unset, which keeps velocity counters and the Log API history in this process alone (each replica would count its share of a burst): set RISKGATE_FEATURE_STORE to the redis:// URL every replica uses, or RISKGATE_FEATURE_STORE=memory for one riskgate on its own',
    );
  }
}

/** RISKGATE_FEATURE_STORE (default memory). */
function featureStoreOf(setting: string | undefined): { kind: 'memory' } | { kind: 'redis'; url: string } {
  const value = setting ?? 'memory';
  return value === 'memory' ? { kind: 'memory' } : { kind: 'redis', url: value };
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
