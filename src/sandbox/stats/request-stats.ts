/** What `GET /sandbox/stats` answers. */
export interface StatsSnapshot {
  /** `"<METHOD> <route pattern>"` → HTTP status (as a string; `"0"` = no answer, a hang) → count. */
  routes: Record<string, Record<string, number>>;
  /** Successful token responses. */
  tokensIssued: number;
  /** Item count of each batch remote-access-tool POST, oldest first (the last `maxBatchSizes`). */
  ratBatchSizes: number[];
}

/**
 * Counters of vendor-API traffic, so tests and benchmarks can count upstream calls. Plain maps:
 * recording is on every request's path and must stay a few property writes.
 */
/** One vendor-API request as `GET /sandbox/stats/requests` lists it: what a trace test checks. */
export interface SeenRequest {
  route: string;
  /** The W3C `traceparent` header it carried, or null. */
  traceparent: string | null;
}

/** How many recent requests `GET /sandbox/stats/requests` keeps (oldest dropped first). */
const MAX_SEEN_REQUESTS = 1000;

export class RequestStats {
  private routes = new Map<string, Map<number, number>>();
  private tokens = 0;
  private batchSizes: number[] = [];
  private seen: SeenRequest[] = [];

  /** @param maxBatchSizes how many batch sizes to keep (oldest dropped first). Default 10,000. */
  constructor(private readonly maxBatchSizes = 10_000) {}

  recordResponse(routeKey: string, status: number): void {
    let byStatus = this.routes.get(routeKey);
    if (!byStatus) {
      byStatus = new Map();
      this.routes.set(routeKey, byStatus);
    }
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  }

  /** Records a request's route and `traceparent` (a plain push: on every request's path). */
  recordRequest(route: string, traceparent: string | undefined): void {
    this.seen.push({ route, traceparent: traceparent ?? null });
    if (this.seen.length > 2 * MAX_SEEN_REQUESTS) this.seen = this.seen.slice(-MAX_SEEN_REQUESTS);
  }

  /** The most recent requests, oldest first (at most 1000). */
  requests(): SeenRequest[] {
    return this.seen.slice(-MAX_SEEN_REQUESTS);
  }

  recordTokenIssued(): void {
    this.tokens++;
  }

  recordBatchSize(items: number): void {
    this.batchSizes.push(items);
    if (this.batchSizes.length > this.maxBatchSizes) {
      this.batchSizes.splice(0, this.batchSizes.length - this.maxBatchSizes);
    }
  }

  snapshot(): StatsSnapshot {
    const routes: StatsSnapshot['routes'] = {};
    for (const [key, byStatus] of this.routes) {
      const counts: Record<string, number> = {};
      for (const [status, n] of byStatus) counts[String(status)] = n;
      routes[key] = counts;
    }
    return { routes, tokensIssued: this.tokens, ratBatchSizes: [...this.batchSizes] };
  }

  reset(): void {
    this.seen = [];
    this.routes.clear();
    this.tokens = 0;
    this.batchSizes = [];
  }
}
