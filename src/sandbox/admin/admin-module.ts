import { Hono } from 'hono';
import type { EventSink, SandboxModule, SandboxModuleContext } from '../sandbox-module.ts';

/** The sandbox's Admin API (admin-api.md, CONTRACT §1/§5) and its `/sandbox/...` control routes. */
export function createAdminModule(ctx: SandboxModuleContext, events: EventSink): SandboxModule {
  void ctx;
  void events;
  const app = new Hono();
  return { app, seed() {}, reset() {} };
}
