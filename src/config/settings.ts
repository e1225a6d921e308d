import { availableParallelism } from 'node:os';
import { z } from 'zod';
import type { RiskgateEventType } from '../events/riskgate-event.ts';
import { serviceIdSchema } from '../signals/identifiers.ts';
import { DEFAULT_WINDOW_MS, MAX_WINDOW_MS } from '../signals/rat-batcher.ts';
import { DEFAULT_RAT_CACHE_TTL_MS } from '../signals/signals-client.ts';
import { DEFAULT_REDACTION } from './redaction-rules.ts';
import {
  commaListOf,
  httpUrl,
  identityHeader,
  keyList,
  NO_COMMENT,
  nonEmpty,
  num,
  numberSchema,
  oneOf,
  opsKeyList,
  optional,
  port,
  redaction,
  ssoOperators,
  text,
  trustedProxies,
} from './setting-schemas.ts';

/**
 * Every setting riskgate reads, declared once: one entry per environment variable. The parsed
 * configuration's type, the parser (src/config/riskgate-config.ts), the README's configuration
 * table and riskgate.env.example (`npm run docs:settings`, src/config/settings-documentation.ts)
 * all come from this table; adding a setting is adding an entry (and using its field).
 */

/**
 * A policy version's backtest bounds by default (RISKGATE_BACKTEST_*; src/policy-evidence/ and
 * src/policy-versions/ read them here): the window when a proposal names none, and its longest,
 * hours; decisions replayed at most; the time limit, seconds.
 */
export const DEFAULT_BACKTEST_WINDOW_HOURS = 24;
export const MAX_BACKTEST_WINDOW_HOURS = 744;
export const DEFAULT_BACKTEST_MAX_DECISIONS = 1_000_000;
export const DEFAULT_BACKTEST_TIME_LIMIT_SECONDS = 120;

/** The sections of riskgate.env.example and of the README table, in their order. */
export const SETTING_GROUPS = {
  service: 'Service',
  security: 'Security',
  admission: 'Admission control (overload)',
  state: 'State and actions (the outbox)',
  webhooks: 'Signed webhooks (docs/webhooks.md)',
  feedback: 'Feedback (POST /feedback)',
  askUser: '"Was this you?" links (docs/ask-user.md)',
  console: 'Console (/console on the operator surface)',
  policy: 'Policy',
  decisionLog: 'Decision log',
  signals: 'The vendor: Trust Signals and its token',
  admin: 'The vendor: Admin API',
  logs: 'The vendor: Log API',
  tracing: 'Tracing (OpenTelemetry, opt-in)',
  development: 'Development only',
} as const;

export type SettingGroup = keyof typeof SETTING_GROUPS;

export interface Setting {
  group: SettingGroup;
  /** The configuration field it fills: `port`, or `section.field` (`feedback.burst`). */
  fills: string;
  /** Parses the variable's text (undefined when unset) into the field's value. */
  schema: z.ZodType;
  /** The default as an env file writes it; undefined: none, or `defaultText` says. */
  default?: string | undefined;
  /** The default in words, when it is not one value (`sandbox: generated`). Markdown. */
  defaultText?: string;
  /** Unit of a number: milliseconds, seconds, MiB. */
  unit?: string;
  /** One line: riskgate.env.example's comment, and the README's unless `details` says more. */
  doc: string;
  /** The README's description (Markdown), when it says more than `doc`. */
  details?: string;
  /** May carry a credential: never logged or echoed, and may be given as `<NAME>_FILE`. */
  secret?: true;
  /**
   * Part of the vendor's configuration (`upstream`), read only with RISKGATE_SIGNALS_URL set:
   * `required` then, or `optional`. Set without it, riskgate refuses a half-configured vendor.
   */
  vendor?: 'required' | 'optional';
  /** Shown uncommented, empty, in riskgate.env.example: a value every deployment fills in. */
  fillIn?: true;
}

const defineSettings = <const T extends Record<string, Setting>>(settings: T): T => settings;

/** The event types a webhook may carry (src/events/riskgate-event.ts). */
const WEBHOOK_EVENT_TYPES: readonly [RiskgateEventType, ...RiskgateEventType[]] = [
  'lockout.created',
  'lockout.ended',
  'list.entry_added',
  'list.entry_removed',
  'decision.denied',
  'decision.challenged',
];
const DEFAULT_WEBHOOK_EVENTS: RiskgateEventType[] = [
  'lockout.created',
  'lockout.ended',
  'list.entry_added',
  'list.entry_removed',
];

/**
 * RISKGATE_WORKERS when unset, for `cpus` available CPUs (`os.availableParallelism()`): one process
 * on 2 CPUs or fewer, where a second worker and the primary relaying for it cost more CPU per
 * decision than they add (docs/operations.md, "Workers"); one per CPU above that.
 */
export function defaultWorkers(cpus: number): number {
  return cpus <= 2 ? 1 : cpus;
}

/** Seconds in the variable, milliseconds in the configuration. */
const seconds = (options: { min: number; max: number; fallback: number }) => ({
  schema: numberSchema(options).transform((s) => s * 1000),
  default: String(options.fallback),
  unit: 'seconds',
});

const ADMISSION = '[Admission control](docs/operations.md#admission-control-shed-fast-before-the-work)';

export const SETTINGS = defineSettings({
  // --- Service
  RISKGATE_PORT: {
    group: 'service',
    fills: 'port',
    ...port(8080),
    doc: 'Listening port (0: any free port)',
  },
  RISKGATE_HOST: {
    group: 'service',
    fills: 'host',
    schema: optional(nonEmpty),
    defaultText: 'sandbox: `127.0.0.1`; vendor: `0.0.0.0`',
    doc: 'Interface to listen on (default: 127.0.0.1 on the sandbox, 0.0.0.0 with a vendor)',
    details:
      'interface both ports listen on: a development machine keeps riskgate to itself, a container listens for its network',
  },
  RISKGATE_OPS_PORT: {
    group: 'service',
    fills: 'opsPort',
    schema: optional(
      z
        .string()
        .trim()
        .regex(/^\d+$/, 'must be a whole number from 0 to 65535')
        .transform(Number)
        .pipe(z.number().max(65535, 'must be a whole number from 0 to 65535')),
    ),
    doc: 'A separate port for /metrics, /policies, /openapi.json, /actions (default: on RISKGATE_PORT)',
    details:
      "a separate port for the operator endpoints (`/metrics`, `/policies`, `/openapi.json`, `/actions`), which then leave `RISKGATE_PORT`; `/healthz` and `/readyz` answer on both. Keep it off the callers' network",
  },
  RISKGATE_OPS_HOST: {
    group: 'service',
    fills: 'opsHost',
    // Empty is unset here, as a copied env file leaves it.
    schema: optional(nonEmpty).transform((host) => host ?? '127.0.0.1'),
    default: '127.0.0.1',
    doc: 'Interface of the ops port; beyond loopback (e.g. 0.0.0.0) RISKGATE_OPS_KEYS is required',
    details:
      'interface the ops port listens on; anything beyond loopback (`0.0.0.0`, a pod address) requires `RISKGATE_OPS_KEYS`, or riskgate does not start',
  },
  RISKGATE_OPS_KEYS: {
    group: 'service',
    fills: 'opsKeys',
    schema: optional(opsKeyList),
    defaultText: 'none (sandbox: generated)',
    secret: true,
    doc: 'Operator keys for those endpoints, comma-separated name:role:key (role viewer, analyst or admin; keys 16+ characters) or a plain key (an admin), e.g. alice:analyst:<key>,bob:admin:<key>; unset: refused (403), caller keys never open them',
    details:
      'comma-separated operator keys for the operator endpoints, on either port: `name:role:key` (a person and their role: `viewer` reads, `analyst` also labels, `admin` also retries and drops actions and reloads policies; names unique, keys 16+ characters) or a plain `key` (an `admin` named by its key id, as before roles); unset, those endpoints answer `403` (caller keys never open them)',
  },
  RISKGATE_TRUSTED_PROXIES: {
    group: 'service',
    fills: 'trustedProxy.proxies',
    schema: optional(trustedProxies),
    doc: 'An authenticating proxy in front (oauth2-proxy): its IPs or CIDRs; their X-Forwarded-For is the client',
    details:
      'comma-separated IPs or CIDRs of an authenticating proxy in front of riskgate (oauth2-proxy and the like): a request whose socket is one of them is recorded as from its `X-Forwarded-For` client, and may name its operator in `RISKGATE_TRUSTED_IDENTITY_HEADER` (see [docs/security.md](docs/security.md))',
  },
  RISKGATE_TRUSTED_IDENTITY_HEADER: {
    group: 'service',
    fills: 'trustedProxy.identityHeader',
    schema: optional(identityHeader),
    defaultText: 'none (off)',
    doc: 'SSO through that proxy (off by default): the header naming the operator (e.g. X-Forwarded-Email), believed only from those addresses',
    details:
      'the header the proxy names the signed-in operator in (e.g. `X-Forwarded-Email`), believed only from `RISKGATE_TRUSTED_PROXIES`; needs `RISKGATE_SSO_OPERATORS`',
  },
  RISKGATE_SSO_OPERATORS: {
    group: 'service',
    fills: 'trustedProxy.operators',
    schema: optional(ssoOperators),
    doc: 'Who the proxy may name, and as what: identity:role,... e.g. alice@example.com:analyst (anyone else: 403)',
    details:
      '`identity:role,...` (e.g. `alice@example.com:analyst`): who the proxy may name, and as what; any other identity is refused `403`',
  },
  RISKGATE_API_KEYS: {
    group: 'service',
    fills: 'apiKeys',
    schema: optional(keyList),
    defaultText: 'sandbox: generated',
    secret: true,
    fillIn: true,
    doc: 'Comma-separated caller keys, 16+ characters each',
  },
  RISKGATE_STATE_DIR: {
    group: 'service',
    fills: 'stateDir',
    ...text('.riskgate/'),
    doc: 'State kept across restarts (the image: /var/lib/riskgate)',
    details:
      "state kept across restarts: the Log API follower's checkpoint (`log-checkpoint-service.json`) and, with `RISKGATE_DATABASE=sqlite`, the state files; the image uses `/var/lib/riskgate`",
  },
  RISKGATE_DEADLINE_MS: {
    group: 'service',
    fills: 'deadlineMs',
    ...num({ min: 10, max: 60_000, fallback: 300 }),
    unit: 'milliseconds',
    doc: 'The budget of one decision, 10 to 60000',
    details:
      "budget of one decision; per-signal and Admin-read timeouts come from the policy and bound each call as a whole (a client retry only starts if it fits before the call's timeout)",
  },
  RISKGATE_READY_GRACE_MS: {
    group: 'service',
    fills: 'readyGraceMs',
    ...num({ min: 0, max: 3_600_000, fallback: 10_000 }),
    unit: 'milliseconds',
    doc: 'How long an input the policy reads (token, event history, lists) may fall behind, once warm, before /readyz answers 503',
    details:
      'how long an input the active policy reads (the vendor token, the Log API history, the lists) may fall behind, once it was warm, before `/readyz` answers 503; before it is first warm after a start it holds readiness at once, and a source that fails for every replica (the Log API or the token endpoint down) never does (see [Readiness](docs/operations.md#readiness-warm-inputs-never-the-vendor))',
  },
  RISKGATE_WORKERS: {
    group: 'service',
    fills: 'workers',
    schema: numberSchema({ min: 1, max: 256, fallback: defaultWorkers(availableParallelism()) }),
    defaultText: '`1` on 2 CPUs or fewer, else one per CPU',
    doc: 'Processes on the port (default: 1 on 2 CPUs or fewer, else one per CPU; 1 in containers)',
    details:
      'processes serving the port (node:cluster), each a whole riskgate (on 2 cores a second worker costs more CPU per decision than it adds); `1` runs it in this process alone, the choice for containers (the image sets it): scale with replicas instead; see [Workers](docs/operations.md#workers-every-core)',
  },
  // --- Security
  RISKGATE_SUBJECT_BINDING: {
    group: 'security',
    fills: 'subjectBinding',
    ...oneOf(['username', 'off'], 'username'),
    doc: 'Act only on the Admin user whose username is the accountId; off trusts the caller',
    details:
      "riskgate acts only on the identity it scored: the Admin user named by `userId` must have `username` equal to `accountId`, and a `deviceId` must be one of that user's devices, or the request is refused (400, no action); `off` trusts the caller (see [docs/security.md](docs/security.md))",
  },
  RISKGATE_MAX_CONNECTIONS: {
    group: 'security',
    fills: 'maxConnections',
    ...num({ min: 16, max: 1_000_000, fallback: 8192 }),
    doc: 'Open client connections past which new ones are refused',
    details:
      'open client connections per process; past it a new one takes the place of the longest idle (a keep-alive between requests, or one silent for 1 s), and is refused at once only when every connection is busy, so idle or slow clients can neither take the file descriptors the vendor connections, the log and a policy reload need nor lock other clients out (keep it under `ulimit -n`)',
  },
  RISKGATE_ACCEPT_SOCKETS: {
    group: 'security',
    fills: 'acceptSockets',
    ...num({ min: 1, max: 256, fallback: 64 }),
    doc: 'Listening sockets (SO_REUSEPORT) per process/worker: connections accepted per busy loop turn',
    details: `listening sockets on the port (SO_REUSEPORT, Linux): Node accepts one connection per socket per turn of its event loop, so under overload a burst of new client connections would wait in the kernel, unseen by admission control (see ${ADMISSION}); 1 is a plain listen; workers (\`RISKGATE_WORKERS\` > 1) listen through the primary with one`,
  },
  RISKGATE_HEADERS_TIMEOUT_MS: {
    group: 'security',
    fills: 'headersTimeoutMs',
    ...num({ min: 100, max: 120_000, fallback: 5000 }),
    unit: 'milliseconds',
    doc: 'A client must send its headers within this long (at most RISKGATE_REQUEST_TIMEOUT_MS)',
    details:
      "a client must send its request headers within this long, and a connection that sends nothing at all is closed after it (Node's own timeouts leave such a connection open for good); never longer than `RISKGATE_REQUEST_TIMEOUT_MS`",
  },
  RISKGATE_REQUEST_TIMEOUT_MS: {
    group: 'security',
    fills: 'requestTimeoutMs',
    ...num({ min: 100, max: 600_000, fallback: 10_000 }),
    unit: 'milliseconds',
    doc: 'And its whole request within this long',
    details:
      'a client must send its whole request within this long; idle keep-alive connections close after 5 s',
  },
  // --- Admission control
  RISKGATE_MAX_IN_FLIGHT: {
    group: 'admission',
    fills: 'maxInFlight',
    ...num({ min: 1, max: 100_000, fallback: 1000 }),
    doc: 'Decisions in flight per process before new ones are shed',
    details: `admission control: decisions in flight in one process past which new ones are shed (503, or the policy's overload verdict); see ${ADMISSION}`,
  },
  RISKGATE_MAX_EVENT_LOOP_DELAY_MS: {
    group: 'admission',
    fills: 'maxEventLoopDelayMs',
    ...num({ min: 0, max: 60_000, fallback: 100 }),
    unit: 'milliseconds',
    doc: 'Event-loop delay past which they are shed, with 8+ in flight (0: only past the deadline)',
    details:
      "admission control: event-loop delay (how long a request queues before its handler runs) past which new decisions are shed while riskgate has a queue of its own (8 or more in flight; the host's noise alone never sheds); `0` sheds only what queued past the whole deadline",
  },
  // --- State and actions
  RISKGATE_OUTBOX: {
    group: 'state',
    fills: 'outbox',
    schema: z
      .string()
      .trim()
      .default('database')
      // `sqlite` (the former default, its own file) now means the database: the file is drained
      // into it at the first start (docs/operations.md). The Redis outbox is gone: Redis keeps counters only.
      .refine((v) => v === 'database' || v === 'sqlite' || v === 'memory', {
        message:
          'must be database or memory (the outbox lives in RISKGATE_DATABASE; Redis keeps only the counters: RISKGATE_FEATURE_STORE)',
      })
      .transform((v) => (v === 'memory' ? { kind: 'memory' as const } : { kind: 'database' as const })),
    default: 'database',
    doc: 'Database (RISKGATE_DATABASE: survives a crash, shared by replicas on PostgreSQL), or memory (not durable: tests; refused on PostgreSQL)',
    details:
      'where the Admin actions an answer promised are kept until delivered: `database` (the `RISKGATE_DATABASE` database, beside the lock-out records: written before the answer says `queued`, survives a crash, shared by replicas on PostgreSQL; a former `outbox.sqlite` is drained into it at the first start; `sqlite`, the former default, means the same) or `memory` (not durable: a crash loses what is queued; tests and development; refused with a PostgreSQL `RISKGATE_DATABASE`, whose replicas would each keep their own). See [Actions are never lost](docs/operations.md#actions-are-never-lost)',
  },
  RISKGATE_FEATURE_STORE: {
    group: 'state',
    fills: 'featureStore',
    schema: optional(
      z
        .string()
        .trim()
        .refine((v) => v === 'memory' || /^rediss?:\/\/\S+$/.test(v), {
          message: 'must be memory or a redis:// URL',
        }),
    ),
    default: 'memory',
    secret: true,
    doc: 'Velocity counters and history: memory, or redis://host:6379 (shared by replicas)',
    details:
      "where velocity counters and the Log API history live: `memory` (this riskgate; the primary's, shared by its workers) or a `redis://` URL (shared by replicas, which then also share one Log API follower). See [Velocity and history](docs/operations.md#velocity-and-history). Redis needs `RISKGATE_DATABASE` on PostgreSQL, and PostgreSQL needs this set (`memory` for one riskgate alone): riskgate refuses state shared in part ([Replicated means shared](docs/operations.md#replicated-means-shared))",
  },
  RISKGATE_DATABASE: {
    group: 'state',
    fills: 'database',
    schema: z
      .string()
      .trim()
      .default('sqlite')
      .refine((v) => v === 'sqlite' || v === 'memory' || /^postgres(ql)?:\/\/\S+$/.test(v), {
        message: 'must be sqlite, memory or a postgres:// URL',
      }),
    default: 'sqlite',
    secret: true,
    doc: 'Decisions, audit trail, lists, lock-outs, the outbox: sqlite (in the state dir), memory, or postgres://user:pass@host/db. Replicas share both or neither: Redis counters need a postgres:// database, and a postgres:// database needs RISKGATE_FEATURE_STORE set (a redis:// URL, or memory for one riskgate alone)',
    details:
      'where the state lives (control state: lists, lock-outs, the outbox, the audit trail; and the decisions): `sqlite` (`control.sqlite` and `decisions.sqlite` in the state dir, shared by one host\'s workers; docs/operations.md, "State files"), `memory` (this process only, lost with it) or a `postgres://` URL (every replica writes to one store). Replicas share PostgreSQL and the Redis of `RISKGATE_FEATURE_STORE` together or not at all (riskgate refuses to start otherwise, naming both)',
  },
  RISKGATE_DECISION_STORE: {
    group: 'state',
    fills: 'decisionStore.enabled',
    schema: oneOf(['on', 'off'], 'on').schema.transform((v) => v === 'on'),
    default: 'on',
    doc: 'The decision store (GET /decisions, the console): on or off; in RISKGATE_DATABASE',
    details:
      "`on`: every decision, its labels and its actions' outcomes also go to the database (`RISKGATE_DATABASE`) for the console and `GET /decisions`, written in batches off the request path (a slow or dead store never holds or fails a decision: it is retried, and shows in `/healthz` and `riskgate_decision_store_*`); `off`: not kept (the decision log is unchanged either way)",
  },
  RISKGATE_DECISION_STORE_BUFFER: {
    group: 'state',
    fills: 'decisionStore.bufferRecords',
    ...num({ min: 100, max: 1_000_000, fallback: 20_000 }),
    doc: 'Records waiting for a slow or down decision store before new ones are dropped (and counted)',
    details:
      'records waiting for the decision store (it is slow or down) before new ones are dropped, each counted in `riskgate_decision_store_dropped_total`',
  },
  RISKGATE_DECISION_RETENTION_DAYS: {
    group: 'state',
    fills: 'decisionStore.retentionDays',
    ...num({ min: 1, max: 3650, fallback: 30 }),
    unit: 'days',
    doc: 'How long the decision store keeps a decision',
    details:
      'the decision store keeps decisions this long (older ones are deleted, oldest first, in bounded steps once a minute)',
  },
  RISKGATE_DECISION_STORE_MAX_MB: {
    group: 'state',
    fills: 'decisionStore.maxBytes',
    schema: numberSchema({ min: 1, max: 1_048_576, fallback: 1024 }).transform((mb) => mb * 1024 * 1024),
    default: '1024',
    unit: 'MiB',
    doc: 'Most decision lines the store keeps (the oldest go first)',
    details:
      'and at most this much of logged decision lines (`line_bytes`; indexes and the other columns come on top, about a third more; on SQLite up to twice the lines when they run 5.5-16 KB, its 16 KiB pages then holding one or two rows each): past it, the oldest decisions go first',
  },
  RISKGATE_OUTBOX_HORIZON_SECONDS: {
    group: 'state',
    fills: 'outboxHorizonMs',
    ...seconds({ min: 1, max: 30 * 24 * 3600, fallback: 24 * 3600 }),
    doc: 'How long an action is retried before it is dead-lettered',
    details:
      'how long an action is retried (exponential backoff with jitter up to a minute, `Retry-After` honoured, no attempt spent while the Admin breaker is open) before it is dead-lettered for an operator',
  },
  // --- Webhooks
  RISKGATE_WEBHOOK_URLS: {
    group: 'webhooks',
    fills: 'webhooks.urls',
    schema: optional(
      commaListOf(
        z.string().refine((u) => !/[\s#]/.test(u) && /^https?:\/\/[^/]/.test(u) && URL.canParse(u), {
          error: 'must list http(s) URLs (comma-separated, no spaces or #)',
        }),
        'lists no URL',
      ),
    ),
    secret: true,
    doc: 'Receivers, comma-separated http(s) URLs; unset: no events go out (a URL may hold a token)',
    details:
      "comma-separated http(s) receivers of [signed webhooks](docs/webhooks.md): each gets every event, delivered at least once through the outbox; unset: no events go out. Redirects are never followed; a URL's `user:password@` is sent as basic auth (a URL may carry a token)",
  },
  RISKGATE_WEBHOOK_SECRET: {
    group: 'webhooks',
    fills: 'webhooks.secrets',
    schema: optional(
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
    defaultText: 'required with `RISKGATE_WEBHOOK_URLS`',
    secret: true,
    doc: 'Signing secret, 32+ characters (whsec_<base64> or any string); new,old to rotate',
    details:
      'the signing secret (32+ characters; `whsec_<base64>` as Standard Webhooks libraries take it, or any string, its UTF-8 bytes the key); comma-separated to rotate: every delivery is signed with each, newest first',
  },
  RISKGATE_WEBHOOK_EVENTS: {
    group: 'webhooks',
    fills: 'webhooks.events',
    schema: commaListOf(
      z.enum(WEBHOOK_EVENT_TYPES, { error: `must list event types of: ${WEBHOOK_EVENT_TYPES.join(', ')}` }),
      'lists no event type',
    )
      .default(DEFAULT_WEBHOOK_EVENTS)
      .transform((events) => [...new Set(events)]),
    default: DEFAULT_WEBHOOK_EVENTS.join(','),
    doc: 'Event types sent (add decision.denied,decision.challenged for every deny or challenge)',
    details:
      'the event types sent; add `decision.denied` and `decision.challenged` for every deny or challenge (after the answer, never holding it)',
  },
  RISKGATE_WEBHOOK_TIMEOUT_MS: {
    group: 'webhooks',
    fills: 'webhooks.timeoutMs',
    ...num({ min: 100, max: 30_000, fallback: 5000 }),
    unit: 'milliseconds',
    doc: 'Timeout of one delivery attempt',
    details:
      "timeout of one delivery attempt (100 to 30000); a timeout, 408, 429 and 5xx are retried with the outbox's backoff until `RISKGATE_WEBHOOK_RETRY_HORIZON_SECONDS`, any other answer but 2xx is dead-lettered",
  },
  RISKGATE_WEBHOOK_RETRY_HORIZON_SECONDS: {
    group: 'webhooks',
    fills: 'webhooks.retryHorizonMs',
    ...seconds({ min: 1, max: 30 * 24 * 3600, fallback: 3600 }),
    doc: 'How long one delivery is retried before it is dead-lettered (also the longest one refused event holds the later events of its user or list); never past RISKGATE_OUTBOX_HORIZON_SECONDS',
    details:
      "how long one delivery is retried before it is dead-lettered for an operator (1 to 2592000; never past `RISKGATE_OUTBOX_HORIZON_SECONDS`). A receiver's events of one user or list go out in order, so this is also the longest one event the receiver refuses holds the later ones back; a receiver down for longer gets each event dead-lettered after it (`riskgate actions retry` sends them again)",
  },
  // --- "Was this you?"
  RISKGATE_ASK_USER_SECRET: {
    group: 'askUser',
    fills: 'askUser.secret',
    schema: optional(
      z
        .string()
        .min(32, 'must be at least 32 characters')
        .refine((k) => !/[\s#]/.test(k), NO_COMMENT),
    ),
    defaultText: 'unset: no link is made',
    secret: true,
    doc: 'Key (32+ characters) the "was this you?" links are signed with (HMAC-SHA256); unset: no link',
    details:
      'the key (32+ characters, its UTF-8 bytes) the ["was this you?"](docs/ask-user.md) links are signed with (HMAC-SHA256), the same on every replica; unset: a policy\'s `askUser` makes no link and the public page refuses every token. Changing it voids the links already sent',
  },
  RISKGATE_ASK_USER_BASE_URL: {
    group: 'askUser',
    fills: 'askUser.baseUrl',
    schema: optional(httpUrl),
    defaultText: 'required with `RISKGATE_ASK_USER_SECRET`',
    doc: 'Public base URL of the caller surface the links point to (https://risk.example.com)',
    details:
      "the public base URL of the caller surface, as a user's browser reaches it: a link is `<base>/ask-user/<token>`. Required with `RISKGATE_ASK_USER_SECRET`",
  },
  RISKGATE_ASK_USER_TTL_MS: {
    group: 'askUser',
    fills: 'askUser.ttlMs',
    ...num({ min: 60_000, max: 30 * 24 * 3600 * 1000, fallback: 24 * 3600 * 1000 }),
    unit: 'milliseconds',
    doc: 'How long a "was this you?" link can be answered',
    details:
      'how long a "was this you?" link can be answered (60000 to 2592000000, default a day); past it the page says the link expired and changes nothing',
  },
  RISKGATE_ASK_USER_RATE: {
    group: 'askUser',
    fills: 'askUser.ratePerSecond',
    ...num({ min: 1, max: 10_000, fallback: 20 }),
    unit: 'per second',
    doc: 'Requests the public "was this you?" page serves (token bucket, per process, burst 5x)',
    details:
      "requests the unauthenticated `/ask-user/<token>` page serves a second in this process (a token bucket holding five seconds' worth); past it a 429 page with `Retry-After`",
  },
  // --- Feedback
  RISKGATE_FEEDBACK_RATE: {
    group: 'feedback',
    fills: 'feedback.ratePerSecond',
    ...num({ min: 0.01, max: 100_000, fallback: 10, whole: false }),
    unit: 'per second',
    doc: 'Labels each key may send (token bucket, per process)',
    details:
      'labels each key may send to `POST /feedback` (token bucket, per process; see [Feedback](#feedback))',
  },
  RISKGATE_FEEDBACK_BURST: {
    group: 'feedback',
    fills: 'feedback.burst',
    ...num({ min: 1, max: 100_000, fallback: 50 }),
    doc: 'Labels a key may send at once before the rate applies (429 past it)',
    details: 'labels a key may send at once before the rate applies; past it `429` with `Retry-After`',
  },
  RISKGATE_FEEDBACK_DECISIONS: {
    group: 'feedback',
    fills: 'feedback.maxDecisions',
    ...num({ min: 1, max: 10_000_000, fallback: 100_000 }),
    doc: 'Recent decisions remembered to know their caller key (at most 24 h; ~14 MB)',
    details:
      'recent decisions this process remembers (with `RISKGATE_WORKERS` > 1 the primary, for all its workers; at most 24 h; about 140 bytes of heap each) to know which caller key may label each',
  },
  // --- Console
  RISKGATE_CONSOLE_SESSION_KEY: {
    group: 'console',
    fills: 'console.sessionKey',
    schema: optional(z.string().min(32, 'must be at least 32 characters')),
    defaultText: 'derived from `RISKGATE_OPS_KEYS`',
    secret: true,
    doc: 'Key the session cookies are signed with (32+ characters; unset: derived from RISKGATE_OPS_KEYS, the same on every replica, and changing the keys ends every session)',
    details:
      "key the [console](#console)'s session cookies are signed with (32+ characters); the derived one is the same on every replica with the same operator keys, and changing the keys ends every session",
  },
  RISKGATE_CONSOLE_SESSION_MINUTES: {
    group: 'console',
    fills: 'console.sessionMinutes',
    ...num({ min: 1, max: 10_080, fallback: 480 }),
    unit: 'minutes',
    doc: 'How long a console session lasts before signing in again',
  },
  RISKGATE_CONSOLE_SECURE_COOKIE: {
    group: 'console',
    fills: 'console.secureCookie',
    schema: oneOf(['true', 'false'], 'false').schema.transform((v) => v === 'true'),
    default: 'false',
    doc: 'Mark the session cookie Secure over plain HTTP (true when TLS ends at a proxy in front)',
    details:
      "mark the console's cookies `Secure` over plain HTTP (TLS ended at a proxy in front); over HTTPS they always are",
  },
  // --- Policy
  RISKGATE_POLICY_PATH: {
    group: 'policy',
    fills: 'policyPath',
    ...text('policies/'),
    doc: 'A policy file or directory, reloaded on change',
    details:
      'policy file or directory; reloaded on change (a broken edit is refused, the last good policy stays)',
  },
  RISKGATE_SHADOW_POLICY_PATH: {
    group: 'policy',
    fills: 'shadowPolicyPath',
    schema: optional(nonEmpty),
    doc: 'A candidate evaluated beside it on live traffic, never acting',
    details:
      "a candidate policy (file or directory) evaluated beside the active one on every decision's inputs, after the answer, taking no action: its verdict, score and rules in the decision line (`shadow`), agreement in `riskgate_shadow_decisions_total{active,shadow}`, both revisions in `GET /policies`; signals only it reads are fetched within the same deadline (a cost, shown in Server-Timing as `shadow-signals-*`); one that does not load is reported and retried, never touching the active policy",
  },
  RISKGATE_POLICY_VERSION_POLL_MS: {
    group: 'policy',
    fills: 'policyVersionPollMs',
    ...num({ min: 50, max: 60_000, fallback: 500 }),
    unit: 'milliseconds',
    doc: 'How often each replica reads the policy activation marker of the control database',
    details:
      'how often each replica reads the policy activation marker (one small row of the control database); when it moved, the active and staged policy versions are read and compiled off the decision path and swapped in, so an activation anywhere is served everywhere within about this plus a compile (see [docs/policy-versions.md](docs/policy-versions.md)); a scheduled activation is made by the first replica to poll after its time',
  },
  RISKGATE_BACKTEST_WINDOW_HOURS: {
    group: 'policy',
    fills: 'backtest.windowHours',
    ...num({ min: 1, max: MAX_BACKTEST_WINDOW_HOURS, fallback: DEFAULT_BACKTEST_WINDOW_HOURS }),
    unit: 'hours',
    doc: "A proposal's backtest window when it names none: the stored decisions of the last this many hours",
    details: `the window of stored decisions a proposed policy version's backtest replays when the proposal names none (the console's; \`POST /policy-versions/{id}/propose\` without a body); a proposal may name its own, up to ${MAX_BACKTEST_WINDOW_HOURS} hours (see [docs/policy-versions.md](docs/policy-versions.md))`,
  },
  RISKGATE_BACKTEST_MAX_DECISIONS: {
    group: 'policy',
    fills: 'backtest.maxDecisions',
    ...num({ min: 1, max: 100_000_000, fallback: DEFAULT_BACKTEST_MAX_DECISIONS }),
    doc: 'Most stored decisions a backtest replays (the oldest of its window first)',
    details:
      "most stored decisions a proposed version's backtest replays, the oldest of its window first; past it the evidence says `truncated: max-decisions` with the time of the first decision left out. The backtest runs on replay threads (one per core) with connections of their own, never on the event loop",
  },
  RISKGATE_BACKTEST_TIME_LIMIT_SECONDS: {
    group: 'policy',
    fills: 'backtest.timeLimitSeconds',
    ...num({ min: 1, max: 86_400, fallback: DEFAULT_BACKTEST_TIME_LIMIT_SECONDS }),
    unit: 'seconds',
    doc: 'Longest a backtest reads before its evidence is written with what it read',
    details:
      "longest a proposed version's backtest reads; past it the evidence is written with the counts it reached and `truncated: time-limit`. A backtest in progress when riskgate stops is ended and its evidence written as `evidence incomplete: stopped`",
  },
  RISKGATE_MAX_SNOOZE_DAYS: {
    group: 'policy',
    fills: 'maxSnoozeDays',
    ...num({ min: 1, max: 365, fallback: 90 }),
    unit: 'days',
    doc: 'Longest a rule may be snoozed for one entity (POST /snoozes refuses a later `until`)',
    details:
      "longest a rule may be snoozed for one account, user, unit or IP/CIDR (`POST /snoozes`, the console's snooze form): a later `until` is refused (400 naming `until`), so a forgotten snooze ends on its own",
  },
  RISKGATE_REVIEW_SAMPLE_SHARE: {
    group: 'policy',
    fills: 'reviewSampleShare',
    ...num({ min: 0, max: 1, fallback: 0, whole: false }),
    doc: 'Share of allowed logins sampled into the review queue (0-1; 0: none)',
    details:
      "share of allowed logins opened as review cases at random (`0.001` is one in a thousand), to estimate what the rules miss: an analyst's disposition becomes the label the rule report counts; drawn after the answer, never delaying or failing a decision (see [docs/review-queue.md](docs/review-queue.md))",
  },
  RISKGATE_REVIEW_SLA_HOURS: {
    group: 'policy',
    fills: 'reviewSlaHours',
    ...num({ min: 1, max: 720, fallback: 24 }),
    unit: 'hours',
    doc: 'How long after it opens a review case is due',
    details:
      "how long after it opens a review case is due: past it the case is overdue (the Review page's `overdue` view, `riskgate_review_queue_overdue`, the `RiskgateReviewQueueOverdue` alert)",
  },
  // --- Decision log
  RISKGATE_DECISION_LOG: {
    group: 'decisionLog',
    fills: 'decisionLog',
    schema: text('stdout').schema.transform(
      (value): { kind: 'stdout' } | { kind: 'off' } | { kind: 'file'; path: string } =>
        value === 'stdout' || value === 'off' ? { kind: value } : { kind: 'file', path: value },
    ),
    default: 'stdout',
    doc: 'Stdout, a file path (appended; SIGHUP reopens it), or off',
    details:
      '`stdout`, a file path (appended), or `off`: one JSON line per decision and per action outcome, written in batches off the request path and never blocking it (on a file or terminal stdout it goes through the thread pool; a destination that falls behind holds up to 100 000 records, then drops and counts them in `riskgate_decision_log_dropped_records_total`)',
  },
  RISKGATE_DECISION_LOG_REDACT: {
    group: 'decisionLog',
    fills: 'decisionLogRedaction',
    ...redaction(DEFAULT_REDACTION),
    doc: 'Fields of each log line dropped, hashed or truncated: a path:mode list (modes drop, hash, truncate for IPs), or none',
    details:
      'fields of each log line dropped, hashed or truncated: `path:mode` entries, a path dotted over the line (an array on the way applies to each element), modes `drop`, `hash` (HMAC-SHA256, `hmac:` and 16 hex digits: lines about one person still correlate, a dictionary does not reverse them) and `truncate` (IPv4 to /24, IPv6 to /48; anything else dropped); `none` for none. E.g. `request.ip:truncate,request.userAgent:hash,request.context:drop,inputs.user.username:hash`. A field a rule reads, once hashed or dropped, cannot be replayed exactly',
  },
  RISKGATE_DECISION_LOG_HASH_KEY: {
    group: 'decisionLog',
    fills: 'decisionLogHashKey',
    schema: optional(z.string().min(16, 'must be at least 16 characters')),
    secret: true,
    doc: 'HMAC key of the hash mode, 16+ characters',
    details:
      'the HMAC key of the `hash` mode (16+ characters; required when a field is hashed; the same on every replica so lines correlate)',
  },
  RISKGATE_DECISION_LOG_ON_FAILURE: {
    group: 'decisionLog',
    fills: 'decisionLogOnFailure',
    ...oneOf(['answer', 'refuse'], 'answer'),
    doc: 'While the log fails: answer (and alarm) or refuse (503, not ready)',
    details:
      'while the decision log cannot be written (disk full, a closed pipe): `answer` keeps deciding and alarms (`/healthz` `decisionLog.ok: false` with the error, `riskgate_decision_log_healthy 0`, an error in the service log); `refuse` answers `503` `RG_ERR_DECISION_LOG_UNAVAILABLE` and reports not ready, for deployments where no decision may go unaudited. A failed file is reopened every 5 s until a write succeeds; `SIGHUP` reopens it at once (logrotate)',
  },
  // --- The vendor: Trust Signals
  RISKGATE_SERVICE_ID: {
    group: 'signals',
    fills: 'upstream.serviceId',
    schema: serviceIdSchema,
    vendor: 'required',
    doc: "The vendor's service ID (UUID)",
  },
  RISKGATE_SIGNALS_URL: {
    group: 'signals',
    fills: 'upstream.signalsUrl',
    schema: httpUrl,
    vendor: 'required',
    defaultText: 'unset: sandbox',
    doc: 'E.g. https://signals.example.com/api/v1 (unset: the embedded sandbox)',
    details:
      'Trust Signals base, e.g. `https://signals.example.com/api/v1`; unset, riskgate runs on the embedded sandbox',
  },
  RISKGATE_AUTH_URL: {
    group: 'signals',
    fills: 'upstream.authUrl',
    schema: httpUrl,
    vendor: 'required',
    doc: 'Token issuer base; /oauth/v2/token is appended',
  },
  RISKGATE_CLIENT_ID: {
    group: 'signals',
    fills: 'upstream.clientId',
    schema: nonEmpty,
    vendor: 'required',
    doc: 'Retrieval client id',
  },
  RISKGATE_CLIENT_SECRET: {
    group: 'signals',
    fills: 'upstream.clientSecret',
    schema: nonEmpty,
    vendor: 'required',
    secret: true,
    doc: 'Retrieval client secret',
  },
  RISKGATE_SIGNALS_AUDIENCE: {
    group: 'signals',
    fills: 'upstream.signalsAudience',
    schema: nonEmpty,
    vendor: 'required',
    doc: 'The signals audience, or the whole scope URN',
    details: 'the signals audience, or the whole scope `urn:<idp>:iam:org:project:id:<audience>:aud`',
  },
  RISKGATE_SIGNALS_IDP: {
    group: 'signals',
    fills: 'upstream.signalsIdp',
    schema: optional(z.string().regex(/^[A-Za-z0-9.-]+$/, 'must be a host-like name')),
    vendor: 'optional',
    doc: 'The <idp> of that URN, when the audience is given bare',
  },
  RISKGATE_SIGNALS_CONNECTIONS: {
    group: 'signals',
    fills: 'signalsConnections',
    ...num({ min: 1, max: 4096, fallback: 128 }),
    doc: 'Most open connections to the Trust Signals origin',
    details:
      "most open connections to the Trust Signals origin; each carries one call at a time, so size it to calls in flight: decisions/s × calls per decision (about 2.5) × the vendor's mean latency in seconds, with room for its p99 (1000/s at a mean of 18 ms keeps about 45 open); fewer and calls queue for a socket and spend their deadline there",
  },
  RISKGATE_RAT_BATCH_WINDOW_MS: {
    group: 'signals',
    fills: 'ratBatchWindowMs',
    ...num({ min: 0, max: MAX_WINDOW_MS, fallback: DEFAULT_WINDOW_MS, whole: false }),
    unit: 'milliseconds',
    doc: `Remote-access-tool batch window, 0 to ${MAX_WINDOW_MS}`,
    details: `remote-access-tool batching: a lone lookup is sent at once; while a batch is in flight, lookups wait up to this long (0 to ${MAX_WINDOW_MS}) to share the next POST. Longer windows mean fewer, fuller POSTs (the vendor's call budget) and that much more latency on the signal; \`bench/RESULTS.md\` has the measured trade-off`,
  },
  RISKGATE_RAT_CACHE_MS: {
    group: 'signals',
    fills: 'ratCacheMs',
    ...num({ min: 0, max: 3_600_000, fallback: DEFAULT_RAT_CACHE_TTL_MS }),
    unit: 'milliseconds',
    doc: 'Remote-access-tool answer cache lifetime (0: off)',
    details:
      'lifetime of a remote-access-tool answer (stable: interaction-anchored), for a backend that calls /decide again for the same login; 0 turns it off',
  },
  // --- The vendor: Admin API
  RISKGATE_ADMIN_URL: {
    group: 'admin',
    fills: 'upstream.adminUrl',
    schema: httpUrl,
    vendor: 'required',
    doc: 'Admin API base; /srv/admin/v1 is appended',
  },
  RISKGATE_ADMIN_API_KEY: {
    group: 'admin',
    fills: 'upstream.adminApiKey',
    schema: nonEmpty,
    vendor: 'required',
    secret: true,
    doc: 'Admin API key',
  },
  RISKGATE_ADMIN_CONNECTIONS: {
    group: 'admin',
    fills: 'adminConnections',
    ...num({ min: 1, max: 4096, fallback: 64 }),
    doc: 'Most open connections to the Admin API origin',
    details: 'the same for the Admin API (user and devices reads, cached for seconds; actions)',
  },
  RISKGATE_CALLBACK_SIGNATURE_KEY: {
    group: 'admin',
    fills: 'upstream.callbackSignatureKey',
    schema: optional(nonEmpty),
    vendor: 'optional',
    secret: true,
    doc: 'Verifies POST /callbacks/admin; unset: not served',
  },
  // --- The vendor: Log API
  RISKGATE_LOGS_URL: {
    group: 'logs',
    fills: 'upstream.logsUrl',
    schema: optional(httpUrl),
    vendor: 'optional',
    doc: 'Log API base; with the key, turns on the Log API follower',
    details:
      'Log API base (with `RISKGATE_LOG_API_KEY`): turns on the [Log API follower](docs/operations.md#the-log-api-follower)',
  },
  RISKGATE_LOG_API_KEY: {
    group: 'logs',
    fills: 'upstream.logApiKey',
    schema: optional(nonEmpty),
    vendor: 'optional',
    secret: true,
    doc: 'Service Log API key',
  },
  // --- Development
  SANDBOX_PORT: {
    group: 'development',
    fills: 'sandboxPort',
    ...port(4010),
    doc: "The embedded sandbox's port (sandbox mode only)",
  },
});

export type SettingName = keyof typeof SETTINGS;
