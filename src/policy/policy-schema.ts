import { z } from 'zod';
import { FACTORS } from '../admin/admin-schemas.ts';
import { COUNTER_REQUEST_FIELDS, parseWindow } from '../features/velocity-counters.ts';
import { SUPPORTING_SIGNAL_TYPES } from '../signals/signal-schemas.ts';
import { INPUT_NAMES } from './inputs/input-values.ts';

/**
 * The policy file (`apiVersion: riskgate/v1`, `kind: Policy`), as zod. This is the single source of
 * the format: the loader validates with it and `policies/policy.schema.json` is generated from it
 * (`npx riskgate policy schema`). Cross-field rules live in `superRefine`, which JSON Schema cannot
 * express; the loader reports them with positions like any other issue.
 */

export const POLICY_API_VERSION = 'riskgate/v1';

/** Longest `when` / `select` expression accepted, characters. */
export const MAX_EXPRESSION_LENGTH = 4096;

export const verdictSchema = z.enum(['allow', 'challenge', 'deny']);

const idSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/,
    'must be 1-64 letters, digits, "_", "-" or "." (starting alnum)',
  );

const expressionSchema = z.string().min(1).max(MAX_EXPRESSION_LENGTH);

export const onUnavailableSchema = z
  .union([
    z.literal('ignore'),
    z.object({ score: z.number().finite() }).strict(),
    z.object({ verdict: verdictSchema }).strict(),
  ])
  .describe(
    'What an unavailable input means: `ignore`, `{score: n}` (added to the total) or `{verdict: v}` (hard verdict).',
  );
export type OnUnavailable = z.infer<typeof onUnavailableSchema>;

export const onErrorSchema = z
  .enum(['failClosed', 'match', 'skip'])
  .describe(
    'When `when` fails to evaluate: `failClosed` (default) counts the rule if it raises risk (positive score, challenge or deny) and skips it if it lowers risk; `match` always counts it; `skip` never does. A failing rule is no evidence: with failClosed or match the decision is degraded, its verdict at most the degraded verdict.',
  );
export type OnError = z.infer<typeof onErrorSchema>;

const timeoutMsSchema = z
  .number()
  .int()
  .min(1)
  .max(10_000)
  .describe('Milliseconds, inside the decision deadline.');

function signalSettings<P extends z.ZodRawShape>(params: P) {
  return z
    .object({
      timeoutMs: timeoutMsSchema.optional(),
      onUnavailable: onUnavailableSchema.optional(),
      params: z.object(params).strict().optional().describe('Vendor query options for this signal.'),
    })
    .strict();
}

const supportingSignalParam = { supportingSignal: z.enum(SUPPORTING_SIGNAL_TYPES).optional() };

export const signalSettingsSchema = z
  .object({
    remoteAccessTool: signalSettings({
      baselineScope: z.enum(['interaction_anchored', 'full_history']).optional(),
    }),
    newBrowser: signalSettings({
      matchScope: z.enum(['browser_profile', 'full_fingerprint']).optional(),
      cooldownSeconds: z.number().int().min(0).optional(),
    }),
    latestProximity: signalSettings(supportingSignalParam),
    historicalProximity: signalSettings(supportingSignalParam),
    geovelocity: signalSettings({}),
    activeCall: signalSettings({}),
    geolocation: signalSettings({}),
  })
  .partial()
  .strict();

const adminReadSchema = z
  .object({ timeoutMs: timeoutMsSchema.optional(), onUnavailable: onUnavailableSchema.optional() })
  .strict();

export const ruleSchema = z
  .object({
    id: idSchema,
    description: z.string().min(1),
    when: expressionSchema.describe('CEL expression of type bool.'),
    score: z
      .number()
      .finite()
      .optional()
      .describe('Added to the total when the rule matches (may be negative).'),
    verdict: verdictSchema.optional().describe('Hard verdict; overrides the score.'),
    actions: z.array(idSchema).optional().describe('Names from `actions`, taken when the rule matches.'),
    suppressActions: z
      .array(idSchema)
      .optional()
      .describe(
        'Names from `actions` NOT taken when the rule matches, whoever asked for them (a verdict binding or another rule).',
      ),
    onError: onErrorSchema.optional(),
    shadow: z
      .boolean()
      .optional()
      .describe('Evaluate and report the rule, but never count it: trial an edit on live traffic.'),
    askUser: z
      .boolean()
      .optional()
      .describe(
        'Ask the user "was this you?" when the rule matches a challenged or denied login of a known user: the decision\'s webhook event carries a signed, single-use, expiring link (docs/ask-user.md). The answer becomes a label; a "no" takes the policy\'s `askUser.onNo` actions.',
      ),
  })
  .strict();
export type PolicyRule = z.infer<typeof ruleSchema>;

/** Longest temporary lock-out, and longest escalation window: 30 days. */
export const MAX_LOCK_OUT_MS = 720 * 3600 * 1000;

const lockOutDurationSchema = z.string().refine((d) => {
  const ms = parseWindow(d);
  return ms !== undefined && ms >= 10_000 && ms <= MAX_LOCK_OUT_MS;
}, 'must be a duration like 30s, 30m or 24h, from 10s to 720h');

export const actionSchema = z.discriminatedUnion('type', [
  z
    .object({
      type: z.literal('lock_out_user'),
      description: z.string().optional(),
      requireFirstFactor: z
        .boolean()
        .optional()
        .describe(
          'Lock out only when the request says its first factor passed (`firstFactor: passed`); ' +
            'otherwise the verdict stands and the lock-out is withheld (`first_factor_not_passed`). ' +
            'Default true: whoever knows a username must not be able to lock its owner out. False only ' +
            'for a login backend that calls /decide after checking the password.',
        ),
      duration: lockOutDurationSchema
        .optional()
        .describe(
          'A temporary lock-out: riskgate unlocks the user when it ends (scheduled durably in the outbox), ' +
            'unless an operator or a later lock-out extended it. `<n>s`, `<n>m` or `<n>h`, 10s to 720h. ' +
            'Default: permanent, until someone unlocks the user.',
        ),
      escalateWithin: lockOutDurationSchema
        .optional()
        .describe(
          'With `duration`: a lock-out within this long of the same user’s previous one is permanent.',
        ),
    })
    .strict()
    .refine((a) => a.escalateWithin === undefined || a.duration !== undefined, {
      message: 'escalateWithin needs a duration: a lock-out without one is permanent already',
      path: ['escalateWithin'],
    }),
  z
    .object({
      type: z.literal('archive_device'),
      description: z.string().optional(),
      select: expressionSchema
        .optional()
        .describe("CEL list<string> of device ids to archive; default: the request's deviceId."),
    })
    .strict(),
  z
    .object({
      type: z.literal('restrict_factors'),
      description: z.string().optional(),
      allowedFactors: z.array(z.enum(FACTORS)).min(1),
    })
    .strict(),
  z
    .object({
      type: z.literal('one_time_code'),
      description: z.string().optional(),
      length: z.number().int().min(4).max(20).optional(),
      validSecs: z.number().int().min(60).max(604_800).optional(),
    })
    .strict(),
]);
export type PolicyActionConfig = z.infer<typeof actionSchema>;

const cidrSchema = z
  .string()
  .refine((s) => parseCidrShape(s), 'must be an IPv4 or IPv6 CIDR, e.g. 203.0.113.0/24');

function parseCidrShape(s: string): boolean {
  const slash = s.indexOf('/');
  if (slash < 0) return false;
  const bits = Number(s.slice(slash + 1));
  const addr = s.slice(0, slash);
  if (!Number.isInteger(bits) || bits < 0) return false;
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(addr))
    return bits <= 32 && addr.split('.').every((o) => Number(o) <= 255);
  return addr.includes(':') && bits <= 128;
}

export const overrideEntrySchema = z
  .object({
    id: idSchema,
    accounts: z.array(z.string().min(1)).optional().describe('accountIds (exact match).'),
    cidrs: z.array(cidrSchema).optional().describe('IPv4/IPv6 CIDRs matched against request.ip.'),
    expiresAt: z.iso.datetime({ offset: true }).describe('RFC 3339; the entry is ignored from then on.'),
    reason: z.string().min(1),
  })
  .strict();
export type OverrideEntry = z.infer<typeof overrideEntrySchema>;

/** The inputs an outage rule can name: every input of the table. */
const OUTAGE_INPUTS = INPUT_NAMES;

const counterFieldSchema = z
  .union([
    z.enum(COUNTER_REQUEST_FIELDS),
    z.string().regex(/^context\.[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'must be a request field or context.<key>'),
  ])
  .describe(`A request field (${COUNTER_REQUEST_FIELDS.join(', ')}) or \`context.<key>\`.`);

/** Longest counter window: 24 hours. */
export const MAX_COUNTER_WINDOW_MS = 24 * 3600 * 1000;

const windowSchema = z
  .string()
  .refine((w) => {
    const ms = parseWindow(w);
    return ms !== undefined && ms >= 10_000 && ms <= MAX_COUNTER_WINDOW_MS;
  }, 'must be a duration like 30s, 10m, 1h or 24h, from 10s to 24h')
  .describe('Sliding window: `<n>s`, `<n>m` or `<n>h`, 10s to 24h.');

export const counterSchema = z
  .object({
    description: z.string().optional(),
    key: z
      .array(counterFieldSchema)
      .min(1)
      .max(4)
      .describe('What is counted per: e.g. `[ip]` counts per IP address, `[accountId]` per account.'),
    count: z
      .enum(['decisions', 'denies', 'distinct'])
      .describe(
        '`decisions` (every decision, this one included), `denies` (earlier denied decisions) or `distinct` (distinct values of `of`, this one included).',
      ),
    of: counterFieldSchema
      .optional()
      .describe('For `count: distinct`: the field whose distinct values are counted.'),
    window: windowSchema,
  })
  .strict();
export type CounterDefinition = z.infer<typeof counterSchema>;

const featureReadSettings = {
  timeoutMs: timeoutMsSchema.optional(),
  onUnavailable: onUnavailableSchema.optional(),
};

const velocitySchema = z
  .object({
    ...featureReadSettings,
    counters: z
      .record(
        z
          .string()
          .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'counter names must be identifiers (A-Z, a-z, 0-9, _)'),
        counterSchema,
      )
      .refine((o) => Object.keys(o).length >= 1 && Object.keys(o).length <= 32, 'from 1 to 32 counters')
      .describe("Counters over riskgate's own decisions, read in CEL as `velocity.<name>` (a number)."),
  })
  .strict()
  .describe(
    'Velocity counters: sliding-window counts over decisions, in the feature store (memory, or Redis for replicas). Read in one round trip within `timeoutMs`; unavailable (store down or slow) per `onUnavailable`.',
  );

const historySchema = z
  .object({
    ...featureReadSettings,
    maxLagSeconds: z
      .number()
      .int()
      .min(130)
      .max(86_400)
      .optional()
      .describe(
        'History is unavailable while the Log API follower is further behind now than this (default 600; the API itself is 2 minutes behind).',
      ),
  })
  .strict()
  .describe("Settings of the user's event history from the Log API (`history.<feature>` in CEL).");

/** What a runtime list's entries are matched against (`lists.<name>.contains(...)`). */
export const LIST_KEY_KINDS = ['ip', 'accountId', 'userId', 'unitId'] as const;
export type ListKeyKind = (typeof LIST_KEY_KINDS)[number];

/** A list entry's time-to-live: `<n>s`, `<n>m`, `<n>h` or `<n>d`; undefined when not one. */
export function parseTtl(text: string): number | undefined {
  const m = /^(\d{1,6})(s|m|h|d)$/.exec(text);
  if (!m) return undefined;
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd'];
  return Number(m[1]) * unit;
}

/** Longest time-to-live of a list entry: about ten years. */
export const MAX_LIST_TTL_MS = 3650 * 86_400_000;

const listSchema = z
  .object({
    key: z
      .enum(LIST_KEY_KINDS)
      .describe(
        'What an entry is: `ip` (an IPv4/IPv6 address or CIDR, matched against request.ip by prefix), `accountId`, `userId` or `unitId` (matched exactly).',
      ),
    ttl: z
      .string()
      .refine((t) => {
        const ms = parseTtl(t);
        return ms !== undefined && ms >= 1000 && ms <= MAX_LIST_TTL_MS;
      }, 'must be a duration like 30s, 10m, 24h or 7d, from 1s to 3650d')
      .optional()
      .describe('Default time-to-live of an entry added without one; unset: entries never expire.'),
    description: z.string().optional(),
  })
  .strict();
export type ListDeclaration = z.infer<typeof listSchema>;

const listsSchema = z
  .record(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'list names must be identifiers (A-Z, a-z, 0-9, _)'),
    listSchema,
  )
  .refine((o) => Object.keys(o).length <= 64, 'at most 64 lists')
  .describe(
    'Runtime lists: entries added and removed by operators at runtime (operator API, `riskgate lists`), kept in the database (RISKGATE_DATABASE) and shared by every replica within 2 s. Read in CEL as `lists.<name>.contains(value)`; unavailable (the snapshot is stale: the database has not answered for 10 s) per `defaults.onUnavailable`.',
  );

const outageRuleSchema = z
  .object({
    id: idSchema,
    description: z.string().optional(),
    when: z
      .object({
        unavailableAtLeast: z
          .number()
          .int()
          .min(1)
          .optional()
          .describe('Matches when at least this many inputs the policy reads are unavailable.'),
        unavailable: z
          .array(z.enum(OUTAGE_INPUTS))
          .min(1)
          .optional()
          .describe('Matches when every one of these inputs is unavailable.'),
      })
      .strict()
      .describe(
        'Both given: both must hold. Inputs `not_applicable` (another platform) or `missing_identifiers` (the request lacked them) never count.',
      ),
    verdict: verdictSchema.describe(
      'The verdict unavailability amounts to: replaces what the unavailable inputs would add (their onUnavailable); rules on the inputs that answered still count, and a harder verdict of theirs wins.',
    ),
  })
  .strict();

const outageSchema = z
  .object({
    maxUnavailableScore: z
      .number()
      .finite()
      .min(0)
      .optional()
      .describe('The most that onUnavailable scores may add up to in one decision.'),
    rules: z
      .array(outageRuleSchema)
      .optional()
      .describe('Checked in order; the first that matches decides what unavailability amounts to.'),
  })
  .strict()
  .describe(
    'What a decision is when inputs are unavailable beyond their own onUnavailable: so a vendor outage challenges instead of denying everyone.',
  );

const degradedSchema = z
  .object({
    verdict: z
      .enum(['challenge', 'deny'], {
        error: (issue) =>
          issue.input === 'allow'
            ? 'must be challenge or deny: an allow would let whoever can stress riskgate (flood it, slow its vendor) open the gate'
            : 'must be challenge or deny',
      })
      .describe(
        'The verdict of a degraded decision (default challenge): at least this when an input a risk-raising rule reads could not be gathered or a rule could not be evaluated, and at most this unless the evidence denies. `deny` denies on missing evidence; `allow` is refused.',
      ),
  })
  .strict()
  .describe(
    "What riskgate answers when its own state (timeouts, open breakers, the evaluation budget) cost it an input or a rule: stress can only make a verdict more careful, never more permissive, and never harsher than the evidence (policies/README.md, 'Degraded decisions').",
  );

export const policyFileSchema = z
  .object({
    apiVersion: z.literal(POLICY_API_VERSION),
    kind: z.literal('Policy'),
    name: idSchema,
    description: z.string().optional(),
    defaults: z
      .object({
        timeoutMs: timeoutMsSchema.optional(),
        onUnavailable: onUnavailableSchema.optional(),
        onError: onErrorSchema.optional(),
        evaluationBudgetMs: z
          .number()
          .int()
          .min(1)
          .max(1000)
          .optional()
          .describe(
            "CPU-time budget of one evaluation, in milliseconds (default 20): riskgate's own work, not time the scheduler took. Past it, the remaining rules are not evaluated and the decision is degraded (never a deny on that account).",
          ),
      })
      .strict()
      .optional(),
    thresholds: z
      .object({
        challenge: z.number().finite().describe('total >= challenge gives challenge'),
        deny: z.number().finite().describe('total >= deny gives deny'),
      })
      .strict(),
    signals: signalSettingsSchema.optional(),
    admin: z
      .object({ user: adminReadSchema.optional(), devices: adminReadSchema.optional() })
      .strict()
      .optional(),
    velocity: velocitySchema.optional(),
    history: historySchema.optional(),
    lists: listsSchema.optional(),
    rules: z.array(ruleSchema).min(1),
    actions: z.record(idSchema, actionSchema).optional(),
    verdictActions: z
      .object({
        allow: z.array(idSchema).optional(),
        challenge: z.array(idSchema).optional(),
        deny: z.array(idSchema).optional(),
      })
      .strict()
      .optional()
      .describe('Actions taken whenever the final verdict is this one.'),
    overrides: z
      .object({
        allow: z.array(overrideEntrySchema).optional(),
        deny: z.array(overrideEntrySchema).optional(),
      })
      .strict()
      .optional(),
    askUser: z
      .object({
        onNo: z
          .array(idSchema)
          .optional()
          .describe(
            'Names from `actions` (each a `lock_out_user`) taken when the user answers "no, this was not me". Never an unlock: a "yes" only labels.',
          ),
      })
      .strict()
      .optional()
      .describe('What a "was this you?" answer does (rules ask with `askUser: true`; docs/ask-user.md).'),
    outage: outageSchema.optional(),
    degraded: degradedSchema.optional(),
    overload: z
      .object({
        verdict: z
          .enum(['challenge', 'deny'], {
            error: (issue) =>
              issue.input === 'allow'
                ? 'must be challenge or deny: an allow would let whoever can flood riskgate open the gate'
                : 'must be challenge or deny',
          })
          .describe(
            'Answered (200, degraded, reason overloaded) without any upstream call or action to a decision riskgate sheds: challenge or deny (`allow` is refused: an attacker controls the load).',
          ),
      })
      .strict()
      .optional()
      .describe(
        'What a login gets when riskgate is overloaded and sheds it. Without it the caller gets 503 with Retry-After and decides itself.',
      ),
  })
  .strict();
export type PolicyFile = z.infer<typeof policyFileSchema>;

/** Cross-field checks, each with the path of the offending value. */
export function crossCheckPolicy(p: PolicyFile): { path: (string | number)[]; message: string }[] {
  const issues: { path: (string | number)[]; message: string }[] = [];
  if (p.thresholds.challenge > p.thresholds.deny) {
    issues.push({
      path: ['thresholds', 'challenge'],
      message: 'challenge threshold must not exceed deny threshold',
    });
  }
  const seen = new Set<string>();
  const actionNames = new Set(Object.keys(p.actions ?? {}));
  p.rules.forEach((rule, i) => {
    if (seen.has(rule.id))
      issues.push({ path: ['rules', i, 'id'], message: `duplicate rule id "${rule.id}"` });
    seen.add(rule.id);
    if ((rule.score === undefined) === (rule.verdict === undefined)) {
      issues.push({ path: ['rules', i], message: 'a rule needs exactly one of `score` or `verdict`' });
    }
    rule.actions?.forEach((a, j) => {
      if (!actionNames.has(a))
        issues.push({ path: ['rules', i, 'actions', j], message: `unknown action "${a}"` });
    });
    rule.suppressActions?.forEach((a, j) => {
      const path = ['rules', i, 'suppressActions', j];
      if (!actionNames.has(a)) issues.push({ path, message: `unknown action "${a}"` });
      else if (rule.actions?.includes(a))
        issues.push({ path, message: `the rule both takes and suppresses action "${a}"` });
    });
  });
  for (const v of ['allow', 'challenge', 'deny'] as const) {
    p.verdictActions?.[v]?.forEach((a, j) => {
      if (!actionNames.has(a))
        issues.push({ path: ['verdictActions', v, j], message: `unknown action "${a}"` });
    });
  }
  p.askUser?.onNo?.forEach((a, j) => {
    const path = ['askUser', 'onNo', j];
    if (!actionNames.has(a)) issues.push({ path, message: `unknown action "${a}"` });
    else if (p.actions?.[a]?.type !== 'lock_out_user')
      issues.push({ path, message: `action "${a}" is not a lock_out_user: a "no" only locks the user out` });
  });
  for (const [name, c] of Object.entries(p.velocity?.counters ?? {})) {
    if (c.count === 'distinct' && c.of === undefined)
      issues.push({ path: ['velocity', 'counters', name], message: 'a `distinct` counter needs `of`' });
    if (c.count !== 'distinct' && c.of !== undefined)
      issues.push({
        path: ['velocity', 'counters', name, 'of'],
        message: '`of` is only for `count: distinct`',
      });
    if (c.of !== undefined && c.key.includes(c.of))
      issues.push({
        path: ['velocity', 'counters', name, 'of'],
        message: `counting distinct ${c.of} per ${c.of} always gives 1`,
      });
  }
  const outageIds = new Set<string>();
  p.outage?.rules?.forEach((r, i) => {
    if (outageIds.has(r.id) || seen.has(r.id))
      issues.push({ path: ['outage', 'rules', i, 'id'], message: `duplicate rule id "${r.id}"` });
    outageIds.add(r.id);
    if (r.when.unavailableAtLeast === undefined && r.when.unavailable === undefined) {
      issues.push({
        path: ['outage', 'rules', i, 'when'],
        message: 'an outage rule needs `unavailableAtLeast` or `unavailable`',
      });
    }
  });
  const overrideIds = new Set<string>();
  for (const list of ['allow', 'deny'] as const) {
    p.overrides?.[list]?.forEach((e, i) => {
      if (overrideIds.has(e.id))
        issues.push({ path: ['overrides', list, i, 'id'], message: `duplicate override id "${e.id}"` });
      overrideIds.add(e.id);
      if (!e.accounts?.length && !e.cidrs?.length) {
        issues.push({ path: ['overrides', list, i], message: 'an override needs `accounts` or `cidrs`' });
      }
    });
  }
  return issues;
}
