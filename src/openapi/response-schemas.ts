import { z } from 'zod';
import type { DecisionLogHealth } from '../decision-log/decision-log.ts';
import type {
  DecisionPage,
  DecisionStoreStatus,
  StoredDecision,
  VerdictCounts,
} from '../decision-store/decision-query.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { LOCKOUT_STATUSES, type LockoutView } from '../lockouts/lockout-record.ts';
import type { OutboxEntryView } from '../outbox/outbox-view.ts';
import type { PolicyStoreStatus } from '../policy/policy-store.ts';
import type { RevisionStats } from '../policy/rule-stats.ts';
import type { ProblemDetails } from '../problem/problem-details.ts';

/**
 * The answers of riskgate's routes that no request schema already describes: problem details,
 * the probes, and the operator routes. They describe what the handlers build (src/http/create-app.ts)
 * for the OpenAPI document; `test/openapi-answers.test.ts` validates real answers against it, and
 * the types below break the build when a producer renames or retypes a field.
 */

const count = z.number().int().min(0);
export const timestampSchema = z.iso.datetime().describe('RFC 3339, UTC.');
const timestamp = timestampSchema;

export const problemSchema = z
  .object({
    type: z
      .string()
      .regex(/^urn:riskgate:problem:[a-z-]+$/)
      .describe('`urn:riskgate:problem:<code>`, stable per code.'),
    title: z.string(),
    status: z.number().int().min(400).max(599),
    detail: z.string().describe('For people; never a secret, never an upstream’s own message.'),
    code: z.enum(ErrorCode).describe('Stable RG_ERR_* code: key on it, not on `detail`.'),
    field: z.string().optional().describe('The first bad field, as a dotted path.'),
    errors: z
      .array(z.object({ field: z.string(), message: z.string() }))
      .optional()
      .describe('Every bad field.'),
  })
  .describe('RFC 9457 problem details.');

const decisionLogHealthSchema = z.object({
  ok: z.boolean().describe('False while records do not reach the destination.'),
  lastError: z.string().optional().describe('The destination’s last error while failing.'),
  dropped: count.describe('Records dropped under sustained backpressure, since start.'),
});

const decisionStoreStatusSchema = z.object({
  engine: z.enum(['sqlite', 'postgres', 'off']),
  writing: z.boolean().describe('False while writes fail (the store is down or behind its deadline).'),
  pending: count.describe('Records waiting to be written.'),
  dropped: count.describe('Records dropped because the buffer was full (RISKGATE_DECISION_STORE_BUFFER).'),
  written: count.describe('Records written since start.'),
  rejected: count.describe('Records the database refused (poison rows), set aside in decision_reject.'),
  lagMs: z.number().min(0).describe('Age of the oldest record waiting, milliseconds (0 when none).'),
  lastError: z.string().optional().describe('The last write failure while writes fail.'),
});

export const healthSchema = z
  .object({
    status: z
      .enum(['ok', 'alarm'])
      .describe(
        '`alarm` while `alarms` lists something an operator must act on (still 200: a restart fixes none).',
      ),
    alarms: z
      .array(z.string())
      .optional()
      .describe(
        'What needs an operator: control state unavailable (a damaged, missing or replaced control file).',
      ),
    state: z
      .object({
        control: z.object({
          available: z
            .boolean()
            .describe('False: lists unavailable to decisions, operator changes refused (503).'),
          reason: z.string().optional(),
          file: z.string().optional(),
        }),
        decisions: z.object({
          file: z.string().optional(),
          setAside: count.describe('Decisions files moved aside since start (damaged or unopenable).'),
          recreated: count.describe('Fresh decisions files made where one had been.'),
          lastSetAsideAs: z.string().optional(),
        }),
      })
      .optional()
      .describe('The two kinds of state (docs/architecture.md, "Two kinds of state").'),
    decisionLog: decisionLogHealthSchema.optional(),
    database: z
      .object({ engine: z.enum(['sqlite', 'postgres']) })
      .optional()
      .describe('The database (RISKGATE_DATABASE).'),
    decisionStore: decisionStoreStatusSchema
      .optional()
      .describe('The decision store (RISKGATE_DECISION_STORE): is it keeping up.'),
    vendor: z
      .object({
        token: z.object({
          valid: z.boolean().describe('A valid Trust Signals access token is held.'),
          expiresInSeconds: count.optional(),
          consecutiveFailures: count,
          lastErrorCode: z.string().optional().describe('The RG_ERR_* code of the last failed request.'),
        }),
        circuits: z
          .array(
            z.object({
              route: z.string(),
              state: z.enum(['open', 'half_open']),
              retryAfterMs: z.number().min(0),
            }),
          )
          .describe('Vendor routes whose circuit breaker is not closed.'),
      })
      .optional(),
    lists: z
      .object({
        snapshotAgeMs: z
          .number()
          .describe("How long ago this process's runtime list snapshot was confirmed current."),
        stale: z.boolean().describe('Past the bound (10 s): rules reading lists see them unavailable.'),
      })
      .optional()
      .describe('The runtime lists (src/lists/).'),
    snoozes: z
      .object({
        snapshotAgeMs: z
          .number()
          .describe("How long ago this process's rule snoozes were confirmed current."),
        stale: z
          .boolean()
          .describe(
            'Past the bound (10 s): decisions evaluate every rule as if nothing were snoozed, and say so.',
          ),
        active: z.number().int().min(0).describe("Snoozes in this process's snapshot."),
      })
      .optional()
      .describe('The rule snoozes (src/snoozes/).'),
    reviewQueue: z
      .object({
        open: z.number().int().min(0).describe('Cases not yet claimed (as last read, every 15 s).'),
        claimed: z.number().int().min(0).describe('Cases claimed and not closed.'),
        overdue: z.number().int().min(0).describe('Cases not closed past their due time.'),
        pending: z
          .number()
          .int()
          .min(0)
          .describe('Cases decisions opened that this process has yet to write to the database.'),
      })
      .optional()
      .describe('The review queue (src/review-queue/).'),
  })
  .describe('Details for people and dashboards; never a readiness check.');

const inputCheck = (what: string) =>
  z
    .boolean()
    .optional()
    .describe(`Present while the active policy reads ${what}: false while it holds this process back.`);

export const readinessSchema = z.object({
  ready: z.boolean(),
  checks: z.object({
    policy: z.boolean().describe('A policy is loaded.'),
    token: inputCheck('a Trust Signals signal (the access token)'),
    history: inputCheck('the event history (the Log API follower)'),
    lists: inputCheck('the runtime lists'),
    draining: z.literal(false).optional().describe('Present while shutting down.'),
    decisionLog: z
      .literal(false)
      .optional()
      .describe('Present while the decision log fails and RISKGATE_DECISION_LOG_ON_FAILURE=refuse.'),
  }),
  inputs: z
    .record(
      z.enum(['token', 'history', 'lists']),
      z.object({
        state: z
          .enum(['warm', 'behind', 'unavailable'])
          .describe(
            '`warm`; `behind`: this process has not caught up (after a start it holds readiness at once, later after RISKGATE_READY_GRACE_MS); `unavailable`: its source fails for every replica (never holds readiness: the degraded verdict covers it).',
          ),
        reason: z.string().optional().describe('Why it is not warm.'),
        behindSeconds: z.number().optional().describe('How far behind it reads (the history).'),
      }),
    )
    .optional()
    .describe('The warmth of each input the active policy reads, when it reads any.'),
});

const policyIssueSchema = z.object({
  file: z.string(),
  line: z.number().int(),
  col: z.number().int(),
  message: z.string(),
  severity: z.enum(['error', 'warning']),
});

export const policyStatusSchema = z.object({
  name: z.string(),
  revision: z.string().describe('A hash of the policy files’ content.'),
  loadedAt: timestamp,
  files: z.array(z.string()),
  reloads: count.describe('Successful reloads that changed the revision, since start.'),
  failedReloads: count.describe('Refused reloads since start.'),
  warnings: z.array(policyIssueSchema),
  lastError: z
    .object({
      message: z.string(),
      at: timestamp,
      errors: z.array(policyIssueSchema.omit({ severity: true })),
    })
    .optional()
    .describe('The latest refused edit (the last good policy stays live); cleared by the next load.'),
});

const servedVersionSchema = z.object({
  versionId: z.string(),
  revision: z.string(),
  since: timestamp.describe('When this replica began serving it.'),
});

export const policiesSchema = policyStatusSchema.extend({
  source: z
    .enum(['database', 'file'])
    .describe(
      'Where the served policy comes from: the control database’s active version (once one was activated), else the watched file.',
    ),
  version: z
    .object({
      generation: count.describe('The activation marker this replica last acted on.'),
      active: servedVersionSchema.optional().describe('The active version this replica serves.'),
      staged: servedVersionSchema
        .extend({
          stage: z.enum(['shadow', 'percent']),
          percent: z.number().describe('The share of accounts served it (0 in shadow).'),
        })
        .optional()
        .describe('The version rolled out beside the active one.'),
      scheduled: z
        .object({ versionId: z.string(), at: timestamp, by: z.string() })
        .optional()
        .describe('The approved version to be activated at `at`.'),
      lastError: z
        .object({ versionId: z.string(), message: z.string(), at: timestamp })
        .optional()
        .describe(
          'A version this replica refused to serve (it does not compile); the last good one is served.',
        ),
      failingSince: timestamp.optional().describe('Since when the marker could not be read.'),
    })
    .optional()
    .describe('The control database’s policy versions as this replica serves them.'),
  shadow: z
    .union([
      policyStatusSchema,
      z.object({ path: z.string(), loaded: z.literal(false), lastError: z.string().optional() }),
    ])
    .optional()
    .describe('The shadow policy (RISKGATE_SHADOW_POLICY_PATH), loaded or not.'),
});

const revisionStatsSchema = z.object({
  policy: z.enum(['active', 'shadow']),
  name: z.string(),
  revision: z.string(),
  since: timestamp.describe('When this revision’s first decision was counted.'),
  decisions: count,
  rules: z
    .record(z.string(), z.object({ hits: count, rate: z.number().min(0).max(1) }))
    .describe('Per rule id: matches, and the share of the revision’s decisions they are.'),
});

export const ruleStatsSchema = z.object({
  revisions: z.array(revisionStatsSchema).describe('The last few revisions of each policy, newest last.'),
});

export const outboxEntrySchema = z.object({
  id: z.string().describe('`<decisionId>:<type>:<target>`.'),
  decisionId: z.string(),
  type: z.string().describe('The Admin action: lock_out_user, archive_device, restrict_factors.'),
  target: z.string(),
  status: z.enum(['pending', 'delivered', 'dead', 'dropped']),
  attempts: count,
  createdAt: timestamp,
  nextAttemptAt: timestamp.optional().describe('While pending.'),
  updatedAt: timestamp,
  lastError: z.string().optional(),
  reason: z.string().optional().describe('Why it is dead or dropped.'),
});

export const actionsSchema = z.object({
  pending: count,
  dead: count,
  oldestPendingAgeMs: z.number().min(0).describe('Age of the oldest pending action; 0 when none.'),
  actions: z.array(outboxEntrySchema).describe('Newest first, at most `limit`.'),
});

const verdict = z.enum(['allow', 'challenge', 'deny']);
const label = z.enum(['fraud', 'legit']);

export const decisionSummarySchema = z.object({
  decisionId: z.string(),
  at: timestamp.describe('When the request arrived.'),
  verdict,
  score: z.number(),
  degraded: z.boolean(),
  rules: z.array(z.string()).describe('The active policy’s matched rule ids.'),
  accountId: z.string().optional(),
  userId: z.string().optional(),
  ip: z.string().optional(),
  unitId: z.string().optional(),
  policy: z.object({ name: z.string(), revision: z.string() }),
  shadowVerdict: verdict.optional().describe('The shadow policy’s verdict, when one ran.'),
  label: label.optional().describe('The current label.'),
  totalMs: z.number().min(0),
});

const verdictCountsSchema = z.object({ allow: count, challenge: count, deny: count, total: count });

export const decisionPageSchema = z.object({
  decisions: z.array(decisionSummarySchema).describe('Newest first.'),
  nextCursor: z.string().optional().describe('Present when older decisions match: pass it as `cursor`.'),
  counts: verdictCountsSchema.optional().describe('With `counts=true`: by verdict over the whole filter.'),
});

export const storedDecisionSchema = decisionSummarySchema.extend({
  line: z
    .object({ kind: z.literal('decision'), decisionId: z.string() })
    .catchall(z.unknown())
    .describe(
      'The decision’s line as the decision log writes it (redacted by RISKGATE_DECISION_LOG_REDACT; one-time codes never kept).',
    ),
  labels: z
    .array(z.object({ label, labelledBy: z.string(), at: timestamp, note: z.string().optional() }))
    .describe('Every analyst label given, oldest first.'),
  outcomes: z
    .array(
      z.object({
        type: z.enum(['step_up', 'account_event', 'ask_user']),
        value: z.string().describe('The step-up result or the account event.'),
        reportedBy: z.string().describe('The id of the key that reported it.'),
        at: timestamp,
        label: label.optional().describe('The label it points to by the documented rules, if any.'),
      }),
    )
    .describe(
      'What the login backend reported of the login (`POST /decisions/{decisionId}/outcome`), oldest first.',
    ),
  outcomeLabel: label
    .optional()
    .describe('The label the outcomes point to; the current `label` is an analyst’s when there is one.'),
  actions: z
    .array(
      z.object({
        actionId: z.string(),
        type: z.string(),
        target: z.string(),
        status: z.string().describe('queued, deferred, done, failed or skipped: the latest known.'),
        at: timestamp,
        detail: z.record(z.string(), z.unknown()),
      }),
    )
    .describe('Each action’s latest outcome: the outbox’s report, else what the answer said.'),
});

export const callbackAckSchema = z.object({ received: z.literal(true) });

export const lockoutSchema = z.object({
  id: z.string().describe('The lock-out’s id: its decision’s (a decision locks one user out at most).'),
  userId: z.string(),
  accountId: z.string().optional(),
  decisionId: z.string(),
  rule: z.string().optional().describe('The rule (or `verdict:<verdict>` binding) that asked for it.'),
  createdAt: timestamp,
  status: z
    .enum(LOCKOUT_STATUSES)
    .describe(
      '`queued` (promised), `locked` (applied), `failed` (never applied), `withheld` (the first factor had not passed), `unlocked` (by an operator), `expired` (a temporary one ended).',
    ),
  until: timestamp.optional().describe('A temporary lock-out’s end; absent when permanent.'),
  escalated: z.boolean().describe('Escalation (`escalateWithin`) made a temporary lock-out permanent.'),
  endedAt: timestamp.optional(),
  endedBy: z.string().optional().describe('`schedule`, or the operator who unlocked it.'),
  reason: z
    .string()
    .optional()
    .describe('Why it failed or was withheld, an unlock’s reason, a skipped unlock’s.'),
  unlockStatus: z
    .enum(['queued', 'done', 'failed'])
    .optional()
    .describe('An operator’s unlock through the outbox.'),
});

export const lockoutsSchema = z.object({
  lockouts: z.array(lockoutSchema).describe('Newest first, at most `limit`.'),
  nextCursor: z
    .string()
    .optional()
    .describe('Pass as `cursor` for the next (older) page; absent on the last.'),
});

/** Compile-time: every value a producer builds fits its schema's output type. */
type Fits<Produced extends Schema, Schema> = Produced;
type Mutable<T> = T extends readonly (infer U)[] ? Mutable<U>[] : { -readonly [K in keyof T]: Mutable<T[K]> };

/** Renaming or retyping a field of these producers without its schema breaks the build here. */
export type ProducersFitTheirSchemas = [
  Fits<ProblemDetails, z.output<typeof problemSchema>>,
  Fits<DecisionLogHealth, z.output<typeof decisionLogHealthSchema>>,
  Fits<Mutable<PolicyStoreStatus>, z.output<typeof policyStatusSchema>>,
  Fits<RevisionStats, z.output<typeof revisionStatsSchema>>,
  Fits<OutboxEntryView, z.output<typeof outboxEntrySchema>>,
  Fits<DecisionStoreStatus, z.output<typeof decisionStoreStatusSchema>>,
  Fits<DecisionPage & { counts?: VerdictCounts }, z.output<typeof decisionPageSchema>>,
  Fits<Omit<StoredDecision, 'line'>, Omit<z.output<typeof storedDecisionSchema>, 'line'>>,
  Fits<LockoutView, z.output<typeof lockoutSchema>>,
];
