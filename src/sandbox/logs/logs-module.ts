import { Hono } from 'hono';
import type { EventSink, SandboxModule, SandboxModuleContext } from '../sandbox-module.ts';

/** The sandbox's Log API (log-api.md, CONTRACT §6) and the event store it streams from. */
export function createLogsModule(ctx: SandboxModuleContext): SandboxModule & { events: EventSink } {
  void ctx;
  const app = new Hono();
  const events: EventSink = {
    emitServiceEvent(type, fields) {
      return {
        created_at: new Date(ctx.clock.now()).toISOString(),
        type,
        event_id: '',
        client_ip_address: '',
        client_port: '',
        ...fields,
      };
    },
    emitOrganizationEvent(type, fields) {
      return {
        created_at: new Date(ctx.clock.now()).toISOString(),
        type,
        event_id: '',
        client_ip_address: '',
        client_port: '',
        ...fields,
      };
    },
  };
  return { app, events, seed() {}, reset() {} };
}
