import type { AdminClient } from '../../admin/admin-client.ts';
import type { FeatureReader } from '../../features/feature-reader.ts';
import type { CounterPlan } from '../../features/velocity-counters.ts';
import type { CallOptions, UpstreamResult } from '../../upstream/upstream-result.ts';
import type { Activation, CelBinding } from '../cel-environment.ts';
import type {
  AdminReadSettings,
  FeatureReadSettings,
  InputName,
  InputOutcome,
  ListLookup,
  PolicyInput,
  PolicyRequirements,
  PolicySignalName,
  SignalResponses,
  SignalSettings,
} from './input-values.ts';
import type { InputRequest, SignalQueries } from './signal-queries.ts';
import type { UnavailableReason } from './unavailable-reason.ts';

/**
 * One input of a decision, whole: a row of the input table (`input-table.ts`). A row owns its
 * fetch (whether the decision needs it, whether it can be fetched for this login, its timeout, the
 * call), its value in the policy's input and its "unavailable" shape there, how it appears in CEL
 * (its binding and how it fills its view), its report in the /decide answer and its line on the
 * console's decision page. Its part in "degraded" is its unavailable reason, weighed once
 * (`unavailable-reason.ts`). Everything else loops over the rows: adding an input is adding a row.
 */

/** Fetches one Trust Signals signal. Resolves (never rejects) with an `UpstreamResult`. */
export type SignalFetcher = <N extends PolicySignalName>(
  name: N,
  query: SignalQueries[N],
  options: CallOptions,
) => Promise<UpstreamResult<SignalResponses[N]>>;

/** The runtime lists' snapshot (src/lists/list-sync.ts). */
export interface ListSnapshotReader {
  read(nowMs: number): UpstreamResult<ListLookup>;
}

/** Counts of the step-ups an account's decisions of a window were reported to have. */
export interface RecentStepUps {
  passed: number;
  failed: number;
  /** Passed on decisions from the same unit (device, browser) as this login. */
  passedFromUnit: number;
}

/** The login backend's outcomes (src/decision-store/recent-outcomes.ts). */
export interface RecentOutcomesReader {
  /** The step-ups of `accountId`'s decisions made after `sinceMs` (epoch ms); rejects when the store fails. */
  recentStepUps(accountId: string, unitId: string | undefined, sinceMs: number): Promise<RecentStepUps>;
}

/** The clients the rows fetch from. */
export interface InputPorts {
  signals: SignalFetcher;
  admin: Pick<AdminClient, 'getUserCached' | 'getUserDevicesCached'>;
  /**
   * Velocity counters and event history (src/features/). Without it, a policy that reads them sees
   * them unavailable (`not_configured`) and nothing is counted.
   */
  features?: FeatureReader | undefined;
  /**
   * The runtime lists' in-memory snapshot (src/lists/). Without it, a policy that reads lists
   * sees them unavailable (`not_configured`).
   */
  lists?: ListSnapshotReader | undefined;
  /**
   * The login backend's outcomes in the decision store (src/decision-store/recent-outcomes.ts). Without it (no decision
   * store), a policy that reads them sees them unavailable (`not_configured`).
   */
  outcomes?: RecentOutcomesReader | undefined;
}

/** What the rows read of a compiled policy (src/policy/policy-types.ts `CompiledPolicy`). */
export interface InputPolicy {
  requirements: PolicyRequirements;
  signalSettings: { [N in PolicySignalName]?: SignalSettings };
  adminSettings?: { user?: AdminReadSettings; devices?: AdminReadSettings };
  featureSettings?: {
    velocity?: FeatureReadSettings;
    history?: FeatureReadSettings & { maxLagMs: number };
  };
}

/** What the rows of one decision read. */
export interface InputContext {
  ports: InputPorts;
  request: InputRequest;
  policy: InputPolicy;
  /** The shadow policy (RISKGATE_SHADOW_POLICY_PATH): what it reads is fetched too. */
  shadow: InputPolicy | undefined;
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

/** The values of a decision's inputs: a policy input without the request and the clock. */
export type InputValues = Omit<PolicyInput, 'request' | 'now'>;

/** The policy's input as the rows fill it; the signals only the shadow reads kept apart. */
export interface InputDraft {
  values: InputValues;
  shadowSignals: PolicyInput['signals'];
}

/** An input's report in the /decide answer (`signals.<name>`, src/decide/decide-response.ts). */
export type InputReport =
  | {
      status: 'ok';
      success?: boolean;
      reason?: string;
      observationTime?: string;
      result?: Record<string, unknown>;
      mismatchedFields?: string[];
    }
  | { status: 'unavailable'; reason: string; treatment?: string };

/** An input's line on the console's decision page: what it held, or why nothing. */
export type InputDescription =
  | { label: string; facts: [string, string][] }
  | { label: string; unavailable: string }
  | { label: string; note: string };

/** One input of a decision. */
export interface InputRow<T = unknown, N extends string = InputName> {
  /** Its name: in CEL's explanations, `onUnavailable` treatments, outage rules, the answer's `signals`. */
  name: N;
  /** The call's name in Server-Timing, metrics and the decision log (`signals-newBrowser`, `admin-user`). */
  callName: string;
  /** How it appears in CEL. */
  cel: CelBinding;
  /** Whether the active policy reads it (its report in the answer and its part in `degraded`). */
  readBy(policy: InputPolicy): boolean;
  /** Whether this decision fetches it (the active or the shadow policy reads it, or subject binding). */
  needed(ctx: InputContext): boolean;
  /** `ok` to fetch it, else why it is unavailable without a call. */
  applies(ctx: InputContext): 'ok' | UnavailableReason;
  /** Its own timeout, milliseconds (the rest of the deadline when the policy sets none). */
  timeoutMs(ctx: InputContext): number;
  fetch(ctx: InputContext, call: CallOptions): Promise<UpstreamResult<T>>;
  /** Puts its outcome (fetched, or unavailable without a call) into the policy's input. */
  land(into: InputDraft, outcome: InputOutcome<T>): void;
  /** Why it is unavailable in `values`, or undefined when it has a value. */
  reason(values: InputValues): string | undefined;
  /** Fills its view of the activation from `input`; false when it is unavailable. */
  fill(act: Activation, input: PolicyInput): boolean;
  /** Its report in the answer (`treatment`: what the policy did about it being unavailable). */
  report(values: InputValues, treatment: string | undefined): InputReport | undefined;
  /** Its line on the console's decision page, from the decision log's inputs; undefined: none. */
  describe(values: InputValues): InputDescription | undefined;
}

/** The rows a policy is compiled against, in order; bit `i` of an unavailability mask is row `i`. */
export type InputTable = readonly InputRow<unknown, string>[];

/** A typed row in an untyped table (each row lands only what it fetched). */
export function inputRow<T, N extends string>(r: InputRow<T, N>): InputRow<unknown, N> {
  return r as unknown as InputRow<unknown, N>;
}

/** A value as short text: scalars as they are, anything else as compact JSON. */
export function shortText(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  const json = JSON.stringify(value);
  return json.length > 300 ? `${json.slice(0, 300)}…` : json;
}

/** The leaves of a value (a vendor envelope) as `path: value` pairs (at most `max`). */
export function leafFacts(value: unknown, prefix = '', max = 14): [string, string][] {
  const out: [string, string][] = [];
  const walk = (v: unknown, path: string, depth: number) => {
    if (out.length >= max) return;
    if (v !== null && typeof v === 'object' && !Array.isArray(v) && depth < 4) {
      for (const [k, inner] of Object.entries(v)) walk(inner, path === '' ? k : `${path}.${k}`, depth + 1);
      return;
    }
    out.push([path, shortText(v)]);
  };
  walk(value, prefix, 0);
  return out;
}

/** The report of an input without a value: its reason and what the policy did about it. */
export function unavailableReport(reason: string, treatment: string | undefined): InputReport {
  return treatment === undefined
    ? { status: 'unavailable', reason }
    : { status: 'unavailable', reason, treatment };
}

/** What a row built by `valueRow` says beyond the generic parts. */
export interface ValueRowSpec<T, V extends object> {
  name: string;
  /** The CEL variable's description. */
  description: string;
  /** The view's CEL type: its name and fields (`available` and `reason` are added). */
  type: { name: string; fields: Record<string, string> };
  /** A view at its zero values (with `available` and `reason`). */
  newView: () => V & { available: boolean; reason: string };
  /** Copies a value into the view (`undefined`: back to zero values). */
  fillView(view: V, value: T | undefined): void;
  applies?: (ctx: InputContext) => 'ok' | UnavailableReason;
  timeoutMs?: (ctx: InputContext) => number;
  fetch(ctx: InputContext, call: CallOptions): Promise<UpstreamResult<T>>;
  /** The answer's `result` of a value (default: none). */
  result?: (value: T) => Record<string, unknown>;
}

/**
 * A row whose value is kept in the policy input's `extra` under its name, and read in CEL as a
 * variable of its own (`<name>.available`, `<name>.<field>`): everything a new input needs but its
 * fetch and its view.
 */
export function valueRow<T, V extends object>(spec: ValueRowSpec<T, V>): InputRow<unknown, string> {
  const { name } = spec;
  const outcomeOf = (values: InputValues) => values.extra?.[name] as InputOutcome<T> | undefined;
  const reason = (values: InputValues) => {
    const o = outcomeOf(values);
    return o === undefined ? 'missing' : o.status === 'unavailable' ? o.reason : undefined;
  };
  const ViewType = class {};
  return inputRow<T, string>({
    name,
    callName: name,
    cel: {
      variable: name,
      type: spec.type.name,
      types: [
        {
          name: spec.type.name,
          ctor: ViewType,
          fields: { available: 'bool', reason: 'string', ...spec.type.fields },
        },
      ],
      description: spec.description,
      availability: true,
      newView: () => Object.assign(new ViewType(), spec.newView()),
    },
    readBy: (policy) => policy.requirements.inputs?.has(name) === true,
    needed: (ctx) =>
      ctx.policy.requirements.inputs?.has(name) === true ||
      ctx.shadow?.requirements.inputs?.has(name) === true,
    applies: spec.applies ?? (() => 'ok'),
    timeoutMs: spec.timeoutMs ?? ((ctx) => ctx.budgetMs),
    fetch: spec.fetch,
    land: (draft, outcome) => {
      draft.values.extra ??= {};
      draft.values.extra[name] = outcome;
    },
    reason,
    fill: (act, input) => {
      const view = act[name] as V & { available: boolean; reason: string };
      const o = outcomeOf(input);
      view.available = o?.status === 'ok';
      view.reason = view.available ? '' : (reason(input) ?? '');
      spec.fillView(view, o?.status === 'ok' ? o.value : undefined);
      return view.available;
    },
    report: (values, treatment) => {
      const o = outcomeOf(values);
      if (o?.status !== 'ok') return unavailableReport(reason(values) ?? 'missing', treatment);
      const result = spec.result?.(o.value);
      return result === undefined ? { status: 'ok' } : { status: 'ok', result };
    },
    describe: (values) => {
      const o = outcomeOf(values);
      if (o === undefined) return undefined;
      if (o.status === 'unavailable') return { label: name, unavailable: o.reason };
      return { label: name, facts: leafFacts(spec.result?.(o.value) ?? {}) };
    },
  });
}
