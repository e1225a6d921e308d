import type { Context, MiddlewareHandler } from 'hono';
import { apiOfPath, vendorErrorResponse } from '../vendor-api-errors.ts';
import { type FaultRule, type LatencySpec, ruleMatches, sampleLatencyMs } from './fault-rule.ts';

/** What the fault middleware needs from its surroundings. */
export interface FaultContext {
  /** The request's `<METHOD> <route pattern>` (set by the stats middleware). */
  routeKey(c: Context): string;
  /** Called when a request starts hanging (stats count it at once, as status 0). */
  onHang(c: Context): void;
}

interface ActiveRule {
  rule: FaultRule;
  remaining: number;
}

/** What applies to one request, decided when it arrives. */
interface FaultPlan {
  latencies: LatencySpec[];
  outcome?:
    | { kind: 'hang' }
    | { kind: 'rateLimit'; retryAfterSeconds: number }
    | { kind: 'error'; status: 500 | 503 };
  malformedJson: boolean;
  cutAfterLines?: number;
}

const fires = (v: boolean | number | undefined, random: () => number) =>
  v === true || (typeof v === 'number' && v > 0 && random() < v);

/**
 * Fault injection in front of every vendor API: one rule list, settable at start and at run time.
 * Rules are tried in order; every matching rule's latency is added (timers, never busy waits); the
 * first rule whose hang, rate limit or error fires decides the answer; malformed JSON and stream cuts
 * rewrite the real handler's answer. A rule with `times` counts matching requests, fired or not.
 */
export class FaultInjector {
  private rules: ActiveRule[] = [];
  private readonly waits = new PendingWaits();

  /**
   * @param initial rules restored by `restoreInitial()` (start-time faults: env or scenario).
   * @param random source of [0,1) draws; default `Math.random`.
   */
  constructor(
    private readonly initial: readonly FaultRule[] = [],
    private readonly random: () => number = Math.random,
  ) {
    this.restoreInitial();
  }

  /** The active rules; `times` shows what is left. */
  list(): FaultRule[] {
    return this.rules.map(({ rule, remaining }) =>
      rule.times === undefined ? rule : { ...rule, times: remaining },
    );
  }

  replace(rules: readonly FaultRule[]): void {
    this.rules = rules.map((rule) => ({ rule, remaining: rule.times ?? Number.POSITIVE_INFINITY }));
  }

  add(rule: FaultRule): void {
    this.rules.push({ rule, remaining: rule.times ?? Number.POSITIVE_INFINITY });
  }

  clear(): void {
    this.rules = [];
  }

  restoreInitial(): void {
    this.replace(this.initial);
  }

  /** Ends every pending delay and hang (each answers 503); later ones end at once. Call on shutdown. */
  stop(): void {
    this.waits.stop();
  }

  /** How many requests are waiting on a fault delay or hang right now. */
  pendingWaits(): number {
    return this.waits.size;
  }

  /** Decides the faults of one request and consumes `times`. Undefined when no rule matches. */
  plan(method: string, routeKey: string, path: string): FaultPlan | undefined {
    if (this.rules.length === 0) return undefined;
    let plan: FaultPlan | undefined;
    let expired = false;
    for (const active of this.rules) {
      const { rule } = active;
      if (active.remaining <= 0 || !ruleMatches(rule.route, method, routeKey, path)) continue;
      active.remaining--;
      if (active.remaining <= 0) expired = true;
      plan ??= { latencies: [], malformedJson: false };
      if (rule.latency) plan.latencies.push(rule.latency);
      if (!plan.outcome) {
        if (fires(rule.hang, this.random)) plan.outcome = { kind: 'hang' };
        else if (rule.rateLimit && fires(rule.rateLimit.rate, this.random)) {
          plan.outcome = { kind: 'rateLimit', retryAfterSeconds: rule.rateLimit.retryAfterSeconds };
        } else if (fires(rule.errorRate, this.random)) {
          plan.outcome = { kind: 'error', status: rule.errorStatus ?? 500 };
        }
      }
      if (fires(rule.malformedJson, this.random)) plan.malformedJson = true;
      if (rule.cutStream && plan.cutAfterLines === undefined) plan.cutAfterLines = rule.cutStream.afterLines;
    }
    if (expired) this.rules = this.rules.filter((r) => r.remaining > 0);
    return plan;
  }

  /** The middleware. Mount it after the stats middleware and before every vendor API route. */
  middleware(ctx: FaultContext): MiddlewareHandler {
    return async (c, next) => {
      const path = c.req.path;
      const api = apiOfPath(path);
      if (api === 'control') return next();
      const plan = this.plan(c.req.method, ctx.routeKey(c), path);
      if (!plan) return next();

      if (plan.latencies.length > 0) {
        let ms = 0;
        for (const l of plan.latencies) ms += sampleLatencyMs(l, this.random);
        if (ms > 0 && !(await this.waits.wait(ms, c.req.raw.signal))) {
          // Client gone or sandbox stopping: nobody reads this answer.
          return vendorErrorResponse(api, 503, 'Service unavailable');
        }
      }
      const outcome = plan.outcome;
      if (outcome?.kind === 'hang') {
        ctx.onHang(c);
        await this.waits.wait(undefined, c.req.raw.signal);
        return vendorErrorResponse(api, 503, 'Service unavailable');
      }
      if (outcome?.kind === 'rateLimit') {
        return vendorErrorResponse(api, 429, 'Too many requests', {
          'Retry-After': String(outcome.retryAfterSeconds),
        });
      }
      if (outcome?.kind === 'error') {
        const message = outcome.status === 503 ? 'Service unavailable' : 'Internal error';
        return vendorErrorResponse(api, outcome.status, `${message} (sandbox fault injection)`);
      }

      await next();
      if (plan.cutAfterLines !== undefined && isNdjson(c.res)) {
        c.res = await cutStream(c.res, plan.cutAfterLines);
      } else if (plan.malformedJson) {
        c.res = await truncateJson(c.res);
      }
    };
  }
}

/**
 * Fault delays and hangs in flight. Each wait listens on its own request's signal only and leaves the
 * set when it settles, so nothing long-lived grows with traffic. (`AbortSignal.any([req.signal,
 * shutdown])` per request did: on Node 20 the long-lived shutdown signal keeps every composite it
 * fed, about 60 bytes a faulted request, forever.)
 */
class PendingWaits {
  readonly #pending = new Set<(completed: boolean) => void>();
  #stopped = false;

  get size(): number {
    return this.#pending.size;
  }

  /** Waits `ms` (undefined: until aborted); false when `signal` aborted or stop() ran first. Never rejects. */
  wait(ms: number | undefined, signal: AbortSignal): Promise<boolean> {
    if (this.#stopped || signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const settle = (completed: boolean) => {
        if (!this.#pending.delete(settle)) return;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        resolve(completed);
      };
      const onAbort = () => settle(false);
      this.#pending.add(settle);
      signal.addEventListener('abort', onAbort, { once: true });
      if (ms !== undefined) timer = setTimeout(settle, ms, true);
    });
  }

  stop(): void {
    this.#stopped = true;
    for (const settle of [...this.#pending]) settle(false);
  }
}

function isNdjson(res: Response): boolean {
  return (res.headers.get('content-type') ?? '').toLowerCase().includes('ndjson');
}

async function cutStream(res: Response, afterLines: number): Promise<Response> {
  const lines = (await res.text()).split('\n').filter((l) => l !== '');
  const kept = lines.slice(0, afterLines);
  const body = `${kept.map((l) => `${l}\n`).join('')}Error: stream interrupted\n`;
  const headers = new Headers(res.headers);
  headers.delete('content-length');
  return new Response(body, { status: res.status, headers });
}

async function truncateJson(res: Response): Promise<Response> {
  const text = await res.text();
  let body = text.slice(0, Math.floor(text.length / 2));
  if (!isInvalidJson(body)) body = `${body}{"`;
  return new Response(body, { status: 200, headers: { 'Content-Type': 'application/json' } });
}

function isInvalidJson(s: string): boolean {
  try {
    JSON.parse(s);
    return false;
  } catch {
    return true;
  }
}
