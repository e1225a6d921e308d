import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { eventually } from './support/eventually.ts';
import {
  buildDist,
  PROCESS_KEY,
  PROCESS_OPS_KEY,
  processEnv,
  type RiskgateProcess,
  startProcess,
} from './support/riskgate-process.ts';
import { sandboxControl } from './support/sandbox-control.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * Shutdown on any signal, to the primary alone (an orchestrator's SIGTERM) or to the whole process
 * group (Ctrl-C in a terminal, systemd's control-group kill): every request in flight is answered,
 * 200 or a clean 503, none reset, and every decision answered 200 is in the decision log. The
 * process leads its own group (test/support/process-tree.ts), so `-pid` is riskgate and its workers.
 */

let build: ReturnType<typeof buildDist>;
let sandbox: RunningSandbox;
let work: string;
let alice: string;

beforeAll(async () => {
  build = buildDist('shutdown');
  sandbox = await startTestSandbox();
  work = mkdtempSync(join(tmpdir(), 'riskgate-shutdown-'));
  alice = (await lookUpUserIds(sandbox, ['alice'])).alice!;
}, 120_000);

afterAll(async () => {
  await sandbox?.stop();
  build?.remove();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

type Outcome = { status: number; decisionId?: string; connection?: string } | { error: string };

/** One POST /decide on a connection of its own; a reset or refused connection is an outcome too. */
function decide(port: number): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path: '/decide',
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${PROCESS_KEY}`, 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c.toString();
        });
        res.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          const connection = res.headers.connection;
          if (status !== 200) resolve({ status, ...(connection !== undefined && { connection }) });
          else resolve({ status, decisionId: (JSON.parse(text) as { decisionId: string }).decisionId });
        });
      },
    );
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    // A request never answered is a failure with a name, not a hung test.
    req.setTimeout(30_000, () => req.destroy(new Error('no answer within 30 s')));
    req.end(JSON.stringify(demoRequest('alice', alice)));
  });
}

/** Decisions in flight over every worker, from /metrics. */
async function inFlight(port: number): Promise<number> {
  const text = await (
    await fetch(`http://127.0.0.1:${port}/metrics`, {
      headers: { authorization: `Bearer ${PROCESS_OPS_KEY}` },
    })
  ).text();
  return [...text.matchAll(/^riskgate_decisions_in_flight(?:\{[^}]*\})? (\d+)$/gm)]
    .map((m) => Number(m[1]))
    .reduce((a, b) => a + b, 0);
}

const CASES: { name: string; workers: number; signal: (p: RiskgateProcess) => void }[] = [
  {
    name: 'SIGINT to the whole group (Ctrl-C), 2 workers',
    workers: 2,
    signal: (p) => process.kill(-p.child.pid!, 'SIGINT'),
  },
  {
    name: 'SIGTERM to the whole group (systemd), 2 workers',
    workers: 2,
    signal: (p) => process.kill(-p.child.pid!, 'SIGTERM'),
  },
  { name: 'SIGTERM to the primary alone, 2 workers', workers: 2, signal: (p) => p.kill('SIGTERM') },
  {
    name: 'SIGINT to the whole group, RISKGATE_WORKERS=1',
    workers: 1,
    signal: (p) => process.kill(-p.child.pid!, 'SIGINT'),
  },
];

describe('shutdown with 40 decisions in flight on a slow vendor', () => {
  it.each(CASES)(
    '$name: every request answered 200 or a clean 503, every 200 in the decision log, exit 0',
    async ({ workers, signal }) => {
      const logPath = join(work, `decisions-${workers}-${Date.now()}.ndjson`);
      const p = startProcess(
        build.main,
        processEnv(sandbox, {
          RISKGATE_WORKERS: String(workers),
          RISKGATE_DECISION_LOG: logPath,
          // Room for the slow vendor: the 40 decisions stay in flight while the signal arrives.
          RISKGATE_DEADLINE_MS: '5000',
          RISKGATE_MAX_IN_FLIGHT: '1000',
        }),
      );
      try {
        const port = await p.port();
        // Warm up every worker (token, connections) before the vendor slows down.
        for (let i = 0; i < 6; i++) expect(await decide(port)).toMatchObject({ status: 200 });
        await sandboxControl(sandbox.url, 'PUT', '/sandbox/faults', {
          rules: [
            { route: 'GET /api/v1/signals/*', latency: { kind: 'fixed', ms: 1500 } },
            { route: 'POST /api/v1/signals/*', latency: { kind: 'fixed', ms: 1500 } },
          ],
        });
        let settled = 0;
        const answers = Promise.all(
          Array.from({ length: 40 }, () =>
            decide(port).finally(() => {
              settled++;
            }),
          ),
        );
        // Signalled once all 40 are inside riskgate or answered (admission may shed some at once),
        // none still in a listen queue.
        await eventually(async () => settled + (await inFlight(port)) >= 40, {
          timeoutMs: 20_000,
          intervalMs: 25,
          what: 'the 40 decisions in flight together',
        });
        signal(p);
        const outcomes = await answers;
        expect(await p.exited, p.stderr().slice(-3000)).toBe(0);

        const refused = outcomes.filter((o) => !('status' in o) || (o.status !== 200 && o.status !== 503));
        expect(refused, 'reset, refused or answered otherwise').toEqual([]);
        for (const o of outcomes) {
          if ('status' in o && o.status === 503) expect(o.connection).toBe('close');
        }
        const answered = outcomes.flatMap((o) => ('decisionId' in o && o.decisionId ? [o.decisionId] : []));
        expect(answered.length).toBeGreaterThan(0);
        const logged = new Set(
          (existsSync(logPath) ? readFileSync(logPath, 'utf8') : '')
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as { kind: string; decisionId: string })
            .filter((l) => l.kind === 'decision')
            .map((l) => l.decisionId),
        );
        expect(
          answered.filter((id) => !logged.has(id)),
          'answered 200 but not logged',
        ).toEqual([]);
      } finally {
        await sandboxControl(sandbox.url, 'DELETE', '/sandbox/faults');
        p.kill();
      }
    },
    90_000,
  );
});
