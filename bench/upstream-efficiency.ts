import { countRequests, isUpstreamRoute, type SandboxStats } from './sandbox-control.ts';

/** Upstream traffic of one open-model step, from `/sandbox/stats`, per decision answered. */
export interface UpstreamFigures {
  /** Decisions answered in the step, warm-up included (what the sandbox counters cover). */
  decisions: number;
  /** Vendor API requests by `<METHOD> <route>` (control routes and the token endpoint excluded). */
  byRoute: Record<string, number>;
  upstreamCalls: number;
  upstreamCallsPerDecision: number;
  /** Reads (GET, and the batch remote-access-tool POST) per decision. */
  readsPerDecision: number;
  /** Admin writes (lock-outs and other deny actions) per decision. */
  actionsPerDecision: number;
  /** Batch remote-access-tool POSTs. */
  ratPosts: number;
  ratPostsPerDecision: number;
  /** Single remote-access-tool GETs (the unbatched path). */
  ratGets: number;
  itemsPerBatch: { batches: number; mean: number; p50: number; max: number };
  /** Non-2xx answers the sandbox gave to vendor calls, by status. */
  upstreamErrors: Record<string, number>;
  tokensIssued: number;
}

function isRatRoute(routeKey: string): boolean {
  return routeKey.includes('/remote-access-tool');
}

function round(value: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Per-decision upstream figures of one step. */
export function upstreamFigures(stats: SandboxStats, decisions: number): UpstreamFigures {
  const byRoute: Record<string, number> = {};
  const upstreamErrors: Record<string, number> = {};
  let upstreamCalls = 0;
  let reads = 0;
  let actions = 0;
  let ratPosts = 0;
  let ratGets = 0;
  for (const [route, byStatus] of Object.entries(stats.routes)) {
    if (!isUpstreamRoute(route)) continue;
    const n = countRequests(byStatus);
    byRoute[route] = n;
    upstreamCalls += n;
    const method = route.slice(0, route.indexOf(' '));
    if (isRatRoute(route) && method === 'POST') ratPosts += n;
    else if (isRatRoute(route) && method === 'GET') ratGets += n;
    if (method === 'GET' || (method === 'POST' && isRatRoute(route))) reads += n;
    else actions += n;
    for (const [status, count] of Object.entries(byStatus)) {
      if (status.startsWith('2') || status === '304') continue;
      upstreamErrors[status] = (upstreamErrors[status] ?? 0) + count;
    }
  }
  const sizes = [...stats.ratBatchSizes].sort((a, b) => a - b);
  const per = (n: number) => (decisions > 0 ? round(n / decisions) : 0);
  return {
    decisions,
    byRoute,
    upstreamCalls,
    upstreamCallsPerDecision: per(upstreamCalls),
    readsPerDecision: per(reads),
    actionsPerDecision: per(actions),
    ratPosts,
    ratPostsPerDecision: per(ratPosts),
    ratGets,
    itemsPerBatch: {
      batches: sizes.length,
      mean: sizes.length > 0 ? round(sizes.reduce((a, b) => a + b, 0) / sizes.length, 2) : 0,
      p50: sizes.length > 0 ? sizes[Math.floor(sizes.length / 2)]! : 0,
      max: sizes.length > 0 ? sizes[sizes.length - 1]! : 0,
    },
    upstreamErrors,
    tokensIssued: stats.tokensIssued,
  };
}
