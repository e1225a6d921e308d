import { Hono } from 'hono';
import type { EventSink, SandboxModule, SandboxModuleContext } from '../sandbox-module.ts';
import type { Scenario } from '../scenario/scenario-schema.ts';
import { handleVendorError } from '../vendor-api-errors.ts';
import { userEventFields } from './admin-records.ts';
import { ADMIN_PREFIX, registerAdminRoutes } from './admin-routes.ts';
import { AdminState } from './admin-state.ts';
import { CallbackSender } from './callback-delivery.ts';
import { registerControlRoutes } from './control-routes.ts';
import { devicesOf } from './devices.ts';
import { seedUser } from './users.ts';

/** Tunables of the emulated Admin API. */
export interface AdminModuleOptions {
  /**
   * Accept callback URLs to http(s)://127.0.0.1, localhost or [::1] on any port, which the vendor
   * forbids (https, FQDN, port 443 only), so local tests can receive callbacks. Default true in the
   * sandbox; set false to enforce the vendor's rule (docs/vendor-api.md#callbacks).
   */
  allowInsecureCallbacks?: boolean;
  /** Per-attempt callback timeout, ms. Default 2000. */
  callbackTimeoutMs?: number;
  /** Callback attempts in all (first included). Default 3. */
  callbackMaxAttempts?: number;
  /** Delay before the first callback retry, doubled each time, ms. Default 100. */
  callbackRetryDelayMs?: number;
  /** How many callback delivery records `GET /sandbox/callbacks` keeps (oldest dropped first). Default 1,000. */
  callbackHistoryLimit?: number;
  /** What GET /server/api_version answers. Default `1.23.0`. */
  apiVersion?: string;
}

const DAY_MS = 86_400_000;

/**
 * The sandbox's Admin API (docs/vendor-api.md#admin-api) under `/srv/admin/v1`, and its control
 * routes under `/sandbox/` (authentications, enrollment completion, SMS verification, migrations,
 * callback deliveries, public images).
 */
export function createAdminModule(
  ctx: SandboxModuleContext,
  events: EventSink,
  options: AdminModuleOptions = {},
): SandboxModule {
  const callbacks = new CallbackSender({
    signatureKey: () => ctx.config.credentials.callbackSignatureKey,
    now: () => ctx.clock.now(),
    ...(options.callbackTimeoutMs === undefined ? {} : { timeoutMs: options.callbackTimeoutMs }),
    ...(options.callbackMaxAttempts === undefined ? {} : { maxAttempts: options.callbackMaxAttempts }),
    ...(options.callbackRetryDelayMs === undefined ? {} : { retryDelayMs: options.callbackRetryDelayMs }),
    ...(options.callbackHistoryLimit === undefined ? {} : { maxDeliveries: options.callbackHistoryLimit }),
  });
  const state = new AdminState(ctx, events, callbacks, {
    allowInsecureCallbacks: options.allowInsecureCallbacks ?? true,
  });
  const app = new Hono();
  app.onError(handleVendorError);
  registerAdminRoutes(app, state, ctx, { apiVersion: options.apiVersion ?? '1.23.0' });
  registerControlRoutes(app, state, callbacks);

  return {
    app,
    seed(scenario: Scenario) {
      seedAdmin(state, events, ctx, scenario);
    },
    reset() {
      state.clear();
      callbacks.clear();
    },
  };
}

/**
 * Users and devices of the scenario, plus a little service history for the Log API: each user was
 * touched by a dashboard admin in the last hours, and devices enrolled in the last 30 days have their
 * device.created event.
 */
function seedAdmin(
  state: AdminState,
  events: EventSink,
  ctx: SandboxModuleContext,
  scenario: Scenario,
): void {
  const startedAt = ctx.startedAtMs();
  scenario.users.forEach((seed, index) => {
    const oldestDays = Math.max(90, ...seed.devices.map((d) => d.enrolled_days_ago + 1));
    const createdAtSec = Math.floor((startedAt - oldestDays * DAY_MS) / 1000);
    const u = seedUser(state, {
      ...(seed.user_id === undefined ? {} : { user_id: seed.user_id }),
      username: seed.username,
      ...(seed.display_name === undefined ? {} : { display_name: seed.display_name }),
      ...(seed.status === undefined ? {} : { status: seed.status }),
      ...(seed.allowed_factors === undefined ? {} : { allowed_factors: seed.allowed_factors }),
      failed_attempts: seed.failed_attempts,
      ...(seed.max_attempts === undefined ? {} : { max_attempts: seed.max_attempts }),
      createdAtSec,
      devices: seed.devices.map((d) => ({
        ...(d.device_id === undefined ? {} : { device_id: d.device_id }),
        type: d.type,
        enrolled: d.enrolled,
        ...(d.display_name === undefined ? {} : { display_name: d.display_name }),
        ...(d.version === undefined ? {} : { version: d.version }),
        ...(d.version_supported === undefined ? {} : { version_supported: d.version_supported }),
        ...(d.number === undefined ? {} : { number: d.number }),
        ...(d.device_integrity === undefined ? {} : { device_integrity: d.device_integrity }),
        ...(d.account_recovery_flow_binding_enabled === undefined
          ? {}
          : { account_recovery_flow_binding_enabled: d.account_recovery_flow_binding_enabled }),
        enrolledAtSec: Math.floor((startedAt - d.enrolled_days_ago * DAY_MS) / 1000),
      })),
    });
    const client = { ip: `203.0.113.${10 + (index % 200)}`, port: String(50000 + index) };
    // Spread over the last 2 hours, never in the final 2 minutes; alternate precisions.
    const atMs = startedAt - 2 * 60_000 - ((index * 7 * 60_000) % (118 * 60_000));
    events.emitServiceEvent(
      'admin-dashboard.user.updated',
      {
        by_admin_dashboard_user_id: 'a11ce000-0000-4000-8000-000000000001',
        admin_user_name: 'alice.admin',
        admin_session_id: `sess-seed-${index}`,
        ...userEventFields(u),
      },
      client,
      { atMs, secondPrecision: index % 2 === 0 },
    );
    for (const d of devicesOf(state, u.user_id)) {
      if (!d.enrolled || d.enrolled_at === undefined) continue;
      const enrolledMs = d.enrolled_at * 1000;
      if (startedAt - enrolledMs >= 30 * DAY_MS || startedAt - enrolledMs < 2 * 60_000) continue;
      events.emitServiceEvent(
        'device.created',
        {
          device_id: d.device_id,
          enrolled: true,
          enrolled_at: d.enrolled_at,
          sdk_lock_config_type: 'none',
          user_id: u.user_id,
        },
        client,
        { atMs: enrolledMs },
      );
    }
  });
}

export { ADMIN_PREFIX };
