import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { buildDist, PROCESS_KEY, processEnv, ROOT } from './support/riskgate-process.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * `OTEL_TRACES_EXPORTER=console` on the production command (`node dist/main.js`): the spans go to
 * stderr with the service log, and stdout, the decision log's default stream, stays one JSON
 * record per line that a log shipper can parse.
 */

let dist: { main: string; remove: () => void };
let sandbox: RunningSandbox;
let work: string;

beforeAll(async () => {
  dist = buildDist('tracing-console');
  sandbox = await startTestSandbox();
  work = mkdtempSync(join(tmpdir(), 'riskgate-tracing-console-'));
}, 120_000);

afterAll(async () => {
  await sandbox?.stop();
  dist?.remove();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('OTEL_TRACES_EXPORTER=console', () => {
  it('writes spans to stderr and leaves stdout pure NDJSON decision log', async () => {
    const child = spawn(process.execPath, [dist.main], {
      cwd: ROOT,
      env: processEnv(sandbox, {
        RISKGATE_POLICY_PATH: join(ROOT, 'policies'),
        RISKGATE_STATE_DIR: mkdtempSync(join(work, 'state-')),
        RISKGATE_DECISION_LOG: 'stdout',
        OTEL_TRACES_EXPORTER: 'console',
      }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      let port: number | undefined;
      await expect
        .poll(
          () => {
            if (child.exitCode !== null) throw new Error(`riskgate exited: ${stderr.slice(-2000)}`);
            port = Number(/"msg":"riskgate listening","host":"[^"]*","port":(\d+)/.exec(stderr)?.[1]);
            return port > 0;
          },
          { timeout: 20_000, interval: 20 },
        )
        .toBe(true);
      const { mallory } = await lookUpUserIds(sandbox, ['mallory']);
      const requests = [
        demoRequest('alice', undefined),
        demoRequest('mallory', mallory),
        demoRequest('bob', undefined),
      ];
      for (const body of requests) {
        const res = await fetch(`http://127.0.0.1:${port}/decide`, {
          method: 'POST',
          headers: { authorization: `Bearer ${PROCESS_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        expect(res.status).toBe(200);
        await res.body?.cancel();
      }
      // SIGTERM drains: the lock-out's action line and every decision line are written before exit.
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }

    const lines = stdout.split('\n').filter((l) => l !== '');
    const notJson = lines.filter((l) => {
      try {
        return typeof JSON.parse(l) !== 'object';
      } catch {
        return true;
      }
    });
    expect(notJson.slice(0, 3)).toEqual([]);
    const records = lines.map((l) => JSON.parse(l) as { kind: string });
    expect(records.filter((r) => r.kind === 'decision')).toHaveLength(3);
    // The spans are there all the same: on stderr, one JSON line each.
    const spans = stderr
      .split('\n')
      .filter((l) => l.includes('"msg":"span"'))
      .map((l) => JSON.parse(l) as { name: string; attributes: Record<string, unknown> });
    expect(spans.filter((s) => s.name === 'POST /decide')).toHaveLength(3);
    expect(spans.some((s) => s.name === 'admin get-user')).toBe(true);
  }, 60_000);
});
