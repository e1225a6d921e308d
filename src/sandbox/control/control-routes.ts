import { Hono } from 'hono';
import { z } from 'zod';
import type { AdjustableClock } from '../clock/sandbox-clock.ts';
import type { FaultInjector } from '../faults/fault-injector.ts';
import { faultRuleSchema, faultRulesSchema } from '../faults/fault-rule.ts';
import type { RequestStats } from '../stats/request-stats.ts';
import { handleVendorError } from '../vendor-api-errors.ts';
import { parseControlBody } from './control-input.ts';

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

/**
 * The sandbox's control API under `/sandbox/...` (not a vendor API: never counted in stats, never
 * faulted, no authentication; for local use). Errors are RFC 9457 problem+json naming the field.
 */
export function createControlRoutes(deps: ControlRoutesDeps): Hono {
  const app = new Hono();
  app.onError(handleVendorError);
  app.get('/sandbox/info', (c) => c.json(deps.info()));
  app.get('/sandbox/stats', (c) => c.json(deps.stats.snapshot()));
  // The last 1000 vendor-API requests: route and W3C traceparent (tracing tests).
  app.get('/sandbox/stats/requests', (c) => c.json({ requests: deps.stats.requests() }));
  app.post('/sandbox/stats/reset', (c) => {
    deps.stats.reset();
    return c.json(deps.stats.snapshot());
  });

  app.get('/sandbox/faults', (c) => c.json({ rules: deps.faults.list() }));
  app.put('/sandbox/faults', async (c) => {
    deps.faults.replace((await parseControlBody(c, faultsBodySchema)).rules);
    return c.json({ rules: deps.faults.list() });
  });
  app.post('/sandbox/faults', async (c) => {
    deps.faults.add(await parseControlBody(c, faultRuleSchema));
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
    deps.clock.advance((await parseControlBody(c, clockBodySchema)).advanceSeconds * 1000);
    return c.json({ now: new Date(deps.clock.now()).toISOString(), offsetMs: deps.clock.offsetMs() });
  });
  return app;
}
