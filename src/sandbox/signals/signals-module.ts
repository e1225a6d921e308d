import type { AccessTokens } from '../oauth/access-tokens.ts';
import type { SandboxModule, SandboxModuleContext } from '../sandbox-module.ts';
import { offsetMsOf, type Scenario } from '../scenario/scenario-schema.ts';
import { ObservationStore } from './observation-store.ts';
import { createSignalsRoutes } from './signals-routes.ts';

/** The Trust Signals API module: its observation store, routes, and seeding from a scenario. */
export function createSignalsModule(
  ctx: SandboxModuleContext,
  deps: { tokens: AccessTokens; onBatch?: (items: number) => void },
): SandboxModule & { store: ObservationStore } {
  const store = new ObservationStore();
  const app = createSignalsRoutes({
    store,
    tokens: deps.tokens,
    credentials: ctx.config.credentials,
    thresholds: ctx.config.thresholds,
    clock: ctx.clock,
    ...(deps.onBatch && { onBatch: deps.onBatch }),
  });
  return {
    app,
    store,
    seed(scenario: Scenario) {
      const start = ctx.startedAtMs();
      for (const o of scenario.observations) {
        const { daysAgo: _d, hoursAgo: _h, minutesAgo: _m, secondsAgo: _s, ...rest } = o;
        store.add({
          ...rest,
          serviceId: o.serviceId ?? ctx.config.credentials.serviceId,
          timeMs: start - offsetMsOf(o),
        });
      }
    },
    reset() {
      store.clear();
    },
  };
}
