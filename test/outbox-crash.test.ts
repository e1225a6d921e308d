import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';
import { LOCK_EVERYONE_POLICY, SANDBOX_USERS } from './support/lock-everyone-policy.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
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
 * Issue 14, "Done when": riskgate processes killed at chosen points while actions are queued, a
 * SIGTERM while the Admin API hangs, and two processes on one shared store. After the next
 * process, every action an answer promised is applied, none twice, and has its outcome line.
 */

const USERS = SANDBOX_USERS;
const PUT_USER = 'PUT /srv/admin/v1/users/:id';

let sandbox: RunningSandbox;
let build: ReturnType<typeof buildDist>;
let work: string;
let policyPath: string;
let preload: string;
/** RISKGATE_DEADLINE_MS of these processes: the deadline is not what they test. */
const GENEROUS_DEADLINE_MS = '5000';
let userIds: Record<string, string | undefined>;

/**
 * The kill points, on the SQL the database thread runs (kysely's, on node:sqlite): `append-committed`
 * a commit of a transaction that wrote outbox entries, `claimed` a claim that leased some,
 * `before-complete`/`after-complete` around a completion.
 */
const KILL_AT_PRELOAD = `import { StatementSync } from 'node:sqlite';
const [event, nth] = (process.env.TEST_KILL_AT ?? '').split(':');
let count = 0;
let appended = false;
const hit = (e) => { if (e === event && ++count === Number(nth)) process.kill(process.pid, 'SIGKILL'); };
const run = StatementSync.prototype.run;
StatementSync.prototype.run = function (...a) {
  const sql = this.sourceSQL;
  const r = run.apply(this, a);
  if (sql === 'commit' && appended) { appended = false; hit('append-committed'); }
  if (sql === 'rollback') appended = false;
  return r;
};
const all = StatementSync.prototype.all;
StatementSync.prototype.all = function (...a) {
  const sql = this.sourceSQL;
  if (sql.startsWith('insert into "outbox_entry"')) appended = true;
  const completing = sql.startsWith('update "outbox_entry" set "status"') && sql.includes('returning "id"');
  if (completing) hit('before-complete');
  const r = all.apply(this, a);
  if (completing && r.length > 0) hit('after-complete');
  if (sql.startsWith('UPDATE outbox_entry SET lease_owner') && r.length > 0) hit('claimed');
  return r;
};
`;

beforeAll(async () => {
  build = buildDist('outbox');
  sandbox = await startTestSandbox();
  work = mkdtempSync(join(tmpdir(), 'riskgate-outbox-'));
  policyPath = join(work, 'lock-everyone.yaml');
  // Reads and the deadline far above a busy machine's stalls: a decision that misses its Admin read
  // defers its lock-out (subject unverified) and promises nothing, which is not what these test.
  writeFileSync(
    policyPath,
    LOCK_EVERYONE_POLICY.replace('thresholds:', 'defaults: { timeoutMs: 4000 }\nthresholds:'),
  );
  // Test code only (loaded with --import into the child, and so into its database thread, which
  // runs the outbox's queries): SIGKILL at the n-th occurrence of an event of the outbox's table,
  // e.g. right after the durable write and before the answer.
  preload = join(work, 'kill-at.mjs');
  writeFileSync(preload, KILL_AT_PRELOAD);
  userIds = await lookUpUserIds(sandbox, [...USERS]);
}, 120_000);

afterAll(async () => {
  await sandbox?.stop();
  build?.remove();
});

const control = (method: string, path: string, body?: unknown) =>
  sandboxControl(sandbox.url, method, path, body);

async function putCounts(): Promise<Record<string, number>> {
  const stats = (await control('GET', '/sandbox/stats')) as {
    routes: Record<string, Record<string, number>>;
  };
  return stats.routes[PUT_USER] ?? {};
}

/** One /decide; the decision id when the answer promised a queued lock-out, else undefined. */
async function decide(port: number, user: string): Promise<string | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/decide`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PROCESS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(demoRequest(user, userIds[user])),
    });
    const body = (await res.json()) as { decisionId: string; actions?: { type: string; status: string }[] };
    const queued = body.actions?.some((a) => a.type === 'lock_out_user' && a.status === 'queued');
    return res.status === 200 && queued ? body.decisionId : undefined;
  } catch {
    return undefined; // the process died before answering: nothing was promised
  }
}

async function outboxAt(
  port: number,
): Promise<{ pending: number; actions: { id: string; status: string }[] }> {
  const res = await fetch(`http://127.0.0.1:${port}/actions?limit=1000`, {
    headers: { authorization: `Bearer ${PROCESS_OPS_KEY}` },
  });
  return (await res.json()) as { pending: number; actions: { id: string; status: string }[] };
}

function actionLines(...paths: string[]): { key: string; decisionId: string; status: string }[] {
  return paths.flatMap((p) => {
    let text = '';
    try {
      text = readFileSync(p, 'utf8');
    } catch {
      return [];
    }
    // A process killed mid-write leaves its last line torn: only whole (newline-ended) lines count.
    return text
      .split('\n')
      .slice(0, -1)
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { kind: string; key: string; decisionId: string; status: string })
      .filter((l) => l.kind === 'action');
  });
}

async function stop(p: RiskgateProcess | undefined): Promise<void> {
  if (p === undefined) return;
  p.kill('SIGKILL');
  await p.exited;
}

/** Sends one login per user, two at a time; the promised lock-outs by decision id. */
async function loginEveryone(port: number): Promise<string[]> {
  const promised: string[] = [];
  for (let i = 0; i < USERS.length; i += 2) {
    const ids = await Promise.all(USERS.slice(i, i + 2).map((u) => decide(port, u)));
    for (const id of ids) if (id !== undefined) promised.push(id);
  }
  return promised;
}

const KILL_POINTS = [
  ...[1, 2, 3, 4, 5, 6].map((n) => `append-committed:${n}`),
  ...[1, 2, 3, 4].map((n) => `claimed:${n}`),
  ...[1, 2, 3, 4].map((n) => `before-complete:${n}`),
  ...[1, 2, 3].map((n) => `after-complete:${n}`),
  ...[40, 120, 250, 400].map((ms) => `after-ms:${ms}`),
];

describe('SIGKILL at any point while actions are queued', () => {
  it.each(KILL_POINTS)(
    'killed at %s: the next process applies every promised lock-out, none twice, each with one outcome line',
    async (killAt) => {
      await control('POST', '/sandbox/reset');
      await control('POST', '/sandbox/stats/reset');
      // A little Admin latency keeps deliveries in flight while decisions are answered.
      await control('PUT', '/sandbox/faults', {
        rules: [{ route: 'PUT /srv/admin/v1/users/*', latency: { kind: 'fixed', ms: 30 } }],
      });
      const state = mkdtempSync(join(work, 'state-'));
      const [log1, log2] = [join(state, 'p1.jsonl'), join(state, 'p2.jsonl')];
      const env = processEnv(sandbox, {
        RISKGATE_STATE_DIR: state,
        RISKGATE_POLICY_PATH: policyPath,
        RISKGATE_DEADLINE_MS: GENEROUS_DEADLINE_MS,
        RISKGATE_DECISION_LOG: log1,
      });
      let p1: RiskgateProcess | undefined;
      let p2: RiskgateProcess | undefined;
      try {
        const timed = killAt.startsWith('after-ms:');
        p1 = startProcess(build.main, { ...env, TEST_KILL_AT: timed ? '' : killAt }, ['--import', preload]);
        const port1 = await p1.port();
        const victim = p1;
        const timer = timed ? setTimeout(() => victim.kill(), Number(killAt.split(':')[1])) : undefined;
        const promised = await loginEveryone(port1);
        // Let deliveries reach the kill point: the process dies there, or (a point never reached)
        // delivers everything and is killed at the end.
        let died = false;
        void victim.exited.then(() => {
          died = true;
        });
        await eventually(
          async () =>
            died ||
            (await outboxAt(port1).then(
              (o) => o.pending === 0,
              () => false,
            )),
          { timeoutMs: 20_000, what: 'the kill point or every delivery' },
        );
        clearTimeout(timer);
        await stop(p1);

        await control('DELETE', '/sandbox/faults');
        p2 = startProcess(build.main, { ...env, RISKGATE_DECISION_LOG: log2 });
        const port2 = await p2.port();
        await eventually(async () => (await outboxAt(port2)).pending === 0);
        const outbox = await outboxAt(port2);
        const delivered = outbox.actions.filter((a) => a.status === 'delivered').map((a) => a.id);
        // Every outcome line told (the dead process's untold ones by the next), before counting.
        await eventually(
          async () => new Set(actionLines(log1, log2).map((l) => l.key)).size >= delivered.length,
        );
        await stop(p2);

        expect(outbox.actions.every((a) => a.status === 'delivered')).toBe(true);
        const promisedIds = new Set(promised);
        const deliveredDecisions = new Set(delivered.map((id) => id.split(':')[0]));
        for (const id of promisedIds)
          expect(deliveredDecisions.has(id), `promised ${id} delivered`).toBe(true);
        // Applied once: one 200 per user locked (a retry after an unknown outcome answers 304).
        expect((await putCounts())['200'] ?? 0).toBe(delivered.length);
        for (const id of delivered) {
          const user = id.split(':')[2]!;
          expect(await adminUserStatus(sandbox, user)).toBe('locked_out');
        }
        // An outcome line per action, `done`: at least once. A second line of the same `key` only
        // when the process died between writing a line and confirming it in the store.
        const lines = actionLines(log1, log2);
        expect([...new Set(lines.map((l) => l.key))].sort(), JSON.stringify(lines)).toEqual(
          [...delivered].sort(),
        );
        expect(lines.every((l) => l.status === 'done')).toBe(true);
        const perKey = new Map<string, number>();
        for (const l of lines) perKey.set(l.key, (perKey.get(l.key) ?? 0) + 1);
        expect(Math.max(...perKey.values())).toBeLessThanOrEqual(2);
      } finally {
        await stop(p1);
        await stop(p2);
        await control('DELETE', '/sandbox/faults');
      }
    },
    60_000,
  );
});

describe('SIGTERM while the Admin API hangs', () => {
  it('leaves the undelivered actions in the outbox (no "failed: shutdown"), and the next process delivers them', async () => {
    await control('POST', '/sandbox/reset');
    await control('POST', '/sandbox/stats/reset');
    await control('PUT', '/sandbox/faults', { rules: [{ route: 'PUT /srv/admin/v1/users/*', hang: true }] });
    const state = mkdtempSync(join(work, 'state-'));
    const [log1, log2] = [join(state, 'p1.jsonl'), join(state, 'p2.jsonl')];
    const env = processEnv(sandbox, {
      RISKGATE_STATE_DIR: state,
      RISKGATE_POLICY_PATH: policyPath,
      RISKGATE_DEADLINE_MS: GENEROUS_DEADLINE_MS,
      RISKGATE_DECISION_LOG: log1,
    });
    let p1: RiskgateProcess | undefined;
    let p2: RiskgateProcess | undefined;
    try {
      p1 = startProcess(build.main, env);
      const promised = await loginEveryone(await p1.port());
      expect(promised).toHaveLength(USERS.length);
      // The lock-outs are in flight, hanging at the Admin API (the sandbox counts a hang as status 0).
      await eventually(async () => ((await putCounts())['0'] ?? 0) > 0);
      p1.kill('SIGTERM');
      expect(await p1.exited).toBe(0);
      expect(actionLines(log1)).toEqual([]);

      await control('DELETE', '/sandbox/faults');
      p2 = startProcess(build.main, { ...env, RISKGATE_DECISION_LOG: log2 });
      const port2 = await p2.port();
      await eventually(async () => (await outboxAt(port2)).pending === 0);
      await eventually(async () => actionLines(log2).length >= USERS.length);
      const lines = actionLines(log2);
      expect(new Set(lines.map((l) => l.decisionId))).toEqual(new Set(promised));
      expect(lines.every((l) => l.status === 'done')).toBe(true);
      for (const user of USERS) expect(await adminUserStatus(sandbox, userIds[user]!)).toBe('locked_out');
    } finally {
      await stop(p1);
      await stop(p2);
      await control('DELETE', '/sandbox/faults');
    }
  }, 60_000);
});

describeOnPostgres('two riskgate processes on one PostgreSQL outbox', (pg) => {
  it('deliver each action once between them', async () => {
    await control('POST', '/sandbox/reset');
    await control('POST', '/sandbox/stats/reset');
    await control('PUT', '/sandbox/faults', {
      rules: [{ route: 'PUT /srv/admin/v1/users/*', latency: { kind: 'fixed', ms: 20 } }],
    });
    const logs = [join(work, `pg-a-${Date.now()}.jsonl`), join(work, `pg-b-${Date.now()}.jsonl`)];
    const started = logs.map((log) =>
      startProcess(
        build.main,
        processEnv(sandbox, {
          RISKGATE_STATE_DIR: mkdtempSync(join(work, 'state-')),
          RISKGATE_POLICY_PATH: policyPath,
          RISKGATE_DEADLINE_MS: GENEROUS_DEADLINE_MS,
          RISKGATE_DECISION_LOG: log,
          RISKGATE_DATABASE: pg.url,
          // The outbox alone is what this checks: counters stay in each process.
          RISKGATE_FEATURE_STORE: 'memory',
        }),
      ),
    );
    try {
      const ports = await Promise.all(started.map((p) => p.port()));
      // Every user logs in twice, once on each process: 12 lock-outs, 6 of them repeats (304).
      const promised = (await Promise.all(USERS.flatMap((u) => ports.map((port) => decide(port, u))))).filter(
        (id) => id !== undefined,
      );
      expect(promised).toHaveLength(USERS.length * 2);
      await eventually(async () => (await outboxAt(ports[0]!)).pending === 0);
      await eventually(async () => actionLines(...logs).length >= promised.length);
      const lines = actionLines(...logs);
      expect(lines.map((l) => l.decisionId).sort()).toEqual([...promised].sort());
      expect(lines.every((l) => l.status === 'done')).toBe(true);
      const counts = await putCounts();
      // Each action was attempted exactly once, by one of the two: 6 applied, 6 already so.
      expect(counts['200']).toBe(USERS.length);
      expect(counts['304']).toBe(USERS.length);
      expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(USERS.length * 2);
      // (Which of the two delivered what depends on timing; that neither delivered twice is the point.)
    } finally {
      for (const p of started) await stop(p);
      await control('DELETE', '/sandbox/faults');
    }
  }, 60_000);
});
