import { type DecideRequest, decideRequestSchema } from '../src/decide/decide-request.ts';
import * as signalQueries from '../src/policy/inputs/signal-queries.ts';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import type { PolicyRequirements, PolicySignalName } from '../src/policy/policy-types.ts';

/**
 * How many upstream reads the active policy needs per decision, for the bench's bodies: one per
 * required signal that applies to the login (platform, identifiers) and one per required Admin
 * read when the request names a user. Batching lets riskgate do better than this (several
 * remote-access-tool items share one POST); duplicate or unneeded calls make it worse.
 */
export interface PolicyNeeds {
  available: boolean;
  /** Why the figure is missing, when it is. */
  reason?: string;
  policyPath: string;
  signals: string[];
  adminUser: boolean;
  adminDevices: boolean;
  /** Mean over the bench's bodies. */
  readsPerDecision: number;
}

/**
 * Whether the decision service queries `name` for this request, by its own rule
 * (src/policy/inputs/signal-queries.ts: `applicability`, formerly `isApplicable`; read through the
 * namespace so the bench keeps working across that rename).
 */
function isQueried(name: PolicySignalName, request: DecideRequest): boolean {
  const rules = signalQueries as unknown as {
    applicability?: (n: PolicySignalName, r: DecideRequest) => string;
    isApplicable?: (n: PolicySignalName, r: DecideRequest) => boolean;
  };
  if (rules.applicability) return rules.applicability(name, request) === 'ok';
  if (rules.isApplicable) return rules.isApplicable(name, request);
  throw new Error('src/policy/inputs/signal-queries.ts exports neither applicability nor isApplicable');
}

/** Reads one request needs under `requirements` (mirrors the input table of src/policy/inputs/input-table.ts). */
export function readsNeeded(requirements: PolicyRequirements, request: DecideRequest): number {
  let n = 0;
  for (const name of requirements.signals) if (isQueried(name, request)) n++;
  if (request.userId !== undefined) {
    if (requirements.adminUser) n++;
    if (requirements.adminDevices) n++;
  }
  return n;
}

/** Mean reads needed per decision over `bodies` (serialised /decide bodies). */
export function meanReadsNeeded(requirements: PolicyRequirements, bodies: string[]): number {
  if (bodies.length === 0) return 0;
  let total = 0;
  for (const body of bodies) total += readsNeeded(requirements, decideRequestSchema.parse(JSON.parse(body)));
  return Math.round((total / bodies.length) * 1000) / 1000;
}

/** Loads the policy with the policy engine's loader and averages its needs over `bodies`. */
export async function computePolicyNeeds(policyPath: string, bodies: string[]): Promise<PolicyNeeds> {
  const none = (reason: string): PolicyNeeds => ({
    available: false,
    reason,
    policyPath,
    signals: [],
    adminUser: false,
    adminDevices: false,
    readsPerDecision: 0,
  });
  let requirements: PolicyRequirements;
  try {
    requirements = await loadRequirements(policyPath);
  } catch (error) {
    return none(error instanceof Error ? error.message : String(error));
  }
  return {
    available: true,
    policyPath,
    signals: [...requirements.signals],
    adminUser: requirements.adminUser,
    adminDevices: requirements.adminDevices,
    readsPerDecision: meanReadsNeeded(requirements, bodies),
  };
}

async function loadRequirements(policyPath: string): Promise<PolicyRequirements> {
  return (await loadPolicy(policyPath)).requirements;
}
