import { Hono } from 'hono';
import { createAdminModule } from './admin/admin-module.ts';
import { type AdjustableClock, createSandboxClock } from './clock/sandbox-clock.ts';
import { createControlRoutes } from './control/control-routes.ts';
import { FaultInjector } from './faults/fault-injector.ts';
import type { FaultRule } from './faults/fault-rule.ts';
import { createLogsModule } from './logs/logs-module.ts';
import { createAccessTokens } from './oauth/access-tokens.ts';
import { createOAuthRoutes } from './oauth/oauth-routes.ts';
import { createSigningKey, type SigningKey } from './oauth/signing-key.ts';
import type { SandboxConfig } from './sandbox-config.ts';
import type { SandboxModule, SandboxModuleContext } from './sandbox-module.ts';
import type { Scenario } from './scenario/scenario-schema.ts';
import type { ObservationStore } from './signals/observation-store.ts';
import { createSignalsModule } from './signals/signals-module.ts';
import { RequestStats } from './stats/request-stats.ts';
import { routeKeyOf } from './stats/route-key.ts';
import { apiOfPath, vendorErrorResponse } from './vendor-api-errors.ts';

export interface CreateSandboxAppOptions {
  config: SandboxConfig;
  /** Seeds users, devices, observations and start-time faults. */
  scenario: Scenario;
  /** Start-time faults on top of the scenario's (e.g. from SANDBOX_FAULTS). */
  faults?: readonly FaultRule[];
  /** Default: wall time with an adjustable offset. */
  clock?: AdjustableClock;
  /** Default: a fresh RS256 key pair. */
  signingKey?: SigningKey;
  /** Base URL tokens name as issuer (`<url>/oauth/v2`); settable later once the port is known. */
  publicUrl?: string;
  /** Source of [0,1) draws for fault rates and latencies. Default Math.random. */
  random?: () => number;
  /** Where unexpected handler errors are reported (never in a response). Default console.error. */
  logError?: (message: string, err: unknown) => void;
}

/** An assembled sandbox that does not listen: `app.fetch` serves it. */
export interface SandboxApp {
  app: Hono<SandboxEnv>;
  config: SandboxConfig;
  clock: AdjustableClock;
  stats: RequestStats;
  faults: FaultInjector;
  observations: ObservationStore;
  setPublicUrl(url: string): void;
  /** Everything back to the scenario's start state (what `POST /sandbox/reset` does). */
  reset(): void;
  /** Ends pending fault delays and hangs (call before closing the server). */
  shutdown(): void;
}

export type SandboxEnv = { Variables: { routeKey: string; hung: boolean } };

/**
 * Builds the sandbox: one Hono app serving the OAuth, Trust Signals, Admin and Log APIs under their
 * path prefixes plus the `/sandbox/...` control API. No listening, no env, no signal handling.
 *
 * Every vendor-API request passes, in order: the stats middleware (counts `<METHOD> <route>` →
 * status), the fault middleware, then its route.
 */
export async function createSandboxApp(options: CreateSandboxAppOptions): Promise<SandboxApp> {
  const { config, scenario } = options;
  const clock = options.clock ?? createSandboxClock();
  const key = options.signingKey ?? (await createSigningKey());
  let publicUrl = options.publicUrl ?? 'http://127.0.0.1';
  let startedAtMs = clock.now();
  const issuer = () => `${publicUrl}/oauth/v2`;

  const stats = new RequestStats();
  const faults = new FaultInjector([...scenario.faults, ...(options.faults ?? [])], options.random);
  const tokens = createAccessTokens({
    key,
    clock,
    issuer,
    serviceId: config.credentials.serviceId,
    lifetimeSeconds: config.tokenLifetimeSeconds,
  });

  const ctx: SandboxModuleContext = { config, clock, startedAtMs: () => startedAtMs };
  const signals = createSignalsModule(ctx, { tokens, onBatch: (n) => stats.recordBatchSize(n) });
  const logs = createLogsModule(ctx);
  const admin = createAdminModule(ctx, logs.events);
  const modules: SandboxModule[] = [signals, logs, admin];

  const app = new Hono<SandboxEnv>();
  app.use('*', async (c, next) => {
    if (apiOfPath(c.req.path) === 'control') return next();
    const routeKey = routeKeyOf(c);
    c.set('routeKey', routeKey);
    stats.recordRequest(routeKey, c.req.header('traceparent'));
    await next();
    if (!c.get('hung')) stats.recordResponse(routeKey, c.res.status);
  });
  app.use(
    '*',
    faults.middleware({
      routeKey: (c) => c.get('routeKey') ?? routeKeyOf(c),
      onHang: (c) => {
        c.set('hung', true);
        stats.recordResponse(c.get('routeKey') ?? routeKeyOf(c), 0);
      },
    }),
  );
  // The control routes are mounted before the fault middleware applies to them: it skips them too.
  app.route(
    '/',
    createOAuthRoutes({
      credentials: config.credentials,
      tokens,
      issuer,
      onTokenIssued: () => stats.recordTokenIssued(),
    }),
  );
  for (const m of modules) app.route('/', m.app);

  const reset = () => {
    clock.resetOffset();
    startedAtMs = clock.now();
    stats.reset();
    faults.restoreInitial();
    for (const m of modules) m.reset();
    for (const m of modules) m.seed(scenario);
  };
  app.route(
    '/',
    createControlRoutes({
      stats,
      faults,
      clock,
      reset,
      info: () => ({
        scenario: scenario.name,
        url: publicUrl,
        startedAt: new Date(startedAtMs).toISOString(),
        now: new Date(clock.now()).toISOString(),
        clockOffsetMs: clock.offsetMs(),
        observations: signals.store.size(),
        tokenLifetimeSeconds: config.tokenLifetimeSeconds,
        thresholds: config.thresholds,
      }),
    }),
  );

  app.notFound((c) =>
    vendorErrorResponse(apiOfPath(c.req.path), 404, `no route for ${c.req.method} ${c.req.path}`),
  );
  const logError = options.logError ?? ((message, err) => console.error(message, err));
  app.onError((err, c) => {
    logError(`sandbox: ${c.req.method} ${c.req.path} failed`, err);
    return vendorErrorResponse(apiOfPath(c.req.path), 500, 'Internal error');
  });

  for (const m of modules) m.seed(scenario);

  return {
    app,
    config,
    clock,
    stats,
    faults,
    observations: signals.store,
    setPublicUrl(url) {
      publicUrl = url.replace(/\/+$/, '');
    },
    reset,
    shutdown() {
      faults.stop();
    },
  };
}
