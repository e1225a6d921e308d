import { Hono } from 'hono';
import { z } from 'zod';
import type { AdjustableClock } from '../clock/sandbox-clock.ts';
import type { FaultInjector } from '../faults/fault-injector.ts';
import { faultRuleSchema, faultRulesSchema } from '../faults/fault-rule.ts';
import type { RequestStats } from '../stats/request-stats.ts';

export interface ControlRoutesDeps {
  stats: RequestStats;
  faults: FaultInjector;
  clock: AdjustableClock;
  /** Reseeds everything from the scenario (POST /sandbox/reset). */
  reset(): void;
  /** Facts for GET /sandbox/info (no secrets). */
  info(): Record<string, unknown>;
}

const clockBodySchema = z.strictObject({
  advanceSeconds: z
    .number()
    .nonnegative()
    .max(10 * 365 * 86_400),
});
const faultsBodySchema = z.strictObject({ rules: faultRulesSchema });

/** 400 as RFC 9457 problem+json naming the field. */
function problem(detail: string, field: string) {
  return new Response(
    JSON.stringify({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: `${field}: ${detail}`,
      field,
    }),
    { status: 400, headers: { 'Content-Type': 'application/problem+json' } },
  );
}

async function readJson<T>(
  req: Request,
  schema: z.ZodType<T>,
): Promise<{ ok: true; value: T } | { ok: false; res: Response }> {
  let raw: unknown;
  try {
    raw = JSON.parse(await req.text());
  } catch {
    return { ok: false, res: problem('must be a JSON document', 'body') };
  }
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0]!;
  return { ok: false, res: problem(issue.message, issue.path.join('.') || 'body') };
}

/**
 * The sandbox's control API under `/sandbox/...` (not a vendor API: never counted in stats, never
 * faulted, no authentication; for local use).
 */
export function createControlRoutes(deps: ControlRoutesDeps): Hono {
  const app = new Hono();
  app.get('/sandbox/info', (c) => c.json(deps.info()));
  app.get('/sandbox/stats', (c) => c.json(deps.stats.snapshot()));
  app.post('/sandbox/stats/reset', (c) => {
    deps.stats.reset();
    return c.json(deps.stats.snapshot());
  });

  app.get('/sandbox/faults', (c) => c.json({ rules: deps.faults.list() }));
  app.put('/sandbox/faults', async (c) => {
    const body = await readJson(c.req.raw, faultsBodySchema);
    if (!body.ok) return body.res;
    deps.faults.replace(body.value.rules);
    return c.json({ rules: deps.faults.list() });
  });
  app.post('/sandbox/faults', async (c) => {
    const body = await readJson(c.req.raw, faultRuleSchema);
    if (!body.ok) return body.res;
    deps.faults.add(body.value);
    return c.json({ rules: deps.faults.list() }, 201);
  });
  app.delete('/sandbox/faults', (c) => {
    deps.faults.clear();
    return c.json({ rules: [] });
  });

  app.post('/sandbox/reset', (c) => {
    deps.reset();
    return c.json(deps.info());
  });
  app.post('/sandbox/clock', async (c) => {
    const body = await readJson(c.req.raw, clockBodySchema);
    if (!body.ok) return body.res;
    deps.clock.advance(body.value.advanceSeconds * 1000);
    return c.json({ now: new Date(deps.clock.now()).toISOString(), offsetMs: deps.clock.offsetMs() });
  });
  return app;
}
