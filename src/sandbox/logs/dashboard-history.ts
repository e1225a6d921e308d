import type { EventSink } from '../sandbox-module.ts';

/**
 * Admin-dashboard history the sandbox starts with, so the Log API has organization and service
 * events to stream from the first poll. Deterministic per scenario name (same events, same times).
 */

interface DashboardUser {
  id: string;
  name: string;
  surname: string;
  email: string;
  userName: string;
}

const DASHBOARD_USERS: DashboardUser[] = [
  {
    id: 'a11ce000-0000-4000-8000-000000000001',
    name: 'Alice',
    surname: 'Admin',
    email: 'alice.admin@example.com',
    userName: 'alice.admin',
  },
  {
    id: 'b0b00000-0000-4000-8000-000000000002',
    name: 'Bob',
    surname: 'Operator',
    email: 'bob.operator@example.com',
    userName: 'bob.operator',
  },
];

/** Small seeded PRNG (mulberry32) so history is reproducible. */
function prng(seedText: string): () => number {
  let seed = 2166136261;
  for (let i = 0; i < seedText.length; i++) seed = Math.imul(seed ^ seedText.charCodeAt(i), 16777619);
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface DashboardHistoryOptions {
  /** Reference instant (the sandbox start), ms. */
  startedAtMs: number;
  serviceId: string;
  /** Seed for the PRNG (the scenario name). */
  seedText: string;
  /** How far back the history reaches, ms. Default 3 h. */
  spanMs?: number;
}

/**
 * Emits organization and service admin-dashboard events spread over `spanMs` before the start; every
 * third event has a second-precision `created_at` so clients see both precisions.
 */
export function seedDashboardHistory(events: EventSink, opts: DashboardHistoryOptions): number {
  const random = prng(opts.seedText);
  const span = opts.spanMs ?? 3 * 3_600_000;
  // Keep clear of the last two minutes: the Log API never serves them anyway (end ≤ now − 1 min).
  const latest = opts.startedAtMs - 2 * 60_000;
  let count = 0;
  const at = () => ({
    atMs: Math.floor(latest - random() * (span - 2 * 60_000)),
    secondPrecision: count % 3 === 0,
  });
  const client = () => ({
    ip: `198.51.100.${1 + Math.floor(random() * 250)}`,
    port: String(40000 + Math.floor(random() * 20000)),
  });
  const session = () => `sess-${Math.floor(random() * 1e12).toString(36)}`;
  const pick = () => DASHBOARD_USERS[Math.floor(random() * DASHBOARD_USERS.length)]!;

  const org = (type: string, fields: Record<string, unknown>) => {
    events.emitOrganizationEvent(type, fields, client(), at());
    count++;
  };
  const svc = (type: string, fields: Record<string, unknown>) => {
    events.emitServiceEvent(type, fields, client(), at());
    count++;
  };

  for (let i = 0; i < 12; i++) {
    const u = pick();
    org('admin-dashboard-user.login.succeeded', { admin_dashboard_user_id: u.id });
    svc('admin-dashboard.service.accessed', {
      by_admin_dashboard_user_id: u.id,
      admin_user_name: u.userName,
      admin_session_id: session(),
    });
  }
  for (let i = 0; i < 4; i++) {
    org('admin-dashboard-user.login.failed', {
      admin_dashboard_user_id: pick().id,
      reason: i % 2 === 0 ? 'invalid_password' : 'invalid_second_factor',
    });
  }
  const [alice, bob] = DASHBOARD_USERS as [DashboardUser, DashboardUser];
  const aliceSession = session();
  org('admin-dashboard.organization.secrets.retrieved', {
    admin_session_id: aliceSession,
    by_admin_dashboard_user_id: alice.id,
    user_id: alice.id,
    admin_user_name: alice.userName,
  });
  org('admin-dashboard-user.assigned', {
    active: true,
    admin_dashboard_user_id: bob.id,
    by_admin_dashboard_user_id: alice.id,
    email_address: bob.email,
    locked_at: null,
    name: bob.name,
    surname: bob.surname,
    admin_user_name: alice.userName,
    admin_session_id: aliceSession,
  });
  org('admin-dashboard-user.service-assignment.updated', {
    admin_session_id: aliceSession,
    admin_dashboard_user_id: bob.id,
    active: true,
    email_address: bob.email,
    name: bob.name,
    surname: bob.surname,
    assigned_service_ids: [opts.serviceId],
    by_admin_dashboard_user_id: alice.id,
    admin_user_name: alice.userName,
  });
  org('admin-dashboard-user.password.updated', {
    admin_dashboard_user_id: bob.id,
    admin_user_name: bob.userName,
    admin_session_id: session(),
  });
  org('admin-dashboard-user.updated', {
    admin_dashboard_user_id: bob.id,
    by_admin_dashboard_user_id: alice.id,
    role: 'administrator',
    admin_user_name: alice.userName,
    admin_session_id: aliceSession,
  });
  svc('admin-dashboard.service.secrets.retrieved', {
    by_admin_dashboard_user_id: alice.id,
    admin_user_name: alice.userName,
    admin_session_id: aliceSession,
  });
  svc('admin-dashboard.service.updated', {
    admin_session_id: aliceSession,
    by_admin_dashboard_user_id: alice.id,
    name: 'riskgate sandbox service',
    description: 'Emulated service for riskgate',
    admin_user_name: alice.userName,
    enabled_auth_factors: ['approve', 'mobile_totp', 'passcode', 'sms'],
    enabled_features: ['automatic_account_recovery', 'transaction_audit_log'],
  });
  svc('admin-dashboard.service.settings.updated', {
    by_admin_dashboard_user_id: alice.id,
    description: 'Emulated service for riskgate',
    name: 'riskgate sandbox service',
    user_default_max_attempts: '15',
    admin_user_name: alice.userName,
    admin_session_id: aliceSession,
  });
  return count;
}
