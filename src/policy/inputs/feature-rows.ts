import { DEFAULT_HISTORY_MAX_LAG_SECONDS, type HistoryFeatures } from '../../features/history-features.ts';
import { HISTORY_FIELDS, HistoryView, ListView, listContains } from '../cel-environment.ts';
import { fillHistory, fillLists, fillVelocity } from '../policy-activation.ts';
import {
  type InputContext,
  type InputPolicy,
  type InputRow,
  inputRow,
  leafFacts,
  unavailableReport,
} from './input-row.ts';
import type { ListLookup } from './input-values.ts';
import { MISSING, MISSING_IDENTIFIERS, NOT_CONFIGURED } from './unavailable-reason.ts';

/**
 * The rows riskgate keeps itself: velocity counters and the user's event history (the feature
 * store, src/features/), and the runtime lists (src/lists/). Unavailable, velocity and history
 * keep their reason in the policy input's `featuresUnavailable`, the lists in `listsUnavailable`.
 */

/** Velocity counters: the feature store, under the same deadline. */
export const VELOCITY_ROW: InputRow<unknown, 'velocity'> = inputRow<Record<string, number>, 'velocity'>({
  name: 'velocity',
  callName: 'velocity',
  cel: {
    variable: 'velocity',
    type: 'map<string, double>',
    description: "The policy's velocity counters by name (`velocity.accountsPerIp`).",
    availability: false,
  },
  readBy: (policy) => policy.requirements.velocity,
  needed: (ctx) => ctx.policy.requirements.velocity || ctx.shadow?.requirements.velocity === true,
  applies: (ctx) =>
    ctx.ports.features === undefined || ctx.counterPlan === undefined ? NOT_CONFIGURED : 'ok',
  timeoutMs: (ctx) =>
    ctx.policy.featureSettings?.velocity?.timeoutMs ??
    ctx.shadow?.featureSettings?.velocity?.timeoutMs ??
    ctx.budgetMs,
  fetch: (ctx) => ctx.ports.features!.readVelocity(ctx.counterPlan!, ctx.nowMs),
  land: (draft, outcome) => {
    if (outcome.status === 'ok') draft.values.velocity = outcome.value;
    else {
      draft.values.featuresUnavailable ??= {};
      draft.values.featuresUnavailable.velocity = outcome.reason;
    }
  },
  reason: (values) =>
    values.velocity === undefined ? (values.featuresUnavailable?.velocity ?? MISSING) : undefined,
  fill: fillVelocity,
  report: (values, treatment) =>
    values.velocity !== undefined
      ? { status: 'ok', result: values.velocity }
      : unavailableReport(values.featuresUnavailable?.velocity ?? MISSING, treatment),
  describe: (values) => {
    const label = 'velocity';
    if (values.velocity !== undefined)
      return { label, facts: leafFacts(values.velocity, 'velocity', Number.POSITIVE_INFINITY) };
    const reason = values.featuresUnavailable?.velocity;
    return reason === undefined ? undefined : { label, unavailable: reason };
  },
});

const historySettings = (ctx: InputContext) =>
  ctx.policy.featureSettings?.history ?? ctx.shadow?.featureSettings?.history;

/**
 * The bound on the event history's lag a decision reads it with, milliseconds: the policy's
 * (`features.history.maxLagSeconds`), else the shadow's, else the default. The one declaration:
 * `/readyz` holds the process back against the same bound (src/service/log-follower.ts).
 */
export function historyMaxLagMs(
  policy: Pick<InputPolicy, 'featureSettings'>,
  shadow?: Pick<InputPolicy, 'featureSettings'>,
): number {
  const settings = policy.featureSettings?.history ?? shadow?.featureSettings?.history;
  return settings?.maxLagMs ?? DEFAULT_HISTORY_MAX_LAG_SECONDS * 1000;
}

/** The user's event history (fed by the Log API follower). */
export const HISTORY_ROW: InputRow<unknown, 'history'> = inputRow<HistoryFeatures, 'history'>({
  name: 'history',
  callName: 'history',
  cel: {
    variable: 'history',
    type: 'History',
    types: [{ name: 'History', ctor: HistoryView, fields: HISTORY_FIELDS }],
    description: "The user's event history from the Log API.",
    availability: true,
  },
  readBy: (policy) => policy.requirements.history,
  needed: (ctx) => ctx.policy.requirements.history || ctx.shadow?.requirements.history === true,
  applies: (ctx) => {
    const features = ctx.ports.features;
    if (features === undefined || features.historyConfigured === false) return NOT_CONFIGURED;
    return ctx.request.userId === undefined ? MISSING_IDENTIFIERS : 'ok';
  },
  timeoutMs: (ctx) => historySettings(ctx)?.timeoutMs ?? ctx.budgetMs,
  fetch: (ctx) =>
    ctx.ports.features!.readHistory(ctx.request.userId!, ctx.nowMs, historyMaxLagMs(ctx.policy, ctx.shadow)),
  land: (draft, outcome) => {
    if (outcome.status === 'ok') draft.values.history = outcome.value;
    else {
      draft.values.featuresUnavailable ??= {};
      draft.values.featuresUnavailable.history = outcome.reason;
    }
  },
  reason: (values) =>
    values.history === undefined ? (values.featuresUnavailable?.history ?? MISSING) : undefined,
  fill: fillHistory,
  report: (values, treatment) =>
    values.history !== undefined
      ? { status: 'ok', result: { ...values.history } }
      : unavailableReport(values.featuresUnavailable?.history ?? MISSING, treatment),
  describe: (values) => {
    const label = 'history';
    if (values.history !== undefined) return { label, facts: leafFacts(values.history, 'history') };
    const reason = values.featuresUnavailable?.history;
    return reason === undefined ? undefined : { label, unavailable: reason };
  },
});

/**
 * The runtime lists: this process's in-memory snapshot, so no call and no wait (its fetch resolves
 * at once); unavailable when the snapshot is stale (src/lists/list-sync.ts). Not in the decision
 * log (a snapshot is no value to keep), so not on the console's decision page.
 */
export const LISTS_ROW: InputRow<unknown, 'lists'> = inputRow<ListLookup, 'lists'>({
  name: 'lists',
  callName: 'lists',
  cel: {
    variable: 'lists',
    type: 'map<string, RuntimeList>',
    types: [{ name: 'RuntimeList', ctor: ListView as unknown as new () => object, fields: {} }],
    functions: [
      {
        signature: 'RuntimeList.contains(string): bool',
        fn: listContains,
        description:
          'Whether the value is an unexpired entry of the list: inside one of its CIDRs for an `ip` list, equal to an entry otherwise.',
      },
    ],
    description: "The policy's runtime lists by name (`lists.blockedNetworks.contains(request.ip)`).",
    availability: false,
  },
  readBy: (policy) => policy.requirements.lists === true,
  needed: (ctx) => ctx.policy.requirements.lists === true || ctx.shadow?.requirements.lists === true,
  applies: (ctx) => (ctx.ports.lists === undefined ? NOT_CONFIGURED : 'ok'),
  timeoutMs: (ctx) => ctx.budgetMs,
  fetch: (ctx) => Promise.resolve(ctx.ports.lists!.read(ctx.nowMs)),
  land: (draft, outcome) => {
    if (outcome.status === 'ok') draft.values.lists = outcome.value;
    else draft.values.listsUnavailable = outcome.reason;
  },
  reason: (values) => (values.lists === undefined ? (values.listsUnavailable ?? MISSING) : undefined),
  fill: fillLists,
  report: (values, treatment) =>
    values.lists !== undefined
      ? { status: 'ok' }
      : unavailableReport(values.listsUnavailable ?? MISSING, treatment),
  describe: () => undefined,
});
