import { z } from 'zod';
import type { InputReport } from '../policy/inputs/input-row.ts';
import { tableOf } from '../policy/inputs/input-table.ts';
import { reasonWeight } from '../policy/inputs/unavailable-reason.ts';
import type { PolicyAction, PolicyDecision, UnavailableTreatment } from '../policy/policy-types.ts';
import { SNOOZE_ENTITIES } from '../policy-input/rule-snooze.ts';
import type { CallTiming } from './gather.ts';
import type { DecisionRun } from './run-decision.ts';

/**
 * The body of a /decide answer and its `Server-Timing` header. The zod schema documents the
 * contract (OpenAPI) and is checked in tests; the hot path builds plain objects and never parses
 * its own output.
 */

const verdictSchema = z.enum(['allow', 'challenge', 'deny']);

const signalReportSchema = z.union([
  z
    .strictObject({
      status: z.literal('ok'),
      success: z.boolean().optional(),
      reason: z.string().optional(),
      observationTime: z.string().optional(),
      result: z
        .record(z.string(), z.unknown())
        .optional()
        .describe(
          'The fields a policy can use: the vendor’s `result`, with bulky arrays compacted ' +
            '(supporting signals as the list of matched types, geovelocity as its fastest pair, ' +
            'geolocation as its places). For adminUser: status, failed_attempts, max_attempts; ' +
            'for adminDevices: count.',
        ),
      mismatchedFields: z.array(z.string()).optional().describe('newBrowser: fields that differed.'),
    })
    .describe('The vendor’s answer (success may still be false, with its reason).'),
  z.strictObject({
    status: z.literal('unavailable'),
    reason: z
      .string()
      .describe(
        '`not_applicable` (platform mismatch), `missing_identifiers`, `timeout`, `deadline` or an RG_ERR_* code.',
      ),
    treatment: z
      .string()
      .optional()
      .describe('What the policy did about it: ignore, score:<n>, verdict:<v>.'),
  }),
]);
export type SignalReport = z.infer<typeof signalReportSchema>;
/** The rows' reports are the schema's (src/policy/inputs/input-row.ts `InputReport`). */
type _ReportsMatch = [
  InputReport extends SignalReport ? true : never,
  SignalReport extends InputReport ? true : never,
];

export const ACTION_STATUSES = ['queued', 'deferred', 'done', 'failed', 'skipped'] as const;
export type ActionStatus = (typeof ACTION_STATUSES)[number];

const actionReportSchema = z.object({
  type: z.enum(['lock_out_user', 'archive_device', 'restrict_factors', 'one_time_code']),
  name: z.string().optional(),
  source: z.string().describe('The rule or verdict that asked for it.'),
  status: z
    .enum(ACTION_STATUSES)
    .describe(
      'queued: held (written to the outbox) before this answer, runs after it, retried until done. ' +
        'deferred: runs after this answer too, later, `reason` says why: `subject_unverified` (the ' +
        'Admin user could not be read: queued, and carried out only once verified as the ' +
        'account’s, else dropped), `outbox_timeout` (the outbox did not acknowledge the write ' +
        'within the deadline: this riskgate holds it and writes it when the outbox answers; lost ' +
        'only if this process dies first). done/failed: ran before answering, or (failed, ' +
        '`queue_refused`) could not be held. skipped: not taken, `reason` says why (`no_user_id`, ' +
        '`no_device_id`, `first_factor_not_passed`: a lock-out on a login whose first factor did not ' +
        'pass; the verdict stands).',
    ),
  reason: z.string().optional(),
  oneTimeCode: z.string().optional().describe('For one_time_code: the code to deliver to the user.'),
  expiresAt: z.number().int().optional().describe('For one_time_code: Unix seconds.'),
});
export type ActionReport = z.infer<typeof actionReportSchema>;

export const decideResponseSchema = z.object({
  decisionId: z.uuid(),
  verdict: verdictSchema,
  score: z.number(),
  reasons: z.array(
    z.object({
      id: z.string(),
      description: z.string(),
      score: z.number().optional(),
      verdict: verdictSchema.optional(),
      error: z.string().optional(),
    }),
  ),
  policy: z.object({ name: z.string(), revision: z.string() }),
  signals: z
    .record(z.string(), signalReportSchema)
    .describe(
      'Per input the policy uses: signals by name, adminUser / adminDevices, velocity (counter values) / history (event-history features), and lists (the runtime lists: ok, or unavailable while their snapshot is stale).',
    ),
  actions: z.array(actionReportSchema),
  degraded: z
    .boolean()
    .describe(
      'True when an input the policy uses was unavailable (missing_identifiers included; not_applicable and not_configured aside), a rule could not be evaluated (explanation.degraded), or riskgate was overloaded.',
    ),
  reason: z
    .literal('overloaded')
    .optional()
    .describe(
      'Present only when riskgate did not evaluate the login: overloaded, it answered the policy’s overload verdict without calling the vendor.',
    ),
  explanation: z
    .object({
      thresholds: z.object({ challenge: z.number(), deny: z.number() }),
      decidedBy: z
        .enum(['override', 'verdict', 'score', 'outage', 'degraded', 'overload'])
        .describe(
          'An allow/deny list entry, a rule’s (or onUnavailable’s) hard verdict, the score, an outage rule of the policy that raised the verdict, the policy’s degraded rule (it raised the verdict to its floor or capped a deny that rested on no evidence; see `degraded`), or the policy’s overload verdict (nothing was evaluated).',
        ),
      degraded: z
        .object({
          verdict: z.enum(['challenge', 'deny']).describe('The policy’s degraded verdict.'),
          inputs: z
            .array(z.object({ input: z.string(), reason: z.string() }))
            .describe(
              'Inputs riskgate could not gather (timeout, deadline, circuit_open, an RG_ERR_* code); never not_applicable, missing_identifiers or not_configured.',
            ),
          rules: z
            .array(z.object({ id: z.string(), reason: z.enum(['evaluation_budget', 'evaluation_error']) }))
            .describe('Rules riskgate could not evaluate: its CPU budget ran out, or the expression failed.'),
          floor: z
            .boolean()
            .describe(
              'The verdict is at least the degraded verdict: a degraded input is read by a risk-raising rule, or such a rule could not be evaluated.',
            ),
          cappedFrom: verdictSchema
            .optional()
            .describe(
              'The verdict before it was capped at the degraded verdict: a deny that rested on no evidence.',
            ),
        })
        .optional()
        .describe(
          'Present when riskgate’s own state (timeouts, open breakers, its evaluation budget) cost the decision an input or a rule, or the degraded rule changed the verdict: stress only ever makes a verdict more careful, never more permissive, never harsher than the evidence.',
        ),
      outage: z
        .object({
          unavailableInputs: z.number().int(),
          rule: z
            .object({
              id: z.string(),
              description: z.string().optional(),
              verdict: z.enum(['allow', 'challenge', 'deny']),
            })
            .optional(),
          cappedScore: z.object({ unavailableScore: z.number(), counted: z.number() }).optional(),
        })
        .optional()
        .describe(
          'The policy’s outage section applied: the outage rule that decided what unavailability amounted to, or the cap on what onUnavailable scores added.',
        ),
      skipped: z
        .array(z.object({ id: z.string(), reason: z.string() }))
        .optional()
        .describe(
          'Rules not counted: an input they read was unavailable, or they failed with onError: skip.',
        ),
      suppressedActions: z
        .array(
          z.object({
            name: z.string(),
            type: z.string(),
            source: z.string(),
            reason: z.enum(['rule_error', 'suppressed_by_rule', 'first_factor_not_passed']),
            by: z.string().optional(),
          }),
        )
        .optional()
        .describe(
          'Actions asked for but not taken: a failing rule’s, withheld by a rule’s suppressActions, or a lock-out withheld because the request did not say its first factor passed (first_factor_not_passed; also in `actions` as skipped).',
        ),
      snoozed: z
        .array(
          z.object({
            id: z.string().describe('The rule.'),
            snoozeId: z.string().describe('The snooze (`DELETE /snoozes/{id}` ends it).'),
            entity: z.enum(SNOOZE_ENTITIES),
            value: z.string().describe('What was snoozed: the id, or for `ip` the network.'),
            until: z.string().describe('When the rule comes back for this entity (RFC 3339).'),
          }),
        )
        .optional()
        .describe(
          'Rules that matched (or failed) but are snoozed for this login’s account, user, unit or IP: not counted (no score, verdict or action), as if they had not matched.',
        ),
      snoozesUnavailable: z
        .string()
        .optional()
        .describe(
          'The rule snoozes could not be read (RG_ERR_SNOOZES_UNAVAILABLE: their snapshot is stale): every rule counted as if nothing were snoozed, the careful side.',
        ),
    })
    .describe('How the verdict came about, beyond the matched rules in `reasons`.'),
  elapsedMs: z.number(),
});
export type DecideResponse = z.infer<typeof decideResponseSchema>;

function treatmentOf(unavailable: UnavailableTreatment[], name: string): string | undefined {
  for (const u of unavailable) if (u.signal === name) return u.treatment;
  return undefined;
}

/**
 * Whether an input the active policy reads was unavailable for a reason that degrades the answer
 * (`unavailable-reason.ts`: not `not_applicable`, not `not_configured`), or the evaluator reports
 * a degraded evaluation (an input riskgate failed to gather, a rule it could not evaluate). An
 * input fetched for the shadow alone (or the Admin user read for subject binding) does not count.
 */
export function isDegraded(run: DecisionRun): boolean {
  if (run.decision.degraded !== undefined) return true;
  const { policy, input } = run;
  for (const row of tableOf(policy)) {
    if (!row.readBy(policy)) continue;
    const reason = row.reason(input);
    if (reason !== undefined && reasonWeight(reason).degradesAnswer) return true;
  }
  return false;
}

/** Report of one policy action (`status` decided by the caller, which owns the queue). */
export function actionReport(action: PolicyAction, status: ActionStatus, reason?: string): ActionReport {
  const report: ActionReport = { type: action.type, source: action.source, status };
  if (action.name !== undefined) report.name = action.name;
  if (reason !== undefined) report.reason = reason;
  return report;
}

/** The one-time code's report, from what `runDecision` fetched. */
export function oneTimeCodeReport(run: DecisionRun, action: PolicyAction): ActionReport {
  const otc = run.oneTimeCode;
  if (otc === undefined) return actionReport(action, 'skipped', 'not_fetched');
  if (otc.status !== 'done') return actionReport(action, otc.status, otc.reason);
  const report = actionReport(action, 'done');
  report.oneTimeCode = otc.code.one_time_code;
  report.expiresAt = otc.code.expiration;
  return report;
}

const round1 = (ms: number) => Math.round(ms * 10) / 10;

/** Builds the /decide answer. */
export function buildDecideResponse(run: DecisionRun, actions: ActionReport[]): DecideResponse {
  const { decision, input, policy } = run;
  const signals: Record<string, SignalReport> = {};
  for (const row of tableOf(policy)) {
    if (!row.readBy(policy)) continue;
    const report = row.report(input, treatmentOf(decision.unavailable, row.name));
    if (report !== undefined) signals[row.name] = report;
  }

  const reasons: DecideResponse['reasons'] = [];
  if (decision.override !== undefined) {
    const o = decision.override;
    reasons.push({
      id: `${o.list}list:${o.id}`,
      description: o.reason,
      verdict: o.list === 'allow' ? 'allow' : 'deny',
    });
  }
  for (const rule of decision.matchedRules) {
    const reason: DecideResponse['reasons'][number] = { id: rule.id, description: rule.description };
    if (rule.score !== undefined) reason.score = rule.score;
    if (rule.verdict !== undefined) reason.verdict = rule.verdict;
    if (rule.error !== undefined) reason.error = rule.error;
    reasons.push(reason);
  }

  return {
    decisionId: run.decisionId,
    verdict: decision.verdict,
    score: decision.score,
    reasons,
    policy: decision.policy,
    signals,
    actions,
    degraded: isDegraded(run),
    explanation: explanationOf(decision),
    elapsedMs: round1(run.elapsedMs),
  };
}

/**
 * A skip reason naming only inputs of another platform (`activeCall unavailable (not_applicable)`):
 * such rules never concern this login, and listing them on every answer is noise.
 */
const OTHER_PLATFORM_ONLY = /^(?:\w+ unavailable \(not_applicable\)(?:, |$))+$/;

function explanationOf(decision: PolicyDecision): DecideResponse['explanation'] {
  const explanation: DecideResponse['explanation'] = {
    thresholds: decision.thresholds,
    decidedBy: decision.decidedBy ?? 'score',
  };
  if (decision.outage !== undefined) explanation.outage = decision.outage;
  if (decision.degraded !== undefined) explanation.degraded = decision.degraded;
  const skipped = decision.skippedRules?.filter((r) => !OTHER_PLATFORM_ONLY.test(r.reason));
  if (skipped !== undefined && skipped.length > 0) explanation.skipped = skipped;
  if (decision.suppressedActions !== undefined && decision.suppressedActions.length > 0) {
    explanation.suppressedActions = decision.suppressedActions;
  }
  if (decision.snoozed !== undefined) explanation.snoozed = decision.snoozed;
  if (decision.snoozesUnavailable !== undefined) explanation.snoozesUnavailable = decision.snoozesUnavailable;
  return explanation;
}

/**
 * The answer to a decision riskgate shed under overload when the policy names an overload verdict:
 * nothing fetched, nothing evaluated, no action.
 */
export function overloadResponse(
  policy: { name: string; revision: string; thresholds: { challenge: number; deny: number } },
  verdict: DecideResponse['verdict'],
  decisionId: string,
  elapsedMs: number,
): DecideResponse {
  return {
    decisionId,
    verdict,
    score: 0,
    reasons: [],
    policy: { name: policy.name, revision: policy.revision },
    signals: {},
    actions: [],
    degraded: true,
    reason: 'overloaded',
    explanation: { thresholds: policy.thresholds, decidedBy: 'overload' },
    elapsedMs,
  };
}

/**
 * `Server-Timing: total;dur=12.3, signals-newBrowser;dur=8.1, admin-user;dur=2.0, policy;dur=0.1,
 * queue;dur=0.4`: `total` from the handler, `queue` (when known) from reading the request to the handler.
 */
export function serverTiming(run: DecisionRun, totalMs: number, queueMs?: number): string {
  let header = `total;dur=${round1(totalMs)}`;
  for (const call of run.calls) header += `, ${timingEntry(call)}`;
  header += `, policy;dur=${round1(run.evaluationMs)}`;
  return queueMs === undefined ? header : `${header}, queue;dur=${round1(queueMs)}`;
}

function timingEntry(call: CallTiming): string {
  const entry = `${call.name};dur=${round1(call.durationMs)}`;
  return call.outcome === 'ok' ? entry : `${entry};desc="${call.outcome}"`;
}
