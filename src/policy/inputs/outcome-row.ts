import { ErrorCode, UpstreamError } from '../../errors/riskgate-error.ts';
import { type InputRow, type RecentStepUps, valueRow } from './input-row.ts';
import { NOT_CONFIGURED } from './unavailable-reason.ts';

/** How far back the `outcomes` input looks, days. */
export const OUTCOMES_WINDOW_DAYS = 7;

/**
 * The account's recent step-up outcomes as the login backend reported them (`POST
 * /decisions/{id}/outcome`), read from the decision store: `outcomes.stepUpsPassed`,
 * `outcomes.stepUpsFailed` over the last `OUTCOMES_WINDOW_DAYS` days, and
 * `outcomes.stepUpsPassedFromUnit` from this login's unit (a user who passed a step-up from this
 * browser yesterday). Without a decision store it is `not_configured`; while the store does not
 * answer, unavailable (`RG_ERR_DECISION_STORE_UNAVAILABLE`), which makes the answer degraded like
 * any input riskgate failed to gather.
 */
export const OUTCOMES_ROW = valueRow<
  RecentStepUps,
  { stepUpsPassed: number; stepUpsFailed: number; stepUpsPassedFromUnit: number }
>({
  name: 'outcomes',
  description: `The account's step-up outcomes reported by the login backend over the last ${OUTCOMES_WINDOW_DAYS} days.`,
  type: {
    name: 'Outcomes',
    fields: { stepUpsPassed: 'double', stepUpsFailed: 'double', stepUpsPassedFromUnit: 'double' },
  },
  newView: () => ({
    available: false,
    reason: '',
    stepUpsPassed: 0,
    stepUpsFailed: 0,
    stepUpsPassedFromUnit: 0,
  }),
  fillView: (view, value) => {
    view.stepUpsPassed = value?.passed ?? 0;
    view.stepUpsFailed = value?.failed ?? 0;
    view.stepUpsPassedFromUnit = value?.passedFromUnit ?? 0;
  },
  applies: (ctx) => (ctx.ports.outcomes === undefined ? NOT_CONFIGURED : 'ok'),
  fetch: async (ctx) => {
    const started = performance.now();
    try {
      const value = await ctx.ports.outcomes!.recentStepUps(
        ctx.request.accountId,
        ctx.request.unitId,
        ctx.nowMs - OUTCOMES_WINDOW_DAYS * 24 * 3600 * 1000,
      );
      return { ok: true, value, durationMs: performance.now() - started };
    } catch (cause) {
      const error = new UpstreamError(
        ErrorCode.DECISION_STORE_UNAVAILABLE,
        'The decision store did not answer for the outcomes input.',
        { upstream: 'features' },
        { cause },
      );
      return { ok: false, error, durationMs: performance.now() - started };
    }
  },
  result: (value) => ({
    stepUpsPassed: value.passed,
    stepUpsFailed: value.failed,
    stepUpsPassedFromUnit: value.passedFromUnit,
  }),
}) as InputRow<unknown, 'outcomes'>;
