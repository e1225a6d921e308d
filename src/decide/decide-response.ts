import { z } from 'zod';
import { NOT_CONFIGURED } from '../policy/policy-evaluator.ts';
import type {
  PolicyAction,
  PolicyDecision,
  PolicySignalName,
  SignalOutcome,
  SignalResponses,
  UnavailableTreatment,
} from '../policy/policy-types.ts';
import type { CallTiming } from './gather.ts';
import type { DecisionRun } from './run-decision.ts';
import { NOT_APPLICABLE } from './signal-queries.ts';

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
    })
    .describe('How the verdict came about, beyond the matched rules in `reasons`.'),
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

type SupportingSignals = readonly { type: string; details: { matched: boolean } }[] | undefined;

/** The supporting signals that matched, by type: what a policy reads (`matchedSignals`). */
function matchedSignals(list: SupportingSignals): string[] {
  const out: string[] = [];
  if (list !== undefined) for (const s of list) if (s.details.matched) out.push(s.type);
  return out;
}

function proximityMatch(
  m: { proximityConfidence: number; supportingSignals?: SupportingSignals } | null | undefined,
) {
  if (m === null || m === undefined) return null;
  return { proximityConfidence: m.proximityConfidence, matchedSignals: matchedSignals(m.supportingSignals) };
}

/**
 * The part of a signal's `result` a policy can read, small: the hot path serialises it on every
 * answer, and the decision log keeps the vendor's whole answer for replay.
 */
function compactResult(
  name: PolicySignalName,
  response: SignalResponses[PolicySignalName],
): object | undefined {
  const result = response.result;
  if (result === undefined) return undefined;
  switch (name) {
    case 'latestProximity':
      return proximityMatch(result as SignalResponses['latestProximity']['result']) ?? undefined;
    case 'historicalProximity': {
      const r = result as NonNullable<SignalResponses['historicalProximity']['result']>;
      return { bestMatch: proximityMatch(r.bestMatch), bestIngressMatch: proximityMatch(r.bestIngressMatch) };
    }
    case 'geovelocity': {
      const r = result as NonNullable<SignalResponses['geovelocity']['result']>;
      const out: Record<string, unknown> = { anomaly: r.anomaly, maxSpeedKmh: r.maxSpeedKmh };
      let fastest = -1;
      for (const source of r.sources) {
        if (source.thresholdKmh !== null && out.thresholdKmh === undefined)
          out.thresholdKmh = source.thresholdKmh;
        const pair = source.fastestPair;
        if (pair !== null && pair.speedKmh > fastest) {
          fastest = pair.speedKmh;
          out.distanceKm = pair.distanceKm;
          out.elapsedSeconds = pair.elapsedSeconds;
          if (source.thresholdKmh !== null) out.thresholdKmh = source.thresholdKmh;
        }
      }
      return out;
    }
    case 'geolocation': {
      const r = result as NonNullable<SignalResponses['geolocation']['result']>;
      const out: Record<string, unknown> = {};
      for (const d of r.datapoints) {
        if (d.valueType === 'geo') out[d.name === 'geo' ? 'gps' : d.name] = { lat: d.lat, lon: d.lon };
        else if (d.valueType === 'string' && d.name.startsWith('ingress_ip_')) out[d.name] = d.value;
      }
      return out;
    }
    default:
      // remoteAccessTool, newBrowser, activeCall: a few scalars already.
      return result;
  }
}

function signalReport(
  name: PolicySignalName,
  outcome: SignalOutcome,
  treatment: string | undefined,
): SignalReport {
  if (outcome.status === 'unavailable') return unavailableReport(outcome.reason, treatment);
  const response = outcome.response;
  const report: SignalReport = { status: 'ok', success: response.success };
  if (response.reason !== undefined) report.reason = response.reason;
  const observationTime =
    'observationTimesByUnit' in response
      ? (response.observationTimesByUnit?.subjectUnitId ?? response.observationTime)
      : response.observationTime;
  if (observationTime !== undefined) report.observationTime = observationTime;
  const result = compactResult(name, response);
  if (result !== undefined) report.result = result as Record<string, unknown>;
  if ('mismatchedFields' in response && response.mismatchedFields !== undefined) {
    report.mismatchedFields = response.mismatchedFields;
  }
  return report;
}

/**
 * Whether any input the policy uses was unavailable for a reason other than not applying or not
 * being configured (a start-up warning, not a per-decision degradation), or the evaluator reports
 * a degraded evaluation (a rule it could not evaluate).
 */
export function isDegraded(run: DecisionRun): boolean {
  if (run.decision.degraded !== undefined) return true;
  // Only what the active policy reads: an input fetched for the shadow alone (or the Admin user
  // read for subject binding) does not make the answer degraded.
  const needs = run.policy.requirements;
  for (const [name, outcome] of Object.entries(run.input.signals)) {
    if (!needs.signals.has(name as PolicySignalName)) continue;
    if (outcome.status === 'unavailable' && outcome.reason !== NOT_APPLICABLE) return true;
  }
  const features = run.input.featuresUnavailable;
  if (features !== undefined) {
    if (needs.velocity && features.velocity !== undefined && features.velocity !== NOT_CONFIGURED)
      return true;
    if (needs.history && features.history !== undefined && features.history !== NOT_CONFIGURED) return true;
  }
  const admin = run.input.adminUnavailable;
  if (admin === undefined) return false;
  return (
    (needs.adminUser && admin.user !== undefined && admin.user !== NOT_APPLICABLE) ||
    (needs.adminDevices && admin.devices !== undefined && admin.devices !== NOT_APPLICABLE)
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
    if (outcome !== undefined) {
      signals[name] = signalReport(name, outcome, treatmentOf(decision.unavailable, name));
    }
  }
  const admin = input.adminUnavailable;
  if (policy.requirements.adminUser) {
    const user = input.user;
    signals.adminUser =
      admin?.user === undefined && user !== undefined
        ? {
            status: 'ok',
            result: {
              status: user.status,
              failed_attempts: user.failed_attempts,
              max_attempts: user.max_attempts,
            },
          }
        : unavailableReport(admin?.user ?? 'missing', treatmentOf(decision.unavailable, 'adminUser'));
  }
  if (policy.requirements.adminDevices) {
    signals.adminDevices =
      admin?.devices === undefined
        ? { status: 'ok', result: { count: input.devices.length } }
        : unavailableReport(admin.devices, treatmentOf(decision.unavailable, 'adminDevices'));
  }
  const features = input.featuresUnavailable;
  if (policy.requirements.velocity) {
    signals.velocity =
      input.velocity !== undefined
        ? { status: 'ok', result: input.velocity }
        : unavailableReport(features?.velocity ?? 'missing', treatmentOf(decision.unavailable, 'velocity'));
  }
  if (policy.requirements.history) {
    signals.history =
      input.history !== undefined
        ? { status: 'ok', result: { ...input.history } }
        : unavailableReport(features?.history ?? 'missing', treatmentOf(decision.unavailable, 'history'));
  }
  if (policy.requirements.lists === true) {
    signals.lists =
      input.lists !== undefined
        ? { status: 'ok' }
        : unavailableReport(input.listsUnavailable ?? 'missing', treatmentOf(decision.unavailable, 'lists'));
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
