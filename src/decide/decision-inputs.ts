import type { AdminDevice, AdminUser } from '../admin/admin-schemas.ts';
import type { FeatureReader } from '../features/feature-reader.ts';
import { DEFAULT_HISTORY_MAX_LAG_SECONDS, type HistoryFeatures } from '../features/history-features.ts';
import type { CounterPlan } from '../features/velocity-counters.ts';
import type { ListReader } from '../lists/list-sync.ts';
import {
  type CompiledPolicy,
  type ListLookup,
  POLICY_SIGNAL_NAMES,
  type PolicyInput,
  type PolicySignalName,
  type SignalOutcome,
} from '../policy/policy-types.ts';
import type { CallOptions, UpstreamResult } from '../upstream/upstream-result.ts';
import type { AdminPort, SignalFetcher } from './decide-ports.ts';
import type { DecideRequest } from './decide-request.ts';
import {
  type CallTiming,
  type GatherOptions,
  gather,
  type InputOutcome,
  type InputSource,
} from './gather.ts';
import { applicability, buildSignalQuery, MISSING_IDENTIFIERS } from './signal-queries.ts';

/**
 * What a decision reads, as a table: one row per input (each signal, a signal only the shadow
 * policy reads, the Admin user and devices, velocity, history). A row says whether the decision
 * needs it, whether it can be fetched for this login (or why not), its timeout, how to fetch it and
 * where its outcome lands in the policy's input. `gatherInputs` fetches every needed row at once
 * through `gather`, under the decision's one deadline. Adding an input is adding a row.
 */

/** Reason of a feature read when riskgate runs without a feature store (or nothing feeds it). */
export const FEATURES_NOT_CONFIGURED = 'not_configured';

/** The clients the rows fetch from. */
export interface InputPorts {
  signals: SignalFetcher;
  admin: AdminPort;
  /**
   * Velocity counters and event history (src/features/). Without it, a policy that reads them sees
   * them unavailable (`not_configured`) and nothing is counted.
   */
  features?: FeatureReader | undefined;
  /**
   * The runtime lists' in-memory snapshot (src/lists/). Without it, a policy that reads lists
   * sees them unavailable (`not_configured`).
   */
  lists?: ListReader | undefined;
}

/** What the rows of one decision read. */
export interface InputContext {
  ports: InputPorts;
  request: DecideRequest;
  policy: CompiledPolicy;
  /** The shadow policy (RISKGATE_SHADOW_POLICY_PATH): what it reads is fetched too. */
  shadow: CompiledPolicy | undefined;
  /** Subject binding is on: the Admin user is read whenever the request names one (src/subject/). */
  bindsSubject: boolean;
  /** The velocity counters of the active and shadow policies for this request. */
  counterPlan: CounterPlan | undefined;
  /** What is left of the deadline, milliseconds: the timeout of an input that sets none. */
  budgetMs: number;
  /** `Date.now()` when the decision started: the feature reads' clock. */
  nowMs: number;
  traceparent: string | undefined;
}

/** The policy input's parts as the rows fill them; the signals only the shadow reads kept apart. */
export interface InputDraft {
  signals: PolicyInput['signals'];
  shadowSignals: PolicyInput['signals'];
  user: AdminUser | undefined;
  devices: AdminDevice[];
  adminUnavailable: { user?: string; devices?: string };
  velocity: Record<string, number> | undefined;
  history: HistoryFeatures | undefined;
  featuresUnavailable: { velocity?: string; history?: string };
  lists: ListLookup | undefined;
  listsUnavailable: string | undefined;
}

/** One input of a decision. */
export interface InputRow<T = unknown> {
  /** The call's name in Server-Timing, metrics and the decision log. */
  name: string;
  /** Whether this decision reads it (the active or the shadow policy, or subject binding). */
  needed(ctx: InputContext): boolean;
  /**
   * `ok` to fetch it, else why it is unavailable without a call: `not_applicable` (another
   * platform's signal), `missing_identifiers`, `not_configured`.
   */
  applies(ctx: InputContext): string;
  /** Its own timeout, milliseconds (the rest of the deadline when the policy sets none). */
  timeoutMs(ctx: InputContext): number;
  fetch(ctx: InputContext, call: CallOptions): Promise<UpstreamResult<T>>;
  /** Where its outcome (fetched, or unavailable without a call) lands. */
  land(into: InputDraft, outcome: InputOutcome<T>): void;
}

/** A row of a typed input, in the untyped table (each row lands only what it fetched). */
function row<T>(r: InputRow<T>): InputRow {
  return r as unknown as InputRow;
}

/** A signal the active policy reads (`signals-<name>`), or only the shadow (`shadow-signals-<name>`). */
function signalRow(name: PolicySignalName, reader: 'active' | 'shadow'): InputRow {
  const settingsOf = (ctx: InputContext) =>
    (reader === 'active' ? ctx.policy : ctx.shadow)?.signalSettings[name];
  const into = reader === 'active' ? 'signals' : 'shadowSignals';
  return row({
    name: reader === 'active' ? `signals-${name}` : `shadow-signals-${name}`,
    needed: () => true, // a row per signal the policies read (`decisionRows`)
    applies: (ctx) => applicability(name, ctx.request),
    timeoutMs: (ctx) => settingsOf(ctx)?.timeoutMs ?? ctx.budgetMs,
    fetch: (ctx, call) =>
      ctx.ports.signals(name, buildSignalQuery(name, ctx.request, settingsOf(ctx)?.params), call),
    land: (draft, outcome) => {
      (draft[into] as Record<PolicySignalName, SignalOutcome>)[name] =
        outcome.status === 'ok' ? ({ status: 'ok', response: outcome.value } as SignalOutcome) : outcome;
    },
  });
}

const SIGNAL_ROWS = {
  active: new Map(POLICY_SIGNAL_NAMES.map((n) => [n, signalRow(n, 'active')])),
  shadow: new Map(POLICY_SIGNAL_NAMES.map((n) => [n, signalRow(n, 'shadow')])),
};

/**
 * The Admin user. Read through the client's shared cache, which bounds a caller by the deadline
 * signal alone (its own timeout is `gather`'s). With subject binding it is read even when no policy
 * uses it: riskgate must know whose account it would act on.
 */
const ADMIN_USER = row<AdminUser>({
  name: 'admin-user',
  needed: (ctx) =>
    ctx.policy.requirements.adminUser ||
    ctx.shadow?.requirements.adminUser === true ||
    (ctx.bindsSubject && ctx.request.userId !== undefined),
  applies: (ctx) => (ctx.request.userId === undefined ? MISSING_IDENTIFIERS : 'ok'),
  timeoutMs: (ctx) => ctx.policy.adminSettings?.user?.timeoutMs ?? ctx.budgetMs,
  fetch: (ctx, call) => ctx.ports.admin.getUserCached(ctx.request.userId!, call),
  land: (draft, outcome) => {
    if (outcome.status === 'ok') draft.user = outcome.value;
    else draft.adminUnavailable.user = outcome.reason;
  },
});

const ADMIN_DEVICES = row<{ devices: AdminDevice[] }>({
  name: 'admin-devices',
  needed: (ctx) => ctx.policy.requirements.adminDevices || ctx.shadow?.requirements.adminDevices === true,
  applies: (ctx) => (ctx.request.userId === undefined ? MISSING_IDENTIFIERS : 'ok'),
  timeoutMs: (ctx) => ctx.policy.adminSettings?.devices?.timeoutMs ?? ctx.budgetMs,
  fetch: (ctx, call) => ctx.ports.admin.getUserDevicesCached(ctx.request.userId!, undefined, call),
  land: (draft, outcome) => {
    if (outcome.status === 'ok') draft.devices = outcome.value.devices;
    else draft.adminUnavailable.devices = outcome.reason;
  },
});

/** Velocity counters: the feature store, under the same deadline. */
const VELOCITY = row<Record<string, number>>({
  name: 'velocity',
  needed: (ctx) => ctx.policy.requirements.velocity || ctx.shadow?.requirements.velocity === true,
  applies: (ctx) =>
    ctx.ports.features === undefined || ctx.counterPlan === undefined ? FEATURES_NOT_CONFIGURED : 'ok',
  timeoutMs: (ctx) =>
    ctx.policy.featureSettings?.velocity?.timeoutMs ??
    ctx.shadow?.featureSettings?.velocity?.timeoutMs ??
    ctx.budgetMs,
  fetch: (ctx) => ctx.ports.features!.readVelocity(ctx.counterPlan!, ctx.nowMs),
  land: (draft, outcome) => {
    if (outcome.status === 'ok') draft.velocity = outcome.value;
    else draft.featuresUnavailable.velocity = outcome.reason;
  },
});

const historySettings = (ctx: InputContext) =>
  ctx.policy.featureSettings?.history ?? ctx.shadow?.featureSettings?.history;

/** The user's event history (fed by the Log API follower). */
const HISTORY = row<HistoryFeatures>({
  name: 'history',
  needed: (ctx) => ctx.policy.requirements.history || ctx.shadow?.requirements.history === true,
  applies: (ctx) => {
    const features = ctx.ports.features;
    if (features === undefined || features.historyConfigured === false) return FEATURES_NOT_CONFIGURED;
    return ctx.request.userId === undefined ? MISSING_IDENTIFIERS : 'ok';
  },
  timeoutMs: (ctx) => historySettings(ctx)?.timeoutMs ?? ctx.budgetMs,
  fetch: (ctx) =>
    ctx.ports.features!.readHistory(
      ctx.request.userId!,
      ctx.nowMs,
      historySettings(ctx)?.maxLagMs ?? DEFAULT_HISTORY_MAX_LAG_SECONDS * 1000,
    ),
  land: (draft, outcome) => {
    if (outcome.status === 'ok') draft.history = outcome.value;
    else draft.featuresUnavailable.history = outcome.reason;
  },
});

/**
 * The runtime lists: this process's in-memory snapshot, so no call and no wait (its fetch resolves
 * at once); unavailable when the snapshot is stale (src/lists/list-sync.ts).
 */
const LISTS = row<ListLookup>({
  name: 'lists',
  needed: (ctx) => ctx.policy.requirements.lists === true || ctx.shadow?.requirements.lists === true,
  applies: (ctx) => (ctx.ports.lists === undefined ? FEATURES_NOT_CONFIGURED : 'ok'),
  timeoutMs: (ctx) => ctx.budgetMs,
  fetch: (ctx) => Promise.resolve(ctx.ports.lists!.read(ctx.nowMs)),
  land: (draft, outcome) => {
    if (outcome.status === 'ok') draft.lists = outcome.value;
    else draft.listsUnavailable = outcome.reason;
  },
});

/** The inputs beside the signals, in the order they start. */
const FIXED_ROWS: readonly InputRow[] = [ADMIN_USER, ADMIN_DEVICES, VELOCITY, HISTORY, LISTS];

/** Signals only the shadow policy reads: fetched beside the others, kept out of the active decision. */
export function shadowOnlySignals(policy: CompiledPolicy, shadow: CompiledPolicy | undefined) {
  if (shadow === undefined) return [];
  return [...shadow.requirements.signals].filter((s) => !policy.requirements.signals.has(s));
}

/** The rows of one decision: each signal the active policy reads, those only the shadow reads, the rest. */
function decisionRows(ctx: InputContext, shadowOnly: readonly PolicySignalName[]): InputRow[] {
  const rows: InputRow[] = [];
  for (const name of ctx.policy.requirements.signals) rows.push(SIGNAL_ROWS.active.get(name)!);
  for (const name of shadowOnly) rows.push(SIGNAL_ROWS.shadow.get(name)!);
  rows.push(...FIXED_ROWS);
  return rows.filter((r) => r.needed(ctx));
}

/**
 * Fetches every input the decision needs, all at once under the deadline (`gather`); an input that
 * cannot be fetched for this login is unavailable at once, with its reason, and costs no call.
 */
export async function gatherInputs(
  ctx: InputContext,
  shadowOnly: readonly PolicySignalName[],
  options: GatherOptions,
): Promise<{ draft: InputDraft; calls: CallTiming[] }> {
  const draft: InputDraft = {
    signals: {},
    shadowSignals: {},
    user: undefined,
    devices: [],
    adminUnavailable: {},
    velocity: undefined,
    history: undefined,
    featuresUnavailable: {},
    lists: undefined,
    listsUnavailable: undefined,
  };
  const fetched: InputRow[] = [];
  const sources: InputSource[] = [];
  for (const r of decisionRows(ctx, shadowOnly)) {
    const applies = r.applies(ctx);
    if (applies !== 'ok') {
      r.land(draft, { status: 'unavailable', reason: applies });
      continue;
    }
    fetched.push(r);
    sources.push({
      name: r.name,
      timeoutMs: r.timeoutMs(ctx),
      fetch: (call) =>
        r.fetch(ctx, ctx.traceparent === undefined ? call : { ...call, traceparent: ctx.traceparent }),
    });
  }
  const { outcomes, calls } = await gather(sources, options);
  for (let i = 0; i < fetched.length; i++) fetched[i]!.land(draft, outcomes[i]!);
  return { draft, calls };
}

/** The policy's input from what was gathered (the shadow-only signals left out). */
export function policyInputOf(draft: InputDraft, request: PolicyInput['request'], now: Date): PolicyInput {
  const input: PolicyInput = {
    signals: draft.signals,
    user: draft.user,
    devices: draft.devices,
    request,
    now,
  };
  const { adminUnavailable, featuresUnavailable } = draft;
  if (adminUnavailable.user !== undefined || adminUnavailable.devices !== undefined) {
    input.adminUnavailable = adminUnavailable;
  }
  if (draft.velocity !== undefined) input.velocity = draft.velocity;
  if (draft.history !== undefined) input.history = draft.history;
  if (featuresUnavailable.velocity !== undefined || featuresUnavailable.history !== undefined) {
    input.featuresUnavailable = featuresUnavailable;
  }
  if (draft.lists !== undefined) input.lists = draft.lists;
  if (draft.listsUnavailable !== undefined) input.listsUnavailable = draft.listsUnavailable;
  return input;
}
