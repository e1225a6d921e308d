/**
 * The sandbox's control API as the bench uses it: counters of upstream traffic, faults (the
 * upstream latency profile) and resets. Every call has a 30 s timeout and fails loudly.
 */

import { sandboxUpstream } from '../src/dev/embedded-sandbox.ts';
import { riskgateEnvRecord } from '../src/dev/sandbox-env-file.ts';
import { DEFAULT_CREDENTIALS } from '../src/sandbox/sandbox-config.ts';

/**
 * riskgate's vendor variables for the sandbox at `sandboxUrl` (its default credentials), as a
 * deployment sets them for the real vendor.
 */
export function sandboxVendorEnv(sandboxUrl: string): Record<string, string> {
  return riskgateEnvRecord(
    sandboxUpstream({ url: sandboxUrl, config: { credentials: DEFAULT_CREDENTIALS } }),
  );
}

/** What `GET /sandbox/stats` answers (src/sandbox/stats/request-stats.ts). */
export interface SandboxStats {
  routes: Record<string, Record<string, number>>;
  tokensIssued: number;
  ratBatchSizes: number[];
}

/** The upstream latency profiles of scenario 1. */
export type LatencyProfile = { name: 'zero' } | { name: 'lognormal'; p50Ms: number; p99Ms: number };

async function call(url: string, init: RequestInit = {}): Promise<Response> {
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
  if (!response.ok) {
    const text = await response.text().catch(() => '');
    throw new Error(`${init.method ?? 'GET'} ${url}: ${response.status} ${text.slice(0, 300)}`);
  }
  return response;
}

export async function getSandboxStats(sandboxUrl: string): Promise<SandboxStats> {
  return (await (await call(`${sandboxUrl}/sandbox/stats`)).json()) as SandboxStats;
}

export async function resetSandboxStats(sandboxUrl: string): Promise<void> {
  await (await call(`${sandboxUrl}/sandbox/stats/reset`, { method: 'POST' })).arrayBuffer();
}

/** Restores the seeded scenario (users locked out by deny actions come back). */
export async function resetSandbox(sandboxUrl: string): Promise<void> {
  await (await call(`${sandboxUrl}/sandbox/reset`, { method: 'POST' })).arrayBuffer();
}

/**
 * Applies a latency profile to the vendor APIs riskgate calls on a decision (signals and Admin).
 * `zero` clears every fault rule.
 */
export async function applyLatencyProfile(sandboxUrl: string, profile: LatencyProfile): Promise<void> {
  const rules =
    profile.name === 'zero'
      ? []
      : ['GET /api/v1/signals/*', 'POST /api/v1/signals/*', 'GET /srv/admin/v1/*'].map((route) => ({
          route,
          latency: { kind: 'lognormal', p50Ms: profile.p50Ms, p99Ms: profile.p99Ms },
        }));
  await (
    await call(`${sandboxUrl}/sandbox/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rules }),
    })
  ).arrayBuffer();
}

/** Routes that are vendor API calls (not the sandbox's control routes, not the token endpoint). */
export function isUpstreamRoute(routeKey: string): boolean {
  const path = routeKey.slice(routeKey.indexOf(' ') + 1);
  return !path.startsWith('/sandbox') && !path.startsWith('/oauth');
}

/** Requests counted under a route, every status included. */
export function countRequests(byStatus: Record<string, number> | undefined): number {
  let n = 0;
  for (const count of Object.values(byStatus ?? {})) n += count;
  return n;
}
