import type { AdminDevice, AdminUser } from '../../admin/admin-schemas.ts';
import type { HistoryFeatures } from '../../features/history-features.ts';
import type { PolicyRequest } from '../../policy-input/policy-request.ts';
import type { DecisionSnoozes } from '../../policy-input/rule-snooze.ts';
import type {
  ActiveCallResponse,
  GeolocationResponse,
  GeovelocityResponse,
  HistoricalProximityResponse,
  LatestProximityResponse,
  NewBrowserResponse,
  RemoteAccessToolResponse,
} from '../../signals/signal-schemas.ts';

/**
 * The values a decision's inputs take, as the policy engine sees them: the names of the inputs
 * (one row each in `input-table.ts`), what each holds in a `PolicyInput` and what the policy
 * declares it needs of them. Below the rows, the engine and the decision service, which all read
 * them (src/policy/policy-types.ts re-exports them).
 */

/** Signals a policy can reference, by riskgate's name (`signals.<name>` in CEL). */
export const POLICY_SIGNAL_NAMES = [
  'remoteAccessTool',
  'newBrowser',
  'latestProximity',
  'historicalProximity',
  'geovelocity',
  'activeCall',
  'geolocation',
] as const;
export type PolicySignalName = (typeof POLICY_SIGNAL_NAMES)[number];

/**
 * Every input a policy can read, in the input table's order (src/policy/inputs/input-table.ts): the
 * signals, the two Admin reads, the two feature reads, the runtime lists and the login backend's
 * outcomes. The order is the
 * order of the answer's `signals`, of `explanation` entries and of the activation's bits.
 */
export const INPUT_NAMES = [
  ...POLICY_SIGNAL_NAMES,
  'adminUser',
  'adminDevices',
  'velocity',
  'history',
  'lists',
  'outcomes',
] as const;
export type InputName = (typeof INPUT_NAMES)[number];

/** The parsed vendor envelope of each signal. */
export interface SignalResponses {
  remoteAccessTool: RemoteAccessToolResponse;
  newBrowser: NewBrowserResponse;
  latestProximity: LatestProximityResponse;
  historicalProximity: HistoricalProximityResponse;
  geovelocity: GeovelocityResponse;
  activeCall: ActiveCallResponse;
  geolocation: GeolocationResponse;
}

/**
 * What the decision service got for one signal. `ok` carries the vendor envelope as received
 * (which may itself say `success: false` with a reason such as `insufficient_observations`);
 * `unavailable` means riskgate got no usable answer (timeout, upstream error, skipped), and the
 * policy's `onUnavailable` for that signal applies.
 */
export type SignalOutcome<N extends PolicySignalName = PolicySignalName> =
  | { status: 'ok'; response: SignalResponses[N] }
  | {
      status: 'unavailable';
      /** Why: `timeout`, `deadline`, or an `RG_ERR_*` code, or `not_requested` (missing inputs). */
      reason: string;
    };

/** Everything one evaluation sees. */
export interface PolicyInput {
  signals: { [N in PolicySignalName]?: SignalOutcome<N> };
  /** The Admin user; `undefined` when not requested or not available (see `adminUnavailable`). */
  user?: AdminUser | undefined;
  /** The user's devices; empty when not requested or unavailable. */
  devices: AdminDevice[];
  /** Admin reads that were required but failed, with the reason. */
  adminUnavailable?: { user?: string; devices?: string };
  /** `velocity.<name>` values, when the policy reads counters and the store answered. */
  velocity?: Record<string, number> | undefined;
  /** `history.<feature>` values, when the policy reads history and it is available. */
  history?: HistoryFeatures | undefined;
  /** Feature reads that were required but failed (store down, follower behind), with the reason. */
  featuresUnavailable?: { velocity?: string; history?: string };
  /** The runtime lists (`lists.<name>` in CEL), when the policy reads them and their snapshot is fresh. */
  lists?: ListLookup | undefined;
  /** Why the runtime lists are unavailable (a stale snapshot: `RG_ERR_LISTS_UNAVAILABLE`). */
  listsUnavailable?: string | undefined;
  /**
   * Inputs of rows beyond the ones named above (a row that keeps its value generically, see
   * `valueRow` in src/policy/inputs/input-row.ts), by name: the value, or why it is unavailable.
   */
  extra?: Record<string, InputOutcome> | undefined;
  /**
   * The rule snoozes (src/snoozes/): a snoozed rule does not count for the entity it is snoozed
   * for. Absent: no snoozes configured (tests, replay).
   */
  snoozes?: DecisionSnoozes | undefined;
  request: PolicyRequest;
  /** Evaluation time. */
  now: Date;
}

/** The runtime lists as a decision reads them (src/lists/ keeps them). */
export interface ListLookup {
  /**
   * Whether `value` is an entry of list `name` that has not expired at `nowMs` (epoch ms): a
   * prefix match for an IP list's CIDRs, an exact match otherwise.
   */
  contains(name: string, value: string, nowMs: number): boolean;
}

/** What a policy needs fetched; derived by static analysis of its expressions. */
export interface PolicyRequirements {
  signals: ReadonlySet<PolicySignalName>;
  adminUser: boolean;
  adminDevices: boolean;
  /** Reads `velocity` (the counters in `velocityCounters`). */
  velocity: boolean;
  /** Reads `history` (keyed by the request's userId). */
  history: boolean;
  /** Reads `lists` (the runtime lists' in-memory snapshot). */
  lists?: boolean;
  /** Every input the policy reads, by name (the table's rows; the fields above say the same of theirs). */
  inputs?: ReadonlySet<string>;
  /**
   * The fields of each signal's view the policy reads (`signals.<name>.<field>`), `*` when it may
   * read any; absent: any field of every signal it reads.
   */
  signalFields?: ReadonlyMap<PolicySignalName, ReadonlySet<string>>;
}

/** Settings of the feature reads (`velocity`, `history` in the policy). */
export interface FeatureReadSettings {
  /** Milliseconds, inside the decision deadline. */
  timeoutMs: number;
}

/** Per-signal settings the decision service needs before evaluating. */
export interface SignalSettings {
  /** This signal's own timeout, milliseconds (inside the decision deadline). */
  timeoutMs: number;
  /** Vendor query options the policy chose (e.g. new-browser `matchScope`, `cooldownSeconds`). */
  params: Record<string, string | number | boolean>;
}

/** Per-read settings of the Admin API reads (`admin.user`, `admin.devices` in the policy). */
export interface AdminReadSettings {
  /** Milliseconds (inside the decision deadline). */
  timeoutMs: number;
}

/** An input's value as its fetch gave it, or why there is none (src/decide/gather.ts). */
export type InputOutcome<T = unknown> =
  | { status: 'ok'; value: T }
  /** `timeout`, `deadline`, `circuit_open` or an `RG_ERR_*` code, or a reason of `unavailable-reason.ts`. */
  | { status: 'unavailable'; reason: string };
