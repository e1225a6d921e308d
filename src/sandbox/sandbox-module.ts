import type { Hono } from 'hono';
import type { SandboxClock, SandboxConfig } from './sandbox-config.ts';
import type { Scenario } from './scenario/scenario-schema.ts';

/** What every sandbox module receives when the sandbox is assembled. */
export interface SandboxModuleContext {
  config: SandboxConfig;
  clock: SandboxClock;
  /** Millisecond timestamp the sandbox (or its last reset) started at; seed times are relative to it. */
  startedAtMs(): number;
}

/**
 * One emulated API (or a group of control routes). The sandbox mounts `app` at the root (routes
 * carry their full paths, e.g. `/srv/admin/v1/users/:id`), seeds it from the scenario, and resets it
 * on `POST /sandbox/reset`.
 */
export interface SandboxModule {
  app: Hono;
  seed(scenario: Scenario): void;
  reset(): void;
}

/** A Log API event as stored and streamed: one JSON object per NDJSON line. */
export interface LogEvent {
  /** ISO 8601 with second or nanosecond precision, e.g. `2024-01-02T10:00:00.123456789Z`. */
  created_at: string;
  type: string;
  event_id: string;
  client_ip_address: string;
  client_port: string;
  service_id?: string;
  organization_id?: string;
  [field: string]: unknown;
}

/** When an event happened, for events recorded after the fact (seed history). */
export interface EmitOptions {
  /** Millisecond timestamp of the event. Default: the sandbox clock's now. */
  atMs?: number;
  /** `created_at` with second precision (`...T10:00:00Z`) instead of nanoseconds. Default false. */
  secondPrecision?: boolean;
}

/** Where sandbox modules record events for the Log API to stream. */
export interface EventSink {
  /** Records a service event (adds created_at from the clock, event_id, service_id, client ip/port). */
  emitServiceEvent(
    type: string,
    fields: Record<string, unknown>,
    client?: { ip: string; port: string },
    options?: EmitOptions,
  ): LogEvent;
  /** Records an organization event. */
  emitOrganizationEvent(
    type: string,
    fields: Record<string, unknown>,
    client?: { ip: string; port: string },
    options?: EmitOptions,
  ): LogEvent;
}
