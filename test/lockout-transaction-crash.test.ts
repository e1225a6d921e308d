import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stateFiles } from '../src/database/state-files.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { describeOnPostgres, oneRiskgateOn } from './support/postgres-server.ts';
import {
  buildDist,
  PROCESS_KEY,
  processEnv,
  type RiskgateProcess,
  ROOT,
  startProcess,
} from './support/riskgate-process.ts';
import { sandboxControl } from './support/sandbox-control.ts';
import { startTestSandbox } from './support/test-sandbox.ts';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.ts';

/**
 * Issue 30, "Done when": riskgate is SIGKILLed between the steps of a lock-out (its outbox entries
 * written, its record written, just before and just after the commit). The record, the lock-out's
 * outbox entry, its scheduled unlock and its `lockout.created` event's delivery exist all together
 * or not at all: before the commit none of them, after it every one. On the embedded SQLite file
 * and on a real PostgreSQL.
 */

const POLICY = `apiVersion: riskgate/v1
kind: Policy
name: lock-briefly
description: every login is denied and its account locked out for a minute
thresholds: { challenge: 40, deny: 80 }
defaults: { timeoutMs: 4000 }
rules:
  - { id: always, description: every login, when: 'true', verdict: deny }
actions:
  lockBriefly: { type: lock_out_user, duration: 60s }
verdictActions:
  deny: [lockBriefly]
`;

/**
 * Test code only, loaded with --import into the child (and so into its SQLite thread): SIGKILL at
 * a step of the lock-out's transaction, on the SQL the engine's driver is given (node:sqlite on
 * the thread; the pg client on the main thread).
 */
const KILL_AT_PRELOAD = `import { StatementSync } from 'node:sqlite';
const at = process.env.TEST_KILL_AT ?? '';
let entries = 0;
let record = false;
const kill = () => process.kill(process.pid, 'SIGKILL');
/** Before running \`sql\` (then after it, with \`after\`). */
const step = (sql, after) => {
  const s = sql.trim().toLowerCase();
  if (s.startsWith('insert into "outbox_entry"')) { if (after && ++entries === 1 && at === 'entry-written') kill(); }
  else if (s.startsWith('insert into "lockout"')) { if (after) { record = true; if (at === 'record-written') kill(); } }
  else if (s === 'commit' && record) { if (!after && at === 'before-commit') kill(); if (after && at === 'after-commit') kill(); }
};
for (const m of ['run', 'all']) {
  const original = StatementSync.prototype[m];
  StatementSync.prototype[m] = function (...a) { step(this.sourceSQL, false); const r = original.apply(this, a); step(this.sourceSQL, true); return r; };
}
if (process.env.TEST_PG_MODULE) {
  const { default: pg } = await import(process.env.TEST_PG_MODULE);
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (text, ...rest) {
    const sql = typeof text === 'string' ? text : '';
    step(sql, false);
    const r = query.call(this, text, ...rest);
    return r && typeof r.then === 'function' ? r.then((v) => { step(sql, true); return v; }) : r;
  };
}
`;

const KILL_POINTS = [
  { at: 'entry-written', committed: false },
  { at: 'record-written', committed: false },
  { at: 'before-commit', committed: false },
  { at: 'after-commit', committed: true },
];

let sandbox: RunningSandbox;
let build: ReturnType<typeof buildDist>;
let receiver: WebhookReceiver;
let work: string;
let preload: string;
let policyPath: string;
let alice: string;

beforeAll(async () => {
  build = buildDist('lockout-tx');
  sandbox = await startTestSandbox();
  receiver = await startWebhookReceiver();
  work = mkdtempSync(join(tmpdir(), 'riskgate-lockout-tx-'));
  preload = join(work, 'kill-at.mjs');
  writeFileSync(preload, KILL_AT_PRELOAD);
  policyPath = join(work, 'lock-briefly.yaml');
  writeFileSync(policyPath, POLICY);
  alice = (await lookUpUserIds(sandbox, ['alice'])).alice!;
}, 120_000);

afterAll(async () => {
  await sandbox?.stop();
  await receiver?.close();
  build?.remove();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

/** What the control state holds of lock-outs: records, and outbox entries by type. */
interface Held {
  records: string[];
  entries: { id: string; action_type: string }[];
}

/** Each record's three entries (lock, scheduled unlock, event delivery), and no entry without its record. */
function expectWhole(held: Held): void {
  const ids = (type: string) => held.entries.filter((e) => e.action_type === type).map((e) => e.id);
  const locks = ids('lock_out_user').map((id) => id.split(':')[0]);
  const unlocks = ids('unlock_user').map((id) => id.split(':')[0]);
  const events = ids('deliver_webhook').map((id) => id.split(':')[1]);
  for (const list of [locks, unlocks, events]) expect([...list].sort()).toEqual([...held.records].sort());
}

async function runKill(
  at: string,
  env: Record<string, string>,
  inspect: () => Promise<Held>,
): Promise<{ before: Held; after: Held }> {
  const before = await inspect();
  let p: RiskgateProcess | undefined;
  try {
    p = startProcess(build.main, { ...env, TEST_KILL_AT: at }, ['--import', preload]);
    const port = await p.port();
    await fetch(`http://127.0.0.1:${port}/decide`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PROCESS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(demoRequest('alice', alice)),
    }).catch(() => undefined); // killed before answering
    expect(await p.exited).toBeNull(); // the kill point was reached: SIGKILL, no exit code
  } finally {
    p?.kill();
    await p?.exited;
  }
  return { before, after: await inspect() };
}

function baseEnv(extra: Record<string, string>): Record<string, string> {
  return processEnv(sandbox, {
    RISKGATE_POLICY_PATH: policyPath,
    RISKGATE_DEADLINE_MS: '5000',
    RISKGATE_DECISION_LOG: 'off',
    RISKGATE_WEBHOOK_URLS: receiver.url(),
    RISKGATE_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
    ...extra,
  });
}

describe('SIGKILL between the steps of a lock-out, on SQLite', () => {
  it.each(KILL_POINTS)(
    'killed at $at: the record, the lock-out, its scheduled unlock and its event together or not at all',
    async ({ at, committed }) => {
      await sandboxReset();
      const state = mkdtempSync(join(work, 'state-'));
      const inspect = async (): Promise<Held> => {
        const db = new DatabaseSync(stateFiles(state).control);
        try {
          const has = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'lockout'").get() !== undefined;
          if (!has) return { records: [], entries: [] };
          return {
            records: (db.prepare('SELECT id FROM lockout').all() as { id: string }[]).map((r) => r.id),
            entries: db.prepare('SELECT id, action_type FROM outbox_entry').all() as Held['entries'],
          };
        } finally {
          db.close();
        }
      };
      const { after } = await runKill(at, baseEnv({ RISKGATE_STATE_DIR: state }), inspect);
      expectWhole(after);
      expect(after.records).toHaveLength(committed ? 1 : 0);
    },
    60_000,
  );
});

describeOnPostgres('SIGKILL between the steps of a lock-out, on PostgreSQL', (pg) => {
  it.each(KILL_POINTS)(
    'killed at $at: the record, the lock-out, its scheduled unlock and its event together or not at all',
    async ({ at, committed }) => {
      await sandboxReset();
      const { default: pgModule } = await import('pg');
      const inspect = async (): Promise<Held> => {
        const client = new pgModule.Client({ connectionString: pg.url });
        await client.connect();
        try {
          const has = (await client.query("SELECT to_regclass('lockout') IS NOT NULL AS has")).rows[0].has;
          if (has !== true) return { records: [], entries: [] };
          return {
            records: (await client.query('SELECT id FROM lockout')).rows.map((r) => r.id as string),
            entries: (await client.query('SELECT id, action_type FROM outbox_entry')).rows as Held['entries'],
          };
        } finally {
          await client.end();
        }
      };
      const env = baseEnv({
        ...oneRiskgateOn(pg.url),
        TEST_PG_MODULE: join(ROOT, 'node_modules/pg/lib/index.js'),
      });
      const { before, after } = await runKill(at, env, inspect);
      // Earlier kill points' rows are here too: the whole of it holds, and this one added its all or nothing.
      expectWhole(after);
      expect(after.records.length - before.records.length).toBe(committed ? 1 : 0);
    },
    60_000,
  );
});

async function sandboxReset(): Promise<void> {
  await sandboxControl(sandbox.url, 'POST', '/sandbox/reset');
}
