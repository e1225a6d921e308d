import { once } from 'node:events';
import { type AddressInfo, connect, createServer as createNetServer, type Socket } from 'node:net';
import { type AdminClient, type AdminClientOptions, createAdminClient } from '../src/admin/admin-client.ts';
import {
  createTokenManager,
  type TokenManager,
  type TokenManagerOptions,
} from '../src/auth/token-manager.ts';
import type { RunningSandbox, SandboxOptions } from '../src/sandbox/server.ts';
import {
  createSignalsClient,
  type SignalsClient,
  type SignalsClientOptions,
} from '../src/signals/signals-client.ts';
import { sandboxControl } from './support/sandbox-control.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * Test support for the upstream clients: a sandbox on port 0 plus its control API over HTTP
 * (`/sandbox/stats`, `/sandbox/faults`, `/sandbox/clock`), and clients wired to it.
 */

export interface StatsSnapshot {
  routes: Record<string, Record<string, number>>;
  tokensIssued: number;
  ratBatchSizes: number[];
}

export interface ClientSandbox {
  sb: RunningSandbox;
  url: string;
  stats(): Promise<StatsSnapshot>;
  resetStats(): Promise<void>;
  /** Replaces the fault rules. */
  faults(rules: unknown[]): Promise<void>;
  clearFaults(): Promise<void>;
  /** Moves the sandbox clock forward. */
  advanceClock(seconds: number): Promise<void>;
  /** Calls counted for `route` (`"METHOD /pattern"`), all statuses, or one status. */
  count(s: StatsSnapshot, route: string, status?: number): number;
  tokens(over?: Partial<TokenManagerOptions>): TokenManager;
  signals(tokens: SignalsClientOptions['tokens'], over?: Partial<SignalsClientOptions>): SignalsClient;
  admin(over?: Partial<AdminClientOptions>): AdminClient;
  stop(): Promise<void>;
}

const control = sandboxControl;

export async function startClientSandbox(options: SandboxOptions = {}): Promise<ClientSandbox> {
  const sb = await startTestSandbox(options);
  const url = sb.url;
  const creds = sb.config.credentials;
  const closers: (() => Promise<void>)[] = [];
  return {
    sb,
    url,
    stats: async () => (await control(url, 'GET', '/sandbox/stats')) as StatsSnapshot,
    resetStats: async () => {
      await control(url, 'POST', '/sandbox/stats/reset');
    },
    faults: async (rules) => {
      await control(url, 'PUT', '/sandbox/faults', { rules });
    },
    clearFaults: async () => {
      await control(url, 'DELETE', '/sandbox/faults');
    },
    advanceClock: async (seconds) => {
      await control(url, 'POST', '/sandbox/clock', { advanceSeconds: seconds });
    },
    count(s, route, status) {
      const byStatus = s.routes[route] ?? {};
      if (status !== undefined) return byStatus[String(status)] ?? 0;
      return Object.values(byStatus).reduce((a, b) => a + b, 0);
    },
    tokens(over = {}) {
      const m = createTokenManager({
        authUrl: url,
        clientId: creds.retrievalClientId,
        clientSecret: creds.retrievalClientSecret,
        audience: creds.signalsAudience,
        idp: creds.idp,
        ...over,
      });
      closers.push(() => m.stop());
      return m;
    },
    signals(tokens, over = {}) {
      const c = createSignalsClient({
        baseUrl: `${url}/api/v1`,
        serviceId: creds.serviceId,
        tokens,
        ...over,
      });
      closers.push(() => c.close());
      return c;
    },
    admin(over = {}) {
      const c = createAdminClient({
        baseUrl: url,
        serviceId: creds.serviceId,
        apiKey: creds.adminApiKey,
        ...over,
      });
      closers.push(() => c.close());
      return c;
    },
    async stop() {
      await Promise.all(closers.splice(0).map((c) => c()));
      await sb.stop();
    },
  };
}

/** A TCP relay in front of `targetUrl` that counts the connections clients open through it. */
export async function startCountingProxy(
  targetUrl: string,
): Promise<{ url: string; connections(): number; stop(): Promise<void> }> {
  const target = new URL(targetUrl);
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createNetServer((client) => {
    connections++;
    const upstream = connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => connections,
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
