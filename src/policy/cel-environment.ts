import { Environment } from '@marcbachmann/cel-js';
import { HISTORY_FEATURE_NAMES } from '../features/history-features.ts';
import { type Cidr, cidrContains, parseCidr, parseIpShared } from '../net/ip-cidr.ts';
import { checkEvaluationBudget } from './evaluation-budget.ts';
import type { ListLookup, PolicySignalName } from './inputs/input-values.ts';
import { RE2_MATCHES_NAME, re2Matches } from './re2-matches.ts';

/**
 * The typed CEL environment policies are checked against, and the view classes the evaluator fills
 * per decision. Every field a view declares is always present with a zero value (`false`, `0.0`,
 * `""`, `[]`) so that expressions stay typed whatever arrived; `available`, `success` and `reason`
 * say whether the values mean anything. Numbers are `double` (JSON numbers); cel-js would want
 * BigInt for `int`. The views are plain classes with a fixed shape, registered as CEL message types,
 * so field access is a property read and a misspelled field is a type error at load.
 */

/** Structural limits for every expression (parse time). */
export const CEL_LIMITS = {
  maxAstNodes: 1000,
  maxDepth: 24,
  maxListElements: 256,
  maxMapEntries: 64,
  maxCallArguments: 8,
} as const;

const EMPTY: readonly string[] = Object.freeze([]);

export class RemoteAccessToolView {
  available = false;
  success = false;
  reason = '';
  observationTime = '';
  anomaly = false;
  anomalyConfidence = 0;
}

export class NewBrowserView {
  available = false;
  success = false;
  reason = '';
  observationTime = '';
  known = false;
  mismatchedFields: readonly string[] = EMPTY;
}

export class LatestProximityView {
  available = false;
  success = false;
  reason = '';
  observationTime = '';
  proximityConfidence = 0;
  matchedSignals: readonly string[] = EMPTY;
}

export class HistoricalProximityView {
  available = false;
  success = false;
  reason = '';
  observationTime = '';
  hasBestMatch = false;
  bestConfidence = 0;
  matchedSignals: readonly string[] = EMPTY;
  hasBestIngressMatch = false;
  bestIngressConfidence = 0;
  ingressMatchedSignals: readonly string[] = EMPTY;
}

export class GeovelocityView {
  available = false;
  success = false;
  reason = '';
  observationTime = '';
  anomaly = false;
  evaluated = false;
  maxSpeedKmh = 0;
  thresholdKmh = 0;
  evaluatedPairCount = 0;
  distanceKm = 0;
  elapsedSeconds = 0;
}

export class ActiveCallView {
  available = false;
  success = false;
  reason = '';
  observationTime = '';
  onCall = false;
}

export class GeolocationView {
  available = false;
  success = false;
  reason = '';
  observationTime = '';
  hasGps = false;
  lat = 0;
  lon = 0;
  hasIngress = false;
  ingressLat = 0;
  ingressLon = 0;
  country = '';
  region = '';
  city = '';
  continent = '';
}

export class SignalsView {
  remoteAccessTool = new RemoteAccessToolView();
  newBrowser = new NewBrowserView();
  latestProximity = new LatestProximityView();
  historicalProximity = new HistoricalProximityView();
  geovelocity = new GeovelocityView();
  activeCall = new ActiveCallView();
  geolocation = new GeolocationView();
}

export class UserView {
  available = false;
  reason = '';
  user_id = '';
  username = '';
  display_name = '';
  status = '';
  failed_attempts = 0;
  max_attempts = 0;
  allowed_factors: readonly string[] = EMPTY;
  service_defined_username = false;
  created_at = 0;
  updated_at = 0;
  archived_at = 0;
}

export class DeviceView {
  device_id = '';
  type = '';
  display_name = '';
  capabilities: readonly string[] = EMPTY;
  enrolled = false;
  enrolled_at = 0;
  created_at = 0;
  updated_at = 0;
  archived_at = 0;
  version = '';
  /** Absent (SMS, hardware tokens) reads as `true`: nothing says the version is unsupported. */
  version_supported = true;
  device_integrity = '';
  device_integrity_updated_at = 0;
  migrated_from_device_id = '';
  migrated_to_device_id = '';
  migrated_at = 0;
}

export class RequestView {
  accountId = '';
  userId = '';
  deviceId = '';
  platform = '';
  unitId = '';
  verificationStatus = '';
  interactionId = '';
  sdkVersionId = '';
  ip = '';
  userAgent = '';
  firstFactor = '';
  context: Record<string, string | number | boolean> = {};
}

/** `history.<feature>` (src/features/history-features.ts); zero values while unavailable. */
export class HistoryView {
  available = false;
  reason = '';
  lagSeconds = 0;
  failedAuthentications10m = 0;
  failedAuthentications1h = 0;
  failedAuthentications24h = 0;
  lockOuts24h = 0;
  totpReuses24h = 0;
  newDevices1h = 0;
  newDevices24h = 0;
  statusChanges24h = 0;
}

/**
 * `lists.<name>`: one runtime list, read through `contains` (no fields). The evaluator points it at
 * the decision's list snapshot and clock before each evaluation.
 */
export class ListView {
  readonly name: string;
  lookup: ListLookup | undefined = undefined;
  nowMs = 0;
  constructor(name: string) {
    this.name = name;
  }
}

export function listContains(list: ListView, value: string): boolean {
  return list.lookup?.contains(list.name, value, list.nowMs) === true;
}

export const HISTORY_FIELDS: Record<string, string> = {
  available: 'bool',
  reason: 'string',
  ...Object.fromEntries(HISTORY_FEATURE_NAMES.map((name) => [name, 'double'])),
};

/** The activation object handed to every compiled expression. One per compiled policy, refilled. */
export interface Activation {
  signals: SignalsView;
  user: UserView;
  devices: DeviceView[];
  request: RequestView;
  now: Date;
  nowSeconds: number;
  /** Device views reused across decisions (`devices` holds the first n of them). */
  devicePool: DeviceView[];
  /** `velocity.<name>`: the counters' values (every declared name present while available). */
  velocity: Record<string, number>;
  history: HistoryView;
  /** `lists.<name>`: a view per list the policy declares. */
  lists: Record<string, ListView>;
  /** The variable of an input row beyond the built-in ones (its `CelBinding.variable`). */
  [variable: string]: unknown;
}

/** A CEL message type an input's view registers. */
export interface CelType {
  name: string;
  ctor: new () => object;
  fields: Record<string, string>;
}

/**
 * How one input appears in CEL: a field of `signals` (a signal), or a variable of its own. Each row
 * of the input table (src/policy/inputs/) brings its binding; the environment and the activation
 * are built from the bindings.
 */
export interface CelBinding {
  /** The CEL variable: `signals` (with `field`), or the input's own (`user`, `history`). */
  variable: string;
  /** For a signal: its field of `signals`. */
  field?: string;
  /** The CEL type of the variable (or of the `signals` field). */
  type: string;
  /** Message types to register first (the view's class and fields). */
  types?: readonly CelType[];
  /** Receiver functions to register (`RuntimeList.contains(string): bool`). */
  functions?: readonly { signature: string; fn: (...args: never[]) => unknown; description: string }[];
  description: string;
  /**
   * Whether the view has `available` and `reason` fields: a rule that reads `<input>.available`
   * handles the input's unavailability itself and is evaluated anyway.
   */
  availability: boolean;
  /** The view a fresh activation starts with (a variable of its own; omitted for a built-in field). */
  newView?: () => unknown;
}

/** A fresh activation with a view for every binding. */
export function createActivation(bindings: readonly CelBinding[]): Activation {
  const act: Activation = {
    signals: new SignalsView(),
    user: new UserView(),
    devices: [],
    request: new RequestView(),
    now: new Date(0),
    nowSeconds: 0,
    devicePool: [],
    velocity: {},
    history: new HistoryView(),
    lists: {},
  };
  for (const b of bindings) {
    if (b.newView === undefined) continue;
    if (b.field === undefined) act[b.variable] = b.newView();
    else (act[b.variable] as Record<string, unknown>)[b.field] = b.newView();
  }
  return act;
}

const common = { available: 'bool', success: 'bool', reason: 'string', observationTime: 'string' };

/** CEL type name and fields of each signal view, for registration and for documentation. */
export const SIGNAL_VIEW_TYPES: Record<
  PolicySignalName,
  { typeName: string; ctor: new () => object; fields: Record<string, string> }
> = {
  remoteAccessTool: {
    typeName: 'RemoteAccessToolSignal',
    ctor: RemoteAccessToolView,
    fields: { ...common, anomaly: 'bool', anomalyConfidence: 'double' },
  },
  newBrowser: {
    typeName: 'NewBrowserSignal',
    ctor: NewBrowserView,
    fields: { ...common, known: 'bool', mismatchedFields: 'list<string>' },
  },
  latestProximity: {
    typeName: 'LatestProximitySignal',
    ctor: LatestProximityView,
    fields: { ...common, proximityConfidence: 'double', matchedSignals: 'list<string>' },
  },
  historicalProximity: {
    typeName: 'HistoricalProximitySignal',
    ctor: HistoricalProximityView,
    fields: {
      ...common,
      hasBestMatch: 'bool',
      bestConfidence: 'double',
      matchedSignals: 'list<string>',
      hasBestIngressMatch: 'bool',
      bestIngressConfidence: 'double',
      ingressMatchedSignals: 'list<string>',
    },
  },
  geovelocity: {
    typeName: 'GeovelocitySignal',
    ctor: GeovelocityView,
    fields: {
      ...common,
      anomaly: 'bool',
      evaluated: 'bool',
      maxSpeedKmh: 'double',
      thresholdKmh: 'double',
      evaluatedPairCount: 'double',
      distanceKm: 'double',
      elapsedSeconds: 'double',
    },
  },
  activeCall: { typeName: 'ActiveCallSignal', ctor: ActiveCallView, fields: { ...common, onCall: 'bool' } },
  geolocation: {
    typeName: 'GeolocationSignal',
    ctor: GeolocationView,
    fields: {
      ...common,
      hasGps: 'bool',
      lat: 'double',
      lon: 'double',
      hasIngress: 'bool',
      ingressLat: 'double',
      ingressLon: 'double',
      country: 'string',
      region: 'string',
      city: 'string',
      continent: 'string',
    },
  },
};

export const USER_FIELDS: Record<string, string> = {
  available: 'bool',
  reason: 'string',
  user_id: 'string',
  username: 'string',
  display_name: 'string',
  status: 'string',
  failed_attempts: 'double',
  max_attempts: 'double',
  allowed_factors: 'list<string>',
  service_defined_username: 'bool',
  created_at: 'double',
  updated_at: 'double',
  archived_at: 'double',
};

export const DEVICE_FIELDS: Record<string, string> = {
  device_id: 'string',
  type: 'string',
  display_name: 'string',
  capabilities: 'list<string>',
  enrolled: 'bool',
  enrolled_at: 'double',
  created_at: 'double',
  updated_at: 'double',
  archived_at: 'double',
  version: 'string',
  version_supported: 'bool',
  device_integrity: 'string',
  device_integrity_updated_at: 'double',
  migrated_from_device_id: 'string',
  migrated_to_device_id: 'string',
  migrated_at: 'double',
};

export const REQUEST_FIELDS: Record<string, string> = {
  accountId: 'string',
  userId: 'string',
  deviceId: 'string',
  platform: 'string',
  unitId: 'string',
  verificationStatus: 'string',
  interactionId: 'string',
  sdkVersionId: 'string',
  ip: 'string',
  userAgent: 'string',
  firstFactor: 'string',
  context: 'map<string, dyn>',
};

/** CIDRs seen in `inCidr` calls, parsed once. Policies hold literals, so the set stays small. */
const cidrCache = new Map<string, Cidr | null>();
const CIDR_CACHE_MAX = 4096;

export function ipInCidr(ip: string, cidrText: string): boolean {
  checkEvaluationBudget();
  let cidr = cidrCache.get(cidrText);
  if (cidr === undefined) {
    cidr = parseCidr(cidrText);
    if (cidrCache.size < CIDR_CACHE_MAX) cidrCache.set(cidrText, cidr);
  }
  if (!cidr) throw new Error(`inCidr: "${cidrText}" is not a CIDR`);
  const words = parseIpShared(ip);
  return words !== null && cidrContains(cidr, words);
}

function matchesWithinBudget(s: string, pattern: string): boolean {
  checkEvaluationBudget();
  return re2Matches(s, pattern);
}

const environments = new WeakMap<readonly CelBinding[], Environment>();
const constructorTables = new WeakMap<readonly CelBinding[], ReadonlyMap<string, new () => object>>();

/**
 * The class of each message type the environment of `bindings` registers, by CEL type name: what
 * the fast path (src/policy/cel-fast-path.ts) checks a value's constructor against, as cel-js does.
 * A class registered under two names is left out (cel-js would know it by one of them only).
 */
export function messageConstructors(bindings: readonly CelBinding[]): ReadonlyMap<string, new () => object> {
  policyEnvironment(bindings);
  return constructorTables.get(bindings)!;
}

/**
 * The policy CEL environment of an input table's bindings (built once per table, so once per
 * process for the built-in table: building is the expensive part).
 */
export function policyEnvironment(bindings: readonly CelBinding[]): Environment {
  const known = environments.get(bindings);
  if (known) return known;
  const env = new Environment({ limits: CEL_LIMITS, homogeneousAggregateLiterals: true });
  const ctors = new Map<string, new () => object>();
  const registerType = (name: string, ctor: new () => object, fields: Record<string, string>): void => {
    env.registerType(name, { ctor, fields });
    ctors.set(name, ctor);
  };
  const groups = new Map<string, Record<string, string>>();
  for (const b of bindings) {
    for (const t of b.types ?? []) registerType(t.name, t.ctor, t.fields);
    if (b.field === undefined) continue;
    const group = groups.get(b.variable) ?? {};
    group[b.field] = b.type;
    groups.set(b.variable, group);
  }
  registerType('Signals', SignalsView, groups.get('signals') ?? {});
  registerType('Request', RequestView, REQUEST_FIELDS);
  env.registerVariable('signals', 'Signals', { description: 'Trust signal results, one per signal name.' });
  for (const b of bindings) {
    if (b.field !== undefined) continue;
    env.registerVariable(b.variable, b.type, { description: b.description });
    for (const f of b.functions ?? [])
      env.registerFunction(f.signature, f.fn, { description: f.description });
  }
  env
    .registerVariable('request', 'Request', { description: 'The /decide request.' })
    .registerVariable('now', 'google.protobuf.Timestamp', { description: 'Evaluation time.' })
    .registerVariable('nowSeconds', 'double', { description: 'Evaluation time, Unix seconds.' })
    .registerFunction('string.inCidr(string): bool', ipInCidr, {
      description: 'Whether the IP address lies in the IPv4/IPv6 CIDR; false for a non-IP string.',
    })
    // What the compiler turns `matches` into: cel-js's own runs a backtracking RegExp.
    .registerFunction(`string.${RE2_MATCHES_NAME}(string): bool`, matchesWithinBudget, {
      description: 'CEL `matches` with RE2 semantics, in linear time.',
    });
  // CEL has no implicit int/double conversion; `user.failed_attempts + 1` would otherwise be a type
  // error that surprises every policy author. Comparisons between the two already work.
  for (const op of ['+', '-', '*', '/'] as const) {
    const f = numericOp(op);
    env.registerOperator(`double ${op} int: double`, (a: number, b: bigint) => f(a, Number(b)));
    env.registerOperator(`int ${op} double: double`, (a: bigint, b: number) => f(Number(a), b));
  }
  environments.set(bindings, env);
  const shared = new Set([...ctors.values()].filter((c, i, all) => all.indexOf(c) !== i));
  constructorTables.set(bindings, new Map([...ctors].filter(([, c]) => !shared.has(c))));
  return env;
}

function numericOp(op: '+' | '-' | '*' | '/'): (a: number, b: number) => number {
  switch (op) {
    case '+':
      return (a, b) => a + b;
    case '-':
      return (a, b) => a - b;
    case '*':
      return (a, b) => a * b;
    case '/':
      return (a, b) => a / b;
  }
}
