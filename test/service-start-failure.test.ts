import { createHook } from 'node:async_hooks';
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/riskgate-config.ts';
import { sandboxUpstream } from '../src/dev/embedded-sandbox.ts';
import { type RunningSandbox, startSandbox } from '../src/sandbox/server.ts';
import { startRiskgate } from '../src/service/start-riskgate.ts';
import { eventually } from './support/eventually.ts';

/**
 * riskgate started with each of its components failing to start in turn: whatever had started is
 * stopped. Checked in this process: no socket, server or timer created by the start is left (ref'd
 * or not, through async_hooks), `process.getActiveResourcesInfo()` is back to what it was, no file
 * under the state directory is open (the SQLite outbox, the decision log file), and both ports
 * can be bound again.
 */

const CALLER_KEY = 'test-caller-key-0123456789';
const OPS_KEY = 'test-ops-key-0123456789abc';

/** The async resources that would outlive a leaky start, by type. */
const WATCHED = new Set(['Timeout', 'TCPWRAP', 'TCPSERVERWRAP', 'PIPEWRAP', 'FSEVENTWRAP', 'STATWATCHER']);

/**
 * Resources of a watched type created while tracking (until `freeze`: the check's own timers are
 * not the start's) and not yet destroyed. DEBUG_LEAK=1 names where each was created.
 */
function trackResources() {
  const live = new Map<number, string>();
  let frozen = false;
  const hook = createHook({
    init(id, type) {
      if (frozen || !WATCHED.has(type)) return;
      live.set(id, process.env.DEBUG_LEAK ? `${type} ${new Error().stack}` : type);
    },
    destroy(id) {
      live.delete(id);
    },
  });
  hook.enable();
  return {
    live: () => [...live.values()].sort(),
    freeze: () => {
      frozen = true;
    },
    stop: () => hook.disable(),
  };
}

function countByType(types: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const t of types) counts[t] = (counts[t] ?? 0) + 1;
  return counts;
}

/** Files under `dir` this process holds open (Linux: /proc/self/fd). */
function openFilesUnder(dir: string): string[] {
  return readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      return target.startsWith(dir) ? [target] : [];
    } catch {
      return []; // closed between the listing and the read
    }
  });
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Binds `port` (no SO_REUSEPORT): rejects while anyone listens on it. */
async function bind(port: number): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return server;
}

/** Polls `check` until it stops throwing (closes finish on later turns); fails with its last error. */
function eventuallyPasses(check: () => void | Promise<void>, timeoutMs = 10_000): Promise<true> {
  return eventually(
    async () => {
      await check();
      return true as const;
    },
    { timeoutMs, what: 'the check' },
  );
}

describe('a riskgate whose start fails', () => {
  let sandbox: RunningSandbox;
  let dir: string;
  let ports: { port: number; opsPort: number };
  const serviceLog: Record<string, unknown>[] = [];

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, quiet: true });
    dir = mkdtempSync(join(tmpdir(), 'riskgate-start-failure-'));
    ports = { port: await freePort(), opsPort: await freePort() };
  });
  afterAll(async () => {
    await sandbox?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Every component and loop riskgate has: SQLite outbox, file log, shadow policy, Log API, ops port. */
  const start = (beforeComponentStart?: (name: string) => void) =>
    startRiskgate({
      config: loadConfig({
        RISKGATE_PORT: String(ports.port),
        RISKGATE_OPS_PORT: String(ports.opsPort),
        RISKGATE_ACCEPT_SOCKETS: '2',
        RISKGATE_POLICY_PATH: 'policies/',
        RISKGATE_SHADOW_POLICY_PATH: 'policies/',
        RISKGATE_DECISION_LOG: join(dir, 'decisions.ndjson'),
        RISKGATE_OUTBOX: 'sqlite',
        RISKGATE_STATE_DIR: dir,
        RISKGATE_OPS_KEYS: OPS_KEY,
      }),
      upstream: sandboxUpstream(sandbox),
      apiKeys: [CALLER_KEY],
      host: '127.0.0.1',
      log: (line) => serviceLog.push(line),
      policyDebounceMs: 50,
      drainTimeoutMs: 2000,
      beforeComponentStart,
    });

  /** Runs `run` and shows it left nothing behind: resources, open files, ports. */
  async function leavesNothing(run: () => Promise<void>): Promise<void> {
    const before = countByType(process.getActiveResourcesInfo());
    const tracked = trackResources();
    try {
      await run();
      tracked.freeze();
      await eventuallyPasses(() => {
        expect(tracked.live()).toEqual([]);
        // Never more of a kind than before (fewer: something of the harness's finished meanwhile).
        const after = countByType(process.getActiveResourcesInfo());
        const grown = Object.keys(after).filter((type) => after[type]! > (before[type] ?? 0));
        expect(grown.map((type) => `${type}: ${before[type] ?? 0} -> ${after[type]}`)).toEqual([]);
        expect(openFilesUnder(dir)).toEqual([]);
      });
    } finally {
      tracked.stop();
    }
    for (const port of [ports.port, ports.opsPort]) {
      const server = await bind(port);
      await new Promise((resolve) => server.close(resolve));
    }
  }

  const names: string[] = [];

  it('started and stopped, leaves nothing behind', async () => {
    await leavesNothing(async () => {
      const riskgate = await start((name) => {
        names.push(name);
      });
      await riskgate.ready;
      // Ready once the inputs the policy reads are warm (the Log API history read after the start).
      await eventuallyPasses(
        async () => expect((await fetch(`${riskgate.url}/readyz`)).status).toBe(200),
        30_000,
      );
      await riskgate.stop();
    });
    expect(names).toEqual([
      'metrics',
      'tracing',
      'decision log',
      'database',
      'audit trail',
      'decision store',
      'vendor clients',
      'admission',
      'policy evidence',
      'policies',
      'feature store',
      'lists',
      'snoozes',
      'log follower',
      'lockouts',
      'webhook delivery',
      'outbox',
      'webhooks',
      'ask-user',
      'feedback',
      'review queue',
      'console',
      'probes and routes',
      'caller listener',
      'ops listener',
    ]);
  });

  it('failing at each component in turn, stops every one started before it', async () => {
    expect(names.length).toBeGreaterThan(0);
    for (const failing of names) {
      const started: string[] = [];
      await leavesNothing(async () => {
        await expect(
          start((name) => {
            if (name === failing) throw new Error(`injected: ${name} does not start`);
            started.push(name);
          }),
          failing,
        ).rejects.toThrow(`injected: ${failing} does not start`);
      });
      expect(started, failing).toEqual(names.slice(0, names.indexOf(failing)));
    }
  }, 120_000);

  it('with its ops port taken, fails at the ops listener and stops the rest', async () => {
    await leavesNothing(async () => {
      const squatter = await bind(ports.opsPort);
      try {
        await expect(start()).rejects.toThrow(/EADDRINUSE/);
      } finally {
        await new Promise((resolve) => squatter.close(resolve));
      }
    });
  });
});
