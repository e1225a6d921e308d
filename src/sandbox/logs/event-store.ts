import { randomInt, randomUUID } from 'node:crypto';
import type { EmitOptions, EventSink, LogEvent, SandboxModuleContext } from '../sandbox-module.ts';
import { formatCreatedAt, type LogRange, msToNs } from './log-range.ts';

/** Which Log API resource an event belongs to. */
export type LogScope = 'service' | 'organization';

interface StoredEvent {
  scope: LogScope;
  atNs: bigint;
  event: LogEvent;
}

const DEFAULT_CLIENT = { ip: '127.0.0.1', port: '0' };

/**
 * The sandbox's event history: every module emits here, the Log API streams from here. Events keep
 * the exact instant their `created_at` text names, so range checks agree with what clients parse.
 */
export class LogEventStore implements EventSink {
  readonly #ctx: SandboxModuleContext;
  #events: StoredEvent[] = [];
  /** Last instant handed to a clock-stamped event: later emits never sort before earlier ones. */
  #lastNowNs = 0n;

  constructor(ctx: SandboxModuleContext) {
    this.#ctx = ctx;
  }

  emitServiceEvent(
    type: string,
    fields: Record<string, unknown>,
    client?: { ip: string; port: string },
    options?: EmitOptions,
  ): LogEvent {
    return this.#record('service', type, fields, client, options);
  }

  emitOrganizationEvent(
    type: string,
    fields: Record<string, unknown>,
    client?: { ip: string; port: string },
    options?: EmitOptions,
  ): LogEvent {
    return this.#record('organization', type, fields, client, options);
  }

  /**
   * Stores an event whose `created_at` is given as text (any precision the Log API uses); for control
   * routes that inject history. Returns the stored event.
   */
  insert(scope: LogScope, atNs: bigint, event: LogEvent): LogEvent {
    this.#events.push({ scope, atNs, event });
    return event;
  }

  /** Events of `scope` with start ≤ created_at < end, in storage order. */
  query(scope: LogScope, range: LogRange): LogEvent[] {
    const out: LogEvent[] = [];
    for (const e of this.#events) {
      if (e.scope === scope && e.atNs >= range.startNs && e.atNs < range.endNs) out.push(e.event);
    }
    return out;
  }

  /** Every stored event of a scope (inspection). */
  all(scope?: LogScope): LogEvent[] {
    return this.#events.filter((e) => scope === undefined || e.scope === scope).map((e) => e.event);
  }

  clear(): void {
    this.#events = [];
    this.#lastNowNs = 0n;
  }

  #record(
    scope: LogScope,
    type: string,
    fields: Record<string, unknown>,
    client: { ip: string; port: string } | undefined,
    options: EmitOptions | undefined,
  ): LogEvent {
    const atMs = options?.atMs ?? this.#ctx.clock.now();
    const secondPrecision = options?.secondPrecision ?? false;
    // The clock has millisecond resolution; sub-millisecond digits make the nanosecond text realistic.
    let atNs: bigint;
    if (secondPrecision) {
      atNs = msToNs(Math.floor(atMs / 1000) * 1000);
    } else if (options?.atMs !== undefined) {
      atNs = msToNs(atMs) + BigInt(randomInt(0, 1_000_000));
    } else {
      atNs = msToNs(atMs) + BigInt(randomInt(0, 500_000));
      if (atNs <= this.#lastNowNs) atNs = this.#lastNowNs + BigInt(randomInt(1, 1000));
      this.#lastNowNs = atNs;
    }
    const { credentials } = this.#ctx.config;
    const c = client ?? DEFAULT_CLIENT;
    const event: LogEvent = {
      ...fields,
      created_at: formatCreatedAt(atNs, secondPrecision),
      type,
      event_id: randomUUID(),
      client_ip_address: c.ip,
      client_port: c.port,
      ...(scope === 'service'
        ? { service_id: credentials.serviceId }
        : { organization_id: credentials.organizationId }),
    };
    this.#events.push({ scope, atNs, event });
    return event;
  }
}
