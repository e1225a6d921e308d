import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { buildDist, processEnv, ROOT, startProcess } from './support/riskgate-process.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * How `RISKGATE_WORKERS` processes start: every worker binds the host the primary says it listens
 * on (127.0.0.1 unless told), and the workers of a fresh state dir migrate its database once
 * between them (each has a connection of its own to the file: src/database/database.ts, `migrate`).
 * Runs the compiled entry point (`npm start`'s src/main.ts, built once: a start under tsx costs
 * each of the three processes its own transform).
 */

const work = mkdtempSync(join(tmpdir(), 'riskgate-cluster-start-'));
let build: ReturnType<typeof buildDist>;
beforeAll(() => {
  build = buildDist('cluster-start');
  // Sandbox mode reads its scenario beside the compiled sandbox (tsc copies no YAML).
  cpSync(join(ROOT, 'src/sandbox/scenario'), join(build.dir, 'sandbox/scenario'), { recursive: true });
}, 120_000);
afterAll(() => {
  build?.remove();
  rmSync(work, { recursive: true, force: true });
});

/**
 * The local addresses of the sockets listening on `port` (/proc/net/tcp and tcp6: the kernel's own
 * view, whatever the process logged), as dotted IPv4 or `::`-style hex for IPv6.
 */
function listeningAddresses(port: number): string[] {
  const addresses: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (local === undefined || state !== '0A') continue; // 0A: LISTEN
      const [hex, portHex] = local.split(':');
      if (Number.parseInt(portHex!, 16) !== port) continue;
      addresses.push(
        hex!.length === 8
          ? // Little-endian on x86 and arm: 0100007F is 127.0.0.1.
            [3, 2, 1, 0].map((i) => Number.parseInt(hex!.slice(i * 2, i * 2 + 2), 16)).join('.')
          : hex!,
      );
    }
  }
  return addresses;
}

describe('npm start with RISKGATE_WORKERS=2, no host configured', () => {
  it('listens on 127.0.0.1 in every worker, as its log says, never on every interface', async () => {
    const env = {
      PATH: process.env.PATH ?? '',
      RISKGATE_STATE_DIR: mkdtempSync(join(work, 'sandbox-state-')),
      RISKGATE_PORT: '0',
      SANDBOX_PORT: '0',
      RISKGATE_WORKERS: '2',
      RISKGATE_ACCEPT_SOCKETS: '2',
      RISKGATE_DECISION_LOG: 'off',
    };
    const p = startProcess(build.main, env);
    try {
      const port = await p.port();
      expect(p.stderr()).toMatch(/"msg":"riskgate listening","host":"127\.0\.0\.1"/);
      const addresses = listeningAddresses(port);
      // Two workers, two accept sockets each, every one on loopback.
      expect(addresses).toEqual(['127.0.0.1', '127.0.0.1', '127.0.0.1', '127.0.0.1']);
      p.kill('SIGTERM');
      expect(await p.exited).toBe(0);
    } finally {
      p.kill();
    }
  }, 60_000);
});

describe('2 workers on a fresh state dir', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startTestSandbox();
  });
  afterAll(async () => sandbox?.stop());

  it('migrate the database once between them: 10 fresh starts, no migration error, no worker lost', async () => {
    for (let start = 1; start <= 10; start++) {
      const p = startProcess(
        build.main,
        processEnv(sandbox, {
          RISKGATE_STATE_DIR: mkdtempSync(join(work, `state-${start}-`)),
          RISKGATE_WORKERS: '2',
          RISKGATE_ACCEPT_SOCKETS: '1',
          RISKGATE_POLICY_PATH: join(ROOT, 'policies'),
          RISKGATE_DECISION_LOG: 'off',
        }),
      );
      try {
        // The primary says it listens once both workers do, each having opened and migrated the
        // database first: what follows is not this test's (SIGKILL spares the drain, ~1 s a start).
        await p.port();
        expect(p.stderr(), `start ${start}`).not.toMatch(/migrating|UNIQUE constraint|worker exited/);
      } finally {
        p.kill();
        await p.exited;
      }
    }
  }, 240_000);
});
