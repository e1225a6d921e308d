import { z } from 'zod';
import type { PolicyAction, SignalOutcome, UnavailableTreatment } from '../policy/policy-types.ts';
import type { CallTiming, DecisionRun } from './run-decision.ts';
import { NOT_APPLICABLE } from './signal-queries.ts';

/**
 * The body of a /decide answer and its `Server-Timing` header. The zod schema documents the
 * contract (OpenAPI) and is checked in tests; the hot path builds plain objects and never parses
 * its own output.
 */

const verdictSchema = z.enum(['allow', 'challenge', 'deny']);

const signalReportSchema = z.union([
  z
    .looseObject({
      status: z.literal('ok'),
      success: z.boolean().optional(),
      reason: z.string().optional(),
      result: z.record(z.string(), z.unknown()).optional(),
    })
    .describe('The vendor’s answer (success may still be false, with its reason).'),
  z.object({
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

export const ACTION_STATUSES = ['queued', 'done', 'failed', 'skipped'] as const;
export type ActionStatus = (typeof ACTION_STATUSES)[number];

const actionReportSchema = z.object({
  type: z.enum(['lock_out_user', 'archive_device', 'restrict_factors', 'one_time_code']),
  name: z.string().optional(),
  source: z.string().describe('The rule or verdict that asked for it.'),
  status: z
    .enum(ACTION_STATUSES)
    .describe('queued: runs after this answer, retried until done; done/failed: ran before answering.'),
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
    .describe('Per input the policy uses: signals by name, and adminUser / adminDevices.'),
  actions: z.array(actionReportSchema),
  degraded: z
    .boolean()
    .describe(
      'True when an input the policy uses was unavailable (missing_identifiers included; not_applicable aside).',
    ),
  elapsedMs: z.number(),
});
export type DecideResponse = z.infer<typeof decideResponseSchema>;

function treatmentOf(unavailable: UnavailableTreatment[], name: string): string | undefined {
  for (const u of unavailable) if (u.signal === name) return u.treatment;
  return undefined;
}

function unavailableReport(reason: string, treatment: string | undefined): SignalReport {
  return treatment === undefined
    ? { status: 'unavailable', reason }
    : { status: 'unavailable', reason, treatment };
}

function signalReport(outcome: SignalOutcome, treatment: string | undefined): SignalReport {
  if (outcome.status === 'unavailable') return unavailableReport(outcome.reason, treatment);
  const { signalType: _, ...fields } = outcome.response;
  return { status: 'ok', ...fields };
}

/** Whether any input the policy uses was unavailable for a reason other than not applying. */
export function isDegraded(run: DecisionRun): boolean {
  for (const outcome of Object.values(run.input.signals)) {
    if (outcome.status === 'unavailable' && outcome.reason !== NOT_APPLICABLE) return true;
  }
  const admin = run.input.adminUnavailable;
  if (admin === undefined) return false;
  return (
    (admin.user !== undefined && admin.user !== NOT_APPLICABLE) ||
    (admin.devices !== undefined && admin.devices !== NOT_APPLICABLE)
  );
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
  for (const name of policy.requirements.signals) {
    const outcome = input.signals[name];
    if (outcome !== undefined) signals[name] = signalReport(outcome, treatmentOf(decision.unavailable, name));
  }
  const admin = input.adminUnavailable;
  if (policy.requirements.adminUser) {
    signals.adminUser =
      admin?.user === undefined
        ? { status: 'ok' }
        : unavailableReport(admin.user, treatmentOf(decision.unavailable, 'adminUser'));
  }
  if (policy.requirements.adminDevices) {
    signals.adminDevices =
      admin?.devices === undefined
        ? { status: 'ok', count: input.devices.length }
        : unavailableReport(admin.devices, treatmentOf(decision.unavailable, 'adminDevices'));
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
    elapsedMs: round1(run.elapsedMs),
  };
}

/** `Server-Timing: total;dur=12.3, signals-newBrowser;dur=8.1, admin-user;dur=2.0, policy;dur=0.1`. */
export function serverTiming(run: DecisionRun, totalMs: number): string {
  let header = `total;dur=${round1(totalMs)}`;
  for (const call of run.calls) header += `, ${timingEntry(call)}`;
  return `${header}, policy;dur=${round1(run.evaluationMs)}`;
}

function timingEntry(call: CallTiming): string {
  const entry = `${call.name};dur=${round1(call.durationMs)}`;
  return call.outcome === 'ok' ? entry : `${entry};desc="${call.outcome}"`;
}
