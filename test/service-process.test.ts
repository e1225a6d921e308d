import { type ChildProcess, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';
import { patientPolicyEnv } from './support/patient-policy.ts';
import { signalTree, spawnTree } from './support/process-tree.ts';
import { buildDist, PROCESS_KEY, PROCESS_OPS_KEY, processEnv } from './support/riskgate-process.ts';
import { sandboxControl } from './support/sandbox-control.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * The production start command, as the container runs it: `node dist/main.js`, compiled here with
 * the build's own tsconfig and, like the Dockerfile, without dist/sandbox and dist/dev (so the
 * production import graph is proven free of them), configured by environment variables against a
 * sandbox on port 0. Covers configuration errors at start and the graceful shutdown on SIGTERM.
 */

const ROOT = resolve(import.meta.dirname, '..');
const KEY = PROCESS_KEY;

let build: ReturnType<typeof buildDist>;
let sandbox: RunningSandbox;
let work: string;

beforeAll(async () => {
  build = buildDist('test');
  rmSync(join(build.dir, 'sandbox'), { recursive: true });
  rmSync(join(build.dir, 'dev'), { recursive: true });
  sandbox = await startTestSandbox();
  work = mkdtempSync(join(tmpdir(), 'riskgate-process-'));
}, 120_000);

afterAll(async () => {
  await sandbox?.stop();
  build?.remove();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

function vendorEnv(): Record<string, string> {
  return processEnv(sandbox, {
    RISKGATE_POLICY_PATH: join(ROOT, 'policies'),
    // Each process its own state (the outbox, the log checkpoint) unless a test shares it on purpose.
    RISKGATE_STATE_DIR: mkdtempSync(join(work, 'state-')),
  });
}

/**
 * The shipped policy with patient timeouts and deadline, far above the faults' latency: mallory's
 * deny must rest on her signals even on a busy machine (a signal that misses its timeout makes the
 * decision degraded, a challenge: right, but not what these tests are about).
 */
function generousDeadlines(): Record<string, string> {
  return patientPolicyEnv(work);
}

interface Started {
  child: ChildProcess;
  stderr: () => string;
  exited: Promise<number | null>;
}

function run(env: Record<string, string>, nodeArgs: string[] = []): Started {
  const child = spawnTree(process.execPath, [...nodeArgs, build.main], {
    cwd: work,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  child.stdout!.resume();
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, stderr: () => stderr, exited };
}

/**
 * How long a process may take to listen, milliseconds, and the timeout of a test that starts one.
 * A start (Node loading dist/, the database opened and migrated, with RISKGATE_WORKERS=2 two more
 * processes forked) takes time that grows with the machine's load: two workers took over 15 s to
 * listen at a load of 8 on two cores. The bound catches a start that hangs, not a slow one.
 */
const START_MS = 45_000;
const PROCESS_TEST_MS = 2 * START_MS;

async function listeningPort(p: Started): Promise<number> {
  const port = await eventually(
    () => {
      if (p.child.exitCode !== null) throw new Error(`exited: ${p.stderr()}`);
      const m = /"msg":"riskgate listening","host":"[^"]*","port":(\d+)/.exec(p.stderr());
      return m ? Number(m[1]) : undefined;
    },
    { timeoutMs: START_MS, intervalMs: 25, what: 'riskgate listening' },
  ).catch((error: Error) => {
    throw new Error(`did not start: ${p.stderr()}`, { cause: error });
  });
  return port;
}

/** Waits until a call to the sandbox is held by a latency fault: a decision is in flight. */
async function callHeldBySandbox(): Promise<void> {
  await eventually(() => sandbox.sandbox.faults.pendingWaits() > 0, {
    timeoutMs: 10_000,
    what: 'a call held by the sandbox',
  });
}

/** Polls until the sandbox has seen `route` answered or hanging, for up to 5 s. */
async function sandboxSaw(route: string): Promise<void> {
  await eventually(
    async () => {
      const stats = (await (await fetch(`${sandbox.url}/sandbox/stats`)).json()) as {
        routes: Record<string, unknown>;
      };
      return stats.routes[route] !== undefined;
    },
    { timeoutMs: 5000, what: `the sandbox seeing ${route}` },
  );
}

const control = (method: string, path: string, body?: unknown) =>
  sandboxControl(sandbox.url, method, path, body);

describe('node dist/main.js', () => {
  it('stops at start with a message naming a missing variable', async () => {
    const { RISKGATE_ADMIN_API_KEY: _, ...env } = vendorEnv();
    const p = run(env);
    expect(await p.exited).toBe(1);
    expect(p.stderr()).toBe('riskgate: RISKGATE_ADMIN_API_KEY is required\n');
  });

  it('refuses to fall back to the sandbox in production', async () => {
    const p = run({ NODE_ENV: 'production', RISKGATE_PORT: '0', RISKGATE_WORKERS: '1' });
    expect(await p.exited).toBe(1);
    expect(p.stderr()).toMatch(/^riskgate: RISKGATE_SIGNALS_URL is required with NODE_ENV=production/);
  });

  it(
    'serves decisions and, on SIGTERM, finishes the one in flight, drains the lock-out and the log, exits 0',
    async () => {
      const logPath = join(work, 'decisions.ndjson');
      const p = run({
        ...vendorEnv(),
        ...generousDeadlines(),
        NODE_ENV: 'production',
        RISKGATE_DECISION_LOG: logPath,
      });
      const port = await listeningPort(p);
      const base = `http://127.0.0.1:${port}`;
      await eventually(async () => (await fetch(`${base}/readyz`)).status === 200, { what: 'ready' });

      const { mallory, alice } = await lookUpUserIds(sandbox, ['mallory', 'alice']);
      // Warm up (connections, JIT): a cold first call under slow signals could miss their timeouts.
      const warm = await fetch(`${base}/decide`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(demoRequest('alice', alice)),
      });
      expect(warm.status).toBe(200);
      // Slow signals keep the decision in flight at SIGTERM; a slow Admin PUT keeps the lock-out queued.
      await control('PUT', '/sandbox/faults', {
        rules: [
          { route: 'GET /api/v1/signals/*', latency: { kind: 'fixed', ms: 120 } },
          { route: 'POST /api/v1/signals/*', latency: { kind: 'fixed', ms: 120 } },
          { route: 'PUT /srv/admin/v1/users/*', latency: { kind: 'fixed', ms: 400 } },
        ],
      });
      try {
        const answer = fetch(`${base}/decide`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify(demoRequest('mallory', mallory)),
        });
        await callHeldBySandbox();
        p.child.kill('SIGTERM');
        const res = await answer;
        expect(res.status).toBe(200);
        const body = (await res.json()) as { decisionId: string; verdict: string };
        expect(body.verdict).toBe('deny');
        expect(await p.exited).toBe(0);

        const lines = readFileSync(logPath, 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, unknown>)
          .filter((l) => l.decisionId === body.decisionId);
        expect(lines.map((l) => [l.kind, l.decisionId])).toEqual([
          ['decision', body.decisionId],
          ['action', body.decisionId],
        ]);
        expect(lines[1]).toMatchObject({ type: 'lock_out_user', status: 'done' });
      } finally {
        await control('DELETE', '/sandbox/faults');
        signalTree(p.child, 'SIGKILL');
      }
    },
    PROCESS_TEST_MS,
  );

  it(
    'on SIGHUP reopens the decision log at its path: logrotate moves the file, no line is lost',
    async () => {
      const logPath = join(work, 'rotated.ndjson');
      const p = run({ ...vendorEnv(), RISKGATE_DECISION_LOG: logPath });
      try {
        const port = await listeningPort(p);
        const { alice } = await lookUpUserIds(sandbox, ['alice']);
        const decide = async () => {
          const res = await fetch(`http://127.0.0.1:${port}/decide`, {
            method: 'POST',
            headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
            body: JSON.stringify(demoRequest('alice', alice)),
          });
          expect(res.status).toBe(200);
          return ((await res.json()) as { decisionId: string }).decisionId;
        };
        const ids = (path: string) =>
          readFileSync(path, 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((l) => (JSON.parse(l) as { decisionId: string }).decisionId);
        const first = await decide();
        await eventually(() => existsSync(logPath) && ids(logPath).includes(first));
        renameSync(logPath, `${logPath}.1`);
        p.child.kill('SIGHUP');
        await eventually(() => p.stderr().includes('reopening the decision log'));
        const second = await decide();
        await eventually(() => existsSync(logPath) && ids(logPath).includes(second));
        expect(ids(`${logPath}.1`)).toEqual([first]);
        expect(ids(logPath)).toEqual([second]);
        expect(p.child.exitCode).toBeNull();
      } finally {
        signalTree(p.child, 'SIGKILL');
      }
    },
    PROCESS_TEST_MS,
  );

  it(
    'on a fatal error logs it without secrets, flushes the log and exits 1; the queued lock-out is delivered by the next process',
    async () => {
      // A crash with a lock-out in flight: a preload module (the same process as main) throws from a
      // timer on SIGUSR2, an exception nothing catches.
      const preload = join(work, 'crash-on-sigusr2.mjs');
      writeFileSync(
        preload,
        "process.on('SIGUSR2', () => setImmediate(() => { throw new Error('boom: a bug nobody caught'); }));\n",
      );
      const logPath = join(work, 'crash-decisions.ndjson');
      const env: Record<string, string> = {
        ...vendorEnv(),
        ...generousDeadlines(),
        NODE_ENV: 'production',
        RISKGATE_DECISION_LOG: logPath,
      };
      const p = run(env, ['--import', preload]);
      const port = await listeningPort(p);
      const base = `http://127.0.0.1:${port}`;
      await eventually(async () => (await fetch(`${base}/readyz`)).status === 200, { what: 'ready' });
      const { mallory } = await lookUpUserIds(sandbox, ['mallory']);
      await control('POST', '/sandbox/stats/reset');
      await control('PUT', '/sandbox/faults', {
        rules: [{ route: 'PUT /srv/admin/v1/users/*', hang: true }],
      });
      let next: Started | undefined;
      try {
        const res = await fetch(`${base}/decide`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify(demoRequest('mallory', mallory)),
        });
        const body = (await res.json()) as {
          decisionId: string;
          verdict: string;
          actions: { status: string }[];
        };
        expect(body.verdict).toBe('deny');
        expect(body.actions).toEqual([expect.objectContaining({ type: 'lock_out_user', status: 'queued' })]);
        await sandboxSaw('PUT /srv/admin/v1/users/:id'); // the lock-out is in flight, hanging

        p.child.kill('SIGUSR2');
        expect(await p.exited).toBe(1);

        const fatal = p
          .stderr()
          .split('\n')
          .filter((l) => l.includes('"level":"fatal"'));
        expect(fatal).toHaveLength(1);
        expect(JSON.parse(fatal[0]!)).toMatchObject({
          msg: 'uncaughtException: exiting',
          error: 'Error: boom: a bug nobody caught',
        });
        for (const secret of [env.RISKGATE_CLIENT_SECRET!, env.RISKGATE_ADMIN_API_KEY!, KEY]) {
          expect(p.stderr()).not.toContain(secret);
        }
        const linesOf = () =>
          readFileSync(logPath, 'utf8')
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l) as Record<string, unknown>)
            .filter((l) => l.decisionId === body.decisionId);
        // The decision is recorded; the lock-out is not reported failed: it is still in the outbox.
        expect(linesOf().map((l) => l.kind)).toEqual(['decision']);

        // The next process on the same state delivers it.
        await control('DELETE', '/sandbox/faults');
        next = run(env);
        await listeningPort(next);
        await eventually(() => linesOf().some((l) => l.kind === 'action'));
        expect(linesOf()[1]).toMatchObject({
          kind: 'action',
          type: 'lock_out_user',
          target: mallory,
          status: 'done',
        });
        expect(await adminUserStatus(sandbox, mallory!)).toBe('locked_out');
      } finally {
        await control('DELETE', '/sandbox/faults');
        signalTree(p.child, 'SIGKILL');
        next?.child.kill('SIGKILL');
      }
    },
    PROCESS_TEST_MS,
  );
});

describe('the image layout: bin/riskgate.js beside dist/, no src/ and no tsx', () => {
  /** /app as the Dockerfile lays it out: package.json, bin/, dist/ (compiled), node_modules, policies/. */
  function imageLayout(): string {
    const app = mkdtempSync(join(tmpdir(), 'riskgate-image-'));
    copyFileSync(join(ROOT, 'package.json'), join(app, 'package.json'));
    mkdirSync(join(app, 'bin'));
    copyFileSync(join(ROOT, 'bin/riskgate.js'), join(app, 'bin/riskgate.js'));
    cpSync(build.dir, join(app, 'dist'), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(app, 'node_modules'));
    symlinkSync(join(ROOT, 'policies'), join(app, 'policies'));
    return app;
  }

  function cli(app: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
    const r = spawnSync(process.execPath, [join(app, 'bin/riskgate.js'), ...args], {
      cwd: app,
      env: { PATH: process.env.PATH ?? '' },
      encoding: 'utf8',
    });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  it('runs `riskgate policy check` from the compiled CLI, as an init container would', () => {
    const app = imageLayout();
    try {
      // Issues go to stdout (none here), the per-file summary to stderr.
      const check = cli(app, ['policy', 'check', 'policies']);
      expect(check.status, check.stderr).toBe(0);
      expect(check.stdout).toBe('');
      expect(check.stderr).toMatch(/^ok policies\/login\.yaml: login @ [0-9a-f]{16} \(reads /);
      const version = cli(app, ['--version']);
      expect(version.stdout.trim()).toBe(
        `riskgate ${(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version}`,
      );
      const broken = cli(app, ['policy', 'check', 'no-such-dir']);
      expect(broken.status).toBe(3);
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  });

  it('replays a log from the compiled CLI, and on replay threads loaded from dist/', () => {
    const app = imageLayout();
    try {
      const lines = readFileSync(join(ROOT, 'bench/fixtures/decision-lines.jsonl'), 'utf8')
        .trim()
        .split('\n');
      writeFileSync(join(app, 'decisions.jsonl'), `${[...lines, ...lines].join('\n')}\n`);
      // A log this small: the CLI replays it in process.
      const replay = cli(app, ['replay', '--json', '--policy', 'policies', 'decisions.jsonl']);
      expect(replay.status, replay.stderr).toBe(0);
      const { elapsedMs: _, ...onePass } = JSON.parse(replay.stdout) as Record<string, unknown>;
      expect(onePass.decisions).toBe(2 * lines.length);
      // The compiled module cutting it for three threads, each loading dist/replay/replay-thread.js.
      writeFileSync(
        join(app, 'threads.mjs'),
        `import { loadPolicy } from './dist/policy/policy-loader.js';
        import { replayDecisions } from './dist/replay/replay-run.js';
        const policy = await loadPolicy('policies');
        const options = { changedLimit: Infinity, policyPath: 'policies', threads: 3, minBytesPerThread: 1 };
        const { elapsedMs, ...report } = await replayDecisions(policy, ['decisions.jsonl'], options);
        process.stdout.write(JSON.stringify(report));`,
      );
      const threads = spawnSync(process.execPath, ['threads.mjs'], {
        cwd: app,
        env: { PATH: process.env.PATH ?? '' },
        encoding: 'utf8',
      });
      expect(threads.status, threads.stderr).toBe(0);
      expect(JSON.parse(threads.stdout)).toEqual(onePass);
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  });

  it('says in plain words which variable is malformed: an empty or odd RISKGATE_PORT stops the start', async () => {
    const empty = run({ ...vendorEnv(), RISKGATE_PORT: '' });
    expect(await empty.exited).toBe(1);
    expect(empty.stderr()).toBe(
      'riskgate: RISKGATE_PORT is set but empty: unset it for the default (8080), or give a whole number from 0 to 65535\n',
    );
    const odd = run({ ...vendorEnv(), RISKGATE_PORT: '80a' });
    expect(await odd.exited).toBe(1);
    expect(odd.stderr()).toBe('riskgate: RISKGATE_PORT must be a whole number from 0 to 65535, not "80a"\n');
  });
});

describe('RISKGATE_WORKERS=2: two processes on one port', () => {
  /** A POST on a connection of its own (no keep-alive), so the kernel hands it to either worker. */
  function postOnNewConnection(
    port: number,
    path: string,
    body: unknown,
    key = KEY,
  ): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path,
          method: 'POST',
          agent: false,
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            connection: 'close',
          },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => {
            text += c.toString();
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      // Never answered (left in an accept queue nobody serves): a failure, not a hung test.
      req.setTimeout(10_000, () => req.destroy(new Error('no answer within 10 s')));
      req.end(JSON.stringify(body));
    });
  }
  const decideOnNewConnection = (port: number, body: unknown) => postOnNewConnection(port, '/decide', body);

  it(
    'each worker accepts on its own sockets and sheds its own overload: with the primary stopped, a burst is answered 200 or 503, none left waiting',
    async () => {
      const p = run({
        ...vendorEnv(),
        RISKGATE_WORKERS: '2',
        RISKGATE_DECISION_LOG: 'off',
        RISKGATE_MAX_IN_FLIGHT: '2',
      });
      try {
        const port = await listeningPort(p);
        const { alice } = await lookUpUserIds(sandbox, ['alice']);
        // Slow signals keep the admitted decisions in flight while the burst arrives.
        await control('PUT', '/sandbox/faults', {
          rules: [{ route: 'GET /api/v1/signals/*', latency: { kind: 'fixed', ms: 300 } }],
        });
        // Through node:cluster's shared handle the primary accepts every connection: stopped, it
        // would leave the whole burst in its accept queue. The workers' own sockets do not need it.
        p.child.kill('SIGSTOP');
        let statuses: number[];
        try {
          statuses = (
            await Promise.all(
              Array.from({ length: 40 }, () => decideOnNewConnection(port, demoRequest('alice', alice))),
            )
          ).map((a) => a.status);
        } finally {
          p.child.kill('SIGCONT');
        }
        expect(statuses.filter((s) => s !== 200 && s !== 503)).toEqual([]);
        expect(statuses.filter((s) => s === 503).length).toBeGreaterThan(0);
        expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(2);
        // Both workers took part of the burst and shed their own share of it.
        const metrics = await (
          await fetch(`http://127.0.0.1:${port}/metrics`, {
            headers: { authorization: `Bearer ${PROCESS_OPS_KEY}` },
          })
        ).text();
        for (const worker of [1, 2]) {
          expect(metrics).toMatch(
            new RegExp(`^riskgate_decisions_shed_total\\{worker="${worker}",[^}]*\\} [1-9]`, 'm'),
          );
        }
        p.child.kill('SIGTERM');
        expect(await p.exited).toBe(0);
      } finally {
        await control('DELETE', '/sandbox/faults');
        signalTree(p.child, 'SIGKILL');
      }
    },
    PROCESS_TEST_MS,
  );

  it(
    'takes feedback on a decision whichever worker decided and whichever receives the label: every label of its own key is 202, another key gets 404, a relabel keeps the history',
    async () => {
      const other = 'process-test-other-caller-key-0456';
      const p = run({
        ...vendorEnv(),
        RISKGATE_WORKERS: '2',
        RISKGATE_API_KEYS: `${KEY},${other}`,
        // Every label below within one key's bucket, on either worker.
        RISKGATE_FEEDBACK_BURST: '1000',
      });
      try {
        const port = await listeningPort(p);
        const decided: string[] = [];
        for (let i = 0; i < 24; i++) {
          const r = await decideOnNewConnection(port, { accountId: `labelled-${i}`, ip: '198.51.100.7' });
          expect(r.status).toBe(200);
          decided.push((JSON.parse(r.text) as { decisionId: string }).decisionId);
        }
        // Each label on a fresh connection: about half reach the worker that did not decide. One at a
        // time: 24 at once past admission's floor on a busy loop (8 per worker) would be shed (503),
        // which is admission's test, not this one's.
        const labelled: { status: number }[] = [];
        for (const decisionId of decided)
          labelled.push(await postOnNewConnection(port, '/feedback', { decisionId, label: 'legit' }));
        expect(labelled.map((r) => r.status)).toEqual(decided.map(() => 202));
        // A label sent the moment the answer arrives, through either worker.
        for (let i = 0; i < 6; i++) {
          const r = await decideOnNewConnection(port, { accountId: `quick-${i}`, ip: '198.51.100.8' });
          const { decisionId } = JSON.parse(r.text) as { decisionId: string };
          expect((await postOnNewConnection(port, '/feedback', { decisionId, label: 'fraud' })).status).toBe(
            202,
          );
        }
        // Another caller key is told nothing of these decisions, on either worker.
        for (const decisionId of decided.slice(0, 6)) {
          const r = await postOnNewConnection(port, '/feedback', { decisionId, label: 'fraud' }, other);
          expect(r.status).toBe(404);
          expect(JSON.parse(r.text)).toMatchObject({ code: 'RG_ERR_NOT_FOUND' });
        }
        // A relabel, through whichever worker, carries the first label in its history.
        for (const decisionId of decided.slice(0, 6)) {
          const r = await postOnNewConnection(port, '/feedback', { decisionId, label: 'fraud' });
          expect(r.status).toBe(202);
          expect(
            (JSON.parse(r.text) as { history: { label: string }[] }).history.map((h) => h.label),
          ).toEqual(['legit', 'fraud']);
        }
        p.child.kill('SIGTERM');
        expect(await p.exited).toBe(0);
      } finally {
        signalTree(p.child, 'SIGKILL');
      }
    },
    PROCESS_TEST_MS,
  );

  it(
    'both workers answer, /metrics gathers both (labelled worker), they share the velocity counters, and SIGTERM drains them all',
    async () => {
      const p = run({ ...vendorEnv(), RISKGATE_WORKERS: '2', RISKGATE_DECISION_LOG: 'off' });
      try {
        const port = await listeningPort(p);
        const { alice } = await lookUpUserIds(sandbox, ['alice']);
        for (let i = 0; i < 24; i++) {
          expect((await decideOnNewConnection(port, demoRequest('alice', alice))).status).toBe(200);
        }
        const metrics = await (
          await fetch(`http://127.0.0.1:${port}/metrics`, {
            headers: { authorization: `Bearer ${PROCESS_OPS_KEY}` },
          })
        ).text();
        const served = (worker: number) =>
          [
            ...metrics.matchAll(
              new RegExp(`^riskgate_decisions_total\\{worker="${worker}",[^}]*\\} (\\d+)$`, 'gm'),
            ),
          ]
            .map((m) => Number(m[1]))
            .reduce((a, b) => a + b, 0);
        expect(served(1)).toBeGreaterThan(0);
        expect(served(2)).toBeGreaterThan(0);
        expect(served(1) + served(2)).toBe(24);
        expect(metrics.match(/^# TYPE riskgate_decisions_total counter$/gm)).toHaveLength(1);

        // The embedded velocity counters live in the primary: a burst spread over both workers is
        // counted whole, and either worker reads the whole count.
        const ip = '203.0.113.50';
        for (let i = 0; i < 20; i++) {
          expect((await decideOnNewConnection(port, { accountId: `burst-${i}`, ip })).status).toBe(200);
        }
        const accountsPerIp = async () =>
          (
            JSON.parse((await decideOnNewConnection(port, { accountId: 'burst-0', ip })).text) as {
              signals: { velocity: { result: { accountsPerIp: number } } };
            }
          ).signals.velocity.result.accountsPerIp;
        await expect.poll(accountsPerIp).toBe(20);
        // Both workers: several fresh connections, every one reads 20.
        for (let i = 0; i < 4; i++) expect(await accountsPerIp()).toBe(20);

        await control('PUT', '/sandbox/faults', {
          rules: [{ route: 'GET /api/v1/signals/*', latency: { kind: 'fixed', ms: 120 } }],
        });
        const inFlight = decideOnNewConnection(port, demoRequest('alice', alice));
        await callHeldBySandbox();
        p.child.kill('SIGTERM');
        expect((await inFlight).status).toBe(200);
        expect(await p.exited).toBe(0);
        expect(p.stderr()).toMatch(/"msg":"shutting down workers"/);
      } finally {
        await control('DELETE', '/sandbox/faults');
        signalTree(p.child, 'SIGKILL');
      }
    },
    PROCESS_TEST_MS,
  );
});
