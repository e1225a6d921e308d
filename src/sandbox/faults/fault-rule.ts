import { z } from 'zod';

/** Added latency: fixed, uniform, or lognormal given its median and 99th percentile. Milliseconds. */
export const latencySpecSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('fixed'), ms: z.number().nonnegative().max(600_000) }),
  z
    .strictObject({
      kind: z.literal('uniform'),
      minMs: z.number().nonnegative().max(600_000),
      maxMs: z.number().nonnegative().max(600_000),
    })
    .refine((l) => l.minMs <= l.maxMs, { message: 'minMs must not exceed maxMs', path: ['minMs'] }),
  z
    .strictObject({
      kind: z.literal('lognormal'),
      p50Ms: z.number().positive().max(600_000),
      p99Ms: z.number().positive().max(600_000),
    })
    .refine((l) => l.p50Ms <= l.p99Ms, { message: 'p50Ms must not exceed p99Ms', path: ['p50Ms'] }),
]);
export type LatencySpec = z.infer<typeof latencySpecSchema>;

const rate = z.number().min(0).max(1);
/** `true` = every matching request, a number = that share of them. */
const rateOrFlag = z.union([z.boolean(), rate]);

const ROUTE = /^(\*|(GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS|\*) \/\S*)$/;

/**
 * One fault-injection rule. `route` is `"<METHOD> <route pattern>"` as in `/sandbox/stats` (e.g.
 * `GET /api/v1/signals/new-browser`), a prefix ending in `*` (`GET /api/v1/signals/*`, method `*`
 * for any), or `*` for every vendor-API request. A concrete path matches too
 * (`GET /srv/admin/v1/users/u-1`).
 */
export const faultRuleSchema = z.strictObject({
  route: z.string().regex(ROUTE, 'must be "*" or "<METHOD> <path pattern>", optionally ending in *'),
  latency: latencySpecSchema.optional(),
  /** Share of matching requests answered with `errorStatus`. */
  errorRate: rate.optional(),
  /** Default 500. */
  errorStatus: z.union([z.literal(500), z.literal(503)]).optional(),
  /** Share of matching requests answered 429 with `Retry-After`. */
  rateLimit: z
    .strictObject({ rate, retryAfterSeconds: z.number().int().nonnegative().max(86_400) })
    .optional(),
  /** Never answer (until the client goes away or the sandbox stops). */
  hang: rateOrFlag.optional(),
  /** Answer 200 with a truncated JSON body. */
  malformedJson: rateOrFlag.optional(),
  /** NDJSON responses: pass `afterLines` lines, then a non-JSON `Error: stream interrupted` line. */
  cutStream: z.strictObject({ afterLines: z.number().int().nonnegative() }).optional(),
  /** Apply to the next N matching requests only, then expire. Default: forever. */
  times: z.number().int().positive().optional(),
});
export type FaultRule = z.infer<typeof faultRuleSchema>;
export const faultRulesSchema = z.array(faultRuleSchema);

/** True when `rule` applies to a request: its method, route key (`METHOD pattern`) and path. */
export function ruleMatches(route: string, method: string, routeKey: string, path: string): boolean {
  if (route === '*') return true;
  const space = route.indexOf(' ');
  const m = route.slice(0, space);
  if (m !== '*' && m !== method) return false;
  const p = route.slice(space + 1);
  const pattern = routeKey.slice(routeKey.indexOf(' ') + 1);
  if (p.endsWith('*')) {
    const prefix = p.slice(0, -1);
    return pattern.startsWith(prefix) || path.startsWith(prefix);
  }
  return p === pattern || p === path;
}

const Z99 = 2.3263478740408408;

/**
 * Draws one latency, milliseconds. Lognormal: median p50, σ = ln(p99/p50) / z(0.99), so the 99th
 * percentile is p99. `random` returns [0,1) (injectable for tests).
 */
export function sampleLatencyMs(spec: LatencySpec, random: () => number = Math.random): number {
  switch (spec.kind) {
    case 'fixed':
      return spec.ms;
    case 'uniform':
      return spec.minMs + (spec.maxMs - spec.minMs) * random();
    case 'lognormal': {
      const sigma = Math.log(spec.p99Ms / spec.p50Ms) / Z99;
      const u1 = 1 - random();
      const u2 = random();
      const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
      return Math.min(600_000, spec.p50Ms * Math.exp(sigma * z));
    }
  }
}
