import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  rmSync,
  statSync,
  truncateSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/database/database.ts';
import { CONTROL_FILE, DECISIONS_FILE, LEGACY_FILE } from '../src/database/state-files.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { ListStore } from '../src/lists/list-store.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { type Harness, OPS_KEY, startHarness, writePolicy } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { LIST_POLICY } from './support/list-policy.ts';
import { describeOnPostgres, oneRiskgateOn } from './support/postgres-server.ts';
import { PROCESS_KEY, PROCESS_OPS_KEY, processEnv, ROOT, startProcess } from './support/riskgate-process.ts';
import { CAN_MOUNT, mountSmallDisk } from './support/small-disk.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * The fault matrix of issue 30 ("Done when"): what riskgate keeps on disk or in PostgreSQL is
 * deleted, damaged, filled up, refused or cut off at a crash or a stop, and in every cell:
 * `/decide` answers within its deadline with a verdict never more permissive than on a quiet day
 * (a login from a deny-listed range is denied or challenged, never allowed), riskgate restarts and
 * answers, and every record lost or set aside is in a metric and a log line.
 *
 * riskgate runs in this process (test/decide-harness.ts) on one sandbox; a restart is a new
 * riskgate on the same RISKGATE_STATE_DIR. Cells per engine:
 * - SQLite: the files deleted while running (and the restart after), the files damaged (random
 *   pages over the file and its WAL), a full disk (a 4 MiB tmpfs as the state dir, filled up: the
 *   test runs as root, as CI does; elsewhere the cell says why it skips), a stop while the
 *   decisions file is locked (SIGTERM's path: `stop()`), a SIGKILL mid-batch (a real process,
 *   `src/main.ts` under tsx: no dist build). What a SIGKILL loses cannot be counted by the process
 *   it killed: at most the records buffered (RISKGATE_DECISION_STORE_BUFFER, written every 100
 *   ms), all of them in the decision log already.
 * - PostgreSQL: a poison row (a U+0000 in a decision record: "invalid byte sequence ... 0x00"), a
 *   stop while the server is frozen. PostgreSQL has no files of riskgate's to delete or damage,
 *   and its full disk is the server's to report.
 */

const DEADLINE_MS = 1000;
const BLOCKED = '203.0.113.0/24';
const BLOCKED_IP = '203.0.113.9';
const OTHER_IP = '198.51.100.7';
const RANK = { allow: 0, challenge: 1, deny: 2 } as const;
type Verdict = keyof typeof RANK;

let sandbox: RunningSandbox;
beforeAll(async () => {
  sandbox = await startTestSandbox();
});
afterAll(() => sandbox?.stop());

const login = (ip: string) => ({ ...demoRequest('alice', undefined), ip });

function start(dir: string, extra: { env?: Record<string, string>; riskgate?: object } = {}) {
  return startHarness({
    policy: { yaml: LIST_POLICY },
    sharedSandbox: sandbox,
    withoutLogApi: true,
    deadlineMs: DEADLINE_MS,
    env: { RISKGATE_STATE_DIR: dir, ...extra.env },
    riskgate: {
      lists: { pollMs: 100, staleAfterMs: 1000 },
      decisionStore: { writeTimeoutMs: 2000, backoff: { initialMs: 50, maxMs: 500 } },
      ...extra.riskgate,
    },
  });
}

/** The blocked range's login and another's: each answered 200 within the deadline. */
async function verdicts(h: Harness): Promise<{ blocked: Verdict; other: Verdict }> {
  const [blocked, other] = await Promise.all([h.decide(login(BLOCKED_IP)), h.decide(login(OTHER_IP))]);
  for (const a of [blocked, other]) {
    expect(a.status).toBe(200);
    expect(a.body.elapsedMs as number).toBeLessThanOrEqual(DEADLINE_MS + 50);
  }
  return { blocked: blocked.body.verdict as Verdict, other: other.body.verdict as Verdict };
}

/** The quiet day's verdicts: the blocked range denied, the other allowed. */
const QUIET = { blocked: 'deny', other: 'allow' } as const;

async function neverMorePermissive(h: Harness): Promise<void> {
  const v = await verdicts(h);
  expect(RANK[v.blocked], `blocked range answered ${v.blocked}`).toBeGreaterThanOrEqual(RANK.challenge);
  expect(RANK[v.other]).toBeGreaterThanOrEqual(RANK[QUIET.other]);
}

function block(h: Harness): Promise<Response> {
  return fetch(`${h.url}/lists/blockedNetworks/entries`, {
    method: 'POST',
    headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ value: BLOCKED, reason: 'credential stuffing' }),
  });
}

async function health(h: Harness): Promise<{
  status: string;
  alarms?: string[];
  state?: {
    control: { available: boolean; reason?: string };
    decisions: { setAside: number; recreated: number };
  };
  decisionStore: {
    writing: boolean;
    pending: number;
    dropped: number;
    written: number;
    rejected: number;
    lastError?: string;
  };
}> {
  return (await fetch(`${h.url}/healthz`)).json() as never;
}

async function metric(h: Harness, name: string): Promise<number> {
  const text = await (await h.ops('/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  if (line === undefined) throw new Error(`no ${name} in /metrics`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

const logged = (h: Harness, words: string) =>
  h.serviceLog.find((l) => typeof l.msg === 'string' && l.msg.includes(words));

/** A quiet day on `dir`: the range blocked, denied, the other login allowed; some decisions kept. */
async function quietDay(dir: string, riskgate: object = {}): Promise<Harness> {
  const h = await start(dir, { riskgate });
  expect((await block(h)).status).toBe(201);
  expect(await verdicts(h)).toEqual(QUIET);
  await eventually(async () => (await health(h)).decisionStore.written >= 2, { what: 'decisions written' });
  return h;
}

/** Random bytes over `pages` 4 KiB pages of `path` from its start (the header included). */
function scribble(path: string, pages: number): void {
  if (!existsSync(path)) return;
  const fd = openSync(path, 'r+');
  try {
    for (let p = 0; p < pages; p++)
      writeSync(fd, crypto.getRandomValues(new Uint8Array(4096)), 0, 4096, p * 4096);
  } finally {
    closeSync(fd);
  }
}

describe('the embedded state (SQLite) through its faults', () => {
  it('a file deleted while running: noticed, alarmed, lists never empty, and the restart stays degraded', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-faults-'));
    let h = await quietDay(dir);
    for (const f of readdirSync(dir))
      if (f.startsWith(CONTROL_FILE) || f.startsWith(DECISIONS_FILE)) rmSync(join(dir, f));
    const alarmed = await eventually(
      async () => {
        const s = await health(h);
        return s.status === 'alarm' && s.state!.decisions.recreated >= 1 ? s : undefined;
      },
      { what: 'the deletion noticed' },
    );
    expect(alarmed.alarms![0]).toContain('the control file was deleted while running');
    expect(await metric(h, 'riskgate_control_state_unavailable')).toBe(1);
    expect(await metric(h, 'riskgate_decisions_file_recreated_total')).toBeGreaterThanOrEqual(1);
    expect(logged(h, 'control state unavailable')).toBeDefined();
    expect(logged(h, 'decisions file lost')).toBeDefined();
    // Operator writes to control state are refused, never made into a file nobody will read.
    expect((await block(h)).status).toBe(503);
    await neverMorePermissive(h);
    // Past the snapshot's bound the lists are unavailable: the degraded floor, never an allow.
    await eventually(async () => (await verdicts(h)).other === 'challenge', { what: 'lists unavailable' });
    await neverMorePermissive(h);
    await h.stop();

    // The restart: the control file is gone but the marker says there was one: degraded, not empty.
    h = await start(dir);
    const s = await health(h);
    expect(s.status).toBe('alarm');
    expect(s.alarms![0]).toContain('is missing, but this state dir had one');
    await neverMorePermissive(h);
    expect((await block(h)).status).toBe(503);
    await h.stop();
  }, 60_000);

  it('damaged files: the control file starts degraded, the decisions file is set aside and rebuilt', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-faults-'));
    let h = await quietDay(dir);
    await h.stop();
    for (const f of [CONTROL_FILE, DECISIONS_FILE]) {
      scribble(join(dir, f), 3);
      scribble(join(dir, `${f}-wal`), 3);
    }
    h = await start(dir);
    const s = await health(h);
    expect(s.status).toBe('alarm');
    expect(s.alarms![0]).toMatch(/control file (is damaged|cannot be opened)/);
    expect(s.state!.decisions.setAside).toBe(1);
    expect(readdirSync(dir).some((f) => f.startsWith(`${DECISIONS_FILE}.corrupt-`))).toBe(true);
    expect(logged(h, 'decisions file set aside')).toBeDefined();
    expect(await metric(h, 'riskgate_decisions_file_set_aside_total')).toBe(1);
    expect(await metric(h, 'riskgate_control_state_unavailable')).toBe(1);
    await neverMorePermissive(h);
    expect((await block(h)).status).toBe(503);
    // The fresh decisions file takes the new decisions.
    await eventually(async () => (await health(h)).decisionStore.written >= 2, {
      what: 'decisions written again',
    });
    await h.stop();
  }, 60_000);

  it('a control file’s -wal deleted while running: noticed and alarmed, lists never empty', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-faults-'));
    const h = await quietDay(dir);
    const wal = join(dir, `${CONTROL_FILE}-wal`);
    expect(existsSync(wal)).toBe(true);
    rmSync(wal);
    const alarmed = await eventually(
      async () => {
        const s = await health(h);
        return s.status === 'alarm' ? s : undefined;
      },
      { what: 'the -wal deletion noticed' },
    );
    expect(alarmed.alarms![0]).toContain('-wal was deleted while running');
    expect(await metric(h, 'riskgate_control_state_unavailable')).toBe(1);
    expect((await block(h)).status).toBe(503);
    await neverMorePermissive(h);
    await h.stop();
  }, 60_000);

  it('a control file emptied or replaced by a fresh database while stopped: degraded, never empty lists', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-faults-'));
    let h = await quietDay(dir);
    await h.stop();
    const control = join(dir, CONTROL_FILE);
    const replacements: [string, () => void][] = [
      ['emptied', () => truncateSync(control, 0)],
      [
        'replaced',
        () => {
          rmSync(control);
          const other = new DatabaseSync(control);
          other.exec('PRAGMA journal_mode=WAL; CREATE TABLE notes (body TEXT)');
          other.close();
        },
      ],
    ];
    for (const [what, replace] of replacements) {
      for (const suffix of ['-wal', '-shm']) rmSync(`${control}${suffix}`, { force: true });
      replace();
      h = await start(dir);
      const s = await health(h);
      expect(s.status, what).toBe('alarm');
      expect(s.alarms![0], what).toContain('holds no riskgate state (emptied or replaced)');
      expect(await metric(h, 'riskgate_control_state_unavailable')).toBe(1);
      // Never migrated into an empty control state: the file is left as found.
      expect(readdirSync(dir).filter((f) => f === CONTROL_FILE)).toHaveLength(1);
      await neverMorePermissive(h);
      expect((await block(h)).status).toBe(503);
      await h.stop();
    }
  }, 60_000);

  it('an existing riskgate.sqlite: its control state copied into control.sqlite, the old file renamed aside', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-faults-'));
    const legacy = await openDatabase(
      { kind: 'sqlite', path: join(dir, LEGACY_FILE) },
      { migrations: ALL_MIGRATIONS },
    );
    await new ListStore(legacy).add([
      {
        list: 'blockedNetworks',
        value: BLOCKED,
        kind: 'ip',
        author: 'ops',
        reason: 'credential stuffing',
        createdMs: Date.now(),
        expiresMs: null,
      },
    ]);
    await legacy.close();
    const h = await start(dir);
    expect(await verdicts(h)).toEqual(QUIET);
    expect((await health(h)).status).toBe('ok');
    expect(logged(h, 'control state copied from')).toMatchObject({ copied: { list_entry: 1 } });
    const files = readdirSync(dir);
    expect(files).toContain(CONTROL_FILE);
    expect(files).not.toContain(LEGACY_FILE);
    expect(files.some((f) => f.startsWith(`${LEGACY_FILE}.pre-split-`))).toBe(true);
    await h.stop();

    // The old file put back (a restored backup): not read again, and the start says so.
    const aside = files.find(
      (f) => f.startsWith(`${LEGACY_FILE}.pre-split-`) && !/-(wal|shm|journal)$/.test(f),
    )!;
    copyFileSync(join(dir, aside), join(dir, LEGACY_FILE));
    const again = await start(dir);
    expect((await health(again)).status).toBe('ok');
    expect(logged(again, `${LEGACY_FILE} is back beside`)).toMatchObject({ level: 'warn' });
    expect(await verdicts(again)).toEqual(QUIET);
    await again.stop();
  }, 60_000);

  it('two riskgates starting at once on a fresh state dir (the workers of one host) prepare it once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-faults-'));
    const [a, b] = await Promise.all([start(dir), start(dir)]);
    try {
      expect((await block(a)).status).toBe(201);
      await eventually(async () => (await verdicts(b)).blocked === 'deny', {
        what: 'the entry seen by the other',
      });
      for (const h of [a, b]) expect((await health(h)).status).toBe('ok');
      const files = readdirSync(dir);
      expect(files).toEqual(expect.arrayContaining([CONTROL_FILE, DECISIONS_FILE]));
      expect(files.filter((f) => /corrupt|upgrading|\.start\.lock/.test(f))).toEqual([]);
      for (const h of [a, b]) expect(h.serviceLog.filter((l) => l.level === 'error')).toEqual([]);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('files 0600 in a 0700 directory', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'riskgate-faults-')), 'state');
    const h = await quietDay(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const files = readdirSync(dir).filter((f) => f.includes('.sqlite'));
    expect(files).toEqual(expect.arrayContaining([CONTROL_FILE, `${CONTROL_FILE}-wal`, DECISIONS_FILE]));
    for (const f of files) expect(statSync(join(dir, f)).mode & 0o777, f).toBe(0o600);
    await h.stop();
  });

  it('a stop with the buffer full (the decisions file locked): what is not written is counted and logged', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-faults-'));
    // A short teardown: the store's flush gets what is left of it (a second or two), not its 5 s.
    const h = await quietDay(dir, { drainTimeoutMs: 500 });
    const lock = new DatabaseSync(join(dir, DECISIONS_FILE), { timeout: 0 });
    lock.exec('begin exclusive');
    try {
      for (let i = 0; i < 5; i++) await neverMorePermissive(h);
      await eventually(async () => (await health(h)).decisionStore.pending >= 10, {
        what: 'records waiting',
      });
      const { pending, dropped } = (await health(h)).decisionStore;
      await h.riskgate.stop();
      const line = logged(h, 'records not written by the stop deadline are dropped');
      expect(line).toMatchObject({ level: 'error', dropped: pending });
      expect(h.riskgate.decisions.status().dropped).toBe(dropped + pending);
    } finally {
      lock.exec('rollback');
      lock.close();
    }
    const again = await start(dir);
    expect(await verdicts(again)).toEqual(QUIET);
    await again.stop();
  }, 60_000);

  it('a SIGKILL mid-batch: the restart answers, the control state whole, the decisions file usable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-faults-kill-'));
    const env = processEnv(sandbox, {
      RISKGATE_STATE_DIR: dir,
      RISKGATE_POLICY_PATH: writePolicy(LIST_POLICY),
    });
    const run = async () => {
      const p = startProcess(join(ROOT, 'src/main.ts'), env, ['--import', 'tsx']);
      const url = `http://127.0.0.1:${await p.port()}`;
      const decide = async (ip: string) => {
        const res = await fetch(`${url}/decide`, {
          method: 'POST',
          headers: { authorization: `Bearer ${PROCESS_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify(login(ip)),
        });
        expect(res.status).toBe(200);
        return ((await res.json()) as { verdict: Verdict }).verdict;
      };
      return { p, url, decide };
    };
    const first = await run();
    try {
      const added = await fetch(`${first.url}/lists/blockedNetworks/entries`, {
        method: 'POST',
        headers: { authorization: `Bearer ${PROCESS_OPS_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ value: BLOCKED, reason: 'credential stuffing' }),
      });
      expect(added.status).toBe(201);
      // Killed while decisions are in flight and their records in a batch.
      const flight = Array.from({ length: 40 }, () => first.decide(OTHER_IP).catch(() => undefined));
      await Promise.race(flight);
      first.p.kill('SIGKILL');
      await Promise.all(flight);
      await first.p.exited;
    } finally {
      first.p.kill('SIGKILL');
    }
    // The restart (in this process: what it finds on disk is the same) answers as on a quiet day.
    const second = await start(dir);
    try {
      expect(await verdicts(second)).toEqual(QUIET);
      const s = await health(second);
      expect(s.status).toBe('ok');
      expect(s.state!.decisions.setAside).toBe(0);
    } finally {
      await second.stop();
    }
  }, 60_000);

  it.runIf(CAN_MOUNT)(
    'a full disk: the cause reported, decisions go on, nothing lost once space is back',
    async () => {
      const disk = mountSmallDisk('riskgate-faults-full-', '4m');
      let h: Harness | undefined;
      try {
        h = await quietDay(disk.dir);
        const filler = disk.fillUp();
        const hh = h;
        const failing = await eventually(
          async () => {
            await Promise.all(Array.from({ length: 10 }, () => neverMorePermissive(hh)));
            const s = (await health(hh)).decisionStore;
            return s.writing ? undefined : s;
          },
          { what: 'the store to fail on the full disk', timeoutMs: 20_000 },
        );
        expect(failing.lastError).toMatch(/full/i);
        expect(failing.lastError).not.toMatch(/no transaction is active/);
        // The latest of the streak: a write that first timed out on a starved machine is told again
        // once the cause is the full disk.
        expect(
          h.serviceLog.findLast(
            (l) => typeof l.msg === 'string' && l.msg.includes('decision store writes failing'),
          ),
        ).toMatchObject({ error: expect.stringMatching(/full/i) });
        expect([201, 503]).toContain((await block(h)).status);
        rmSync(filler);
        const caughtUp = await eventually(
          async () => {
            const s = (await health(hh)).decisionStore;
            return s.writing && s.pending === 0 ? s : undefined;
          },
          { what: 'the store catching up' },
        );
        expect(caughtUp.dropped).toBe(0);
        await neverMorePermissive(h);
      } finally {
        await h?.stop();
        disk.remove();
      }
    },
  );
});

describeOnPostgres('the state on PostgreSQL through its faults', (server) => {
  it('a poison row is set aside (metric, log line, decision_reject) and the rest of its batch written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-faults-pg-'));
    const h = await start(dir, { env: oneRiskgateOn(server.url) });
    try {
      expect((await block(h)).status).toBe(201);
      expect(await verdicts(h)).toEqual(QUIET);
      const record = h.lines.find((l) => l.kind === 'decision')!;
      const poisonId = crypto.randomUUID();
      // A record as the decision log has it, with a U+0000 PostgreSQL refuses in text.
      const request = { ...(record.request as object), accountId: 'ali\u0000ce' };
      h.riskgate.decisionLog.write({ ...record, decisionId: poisonId, request });
      await Promise.all([neverMorePermissive(h), neverMorePermissive(h)]);
      const s = await eventually(
        async () => {
          const d = (await health(h)).decisionStore;
          return d.rejected === 1 && d.pending === 0 ? d : undefined;
        },
        { what: 'the poison row set aside', timeoutMs: 5000 },
      );
      expect(s.writing).toBe(true);
      expect(await metric(h, 'riskgate_decision_store_rejected_total')).toBe(1);
      expect(logged(h, 'a record the database refused is set aside')).toMatchObject({
        decisionId: poisonId,
        kept: 'decision_reject',
        error: expect.stringContaining('0x00'),
      });
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      try {
        const rows = await client.query('select decision_id, error, record from decision_reject');
        expect(rows.rows).toHaveLength(1);
        expect(rows.rows[0].decision_id).toBe(poisonId);
        expect(JSON.parse(rows.rows[0].record).request.accountId).toBe('ali\u0000ce');
        // Every other decision is in the store.
        const ids = h.lines
          .filter((l) => l.kind === 'decision' && l.decisionId !== poisonId)
          .map((l) => l.decisionId as string);
        const stored = await client.query(
          'select count(*)::int as n from decision where decision_id = any($1)',
          [ids],
        );
        expect(stored.rows[0].n).toBe(ids.length);
      } finally {
        await client.end();
      }
    } finally {
      await h.stop();
    }
  }, 60_000);

  it('a stop while PostgreSQL is frozen: decisions answered, what is not written counted and logged, restart answers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-faults-pg-'));
    const h = await start(dir, {
      env: oneRiskgateOn(server.url),
      riskgate: {
        decisionStore: { writeTimeoutMs: 300, backoff: { initialMs: 50, maxMs: 300 } },
        drainTimeoutMs: 500,
      },
    });
    expect((await block(h)).status).toBe(201);
    server.pause();
    let stopped = false;
    try {
      for (let i = 0; i < 3; i++) await neverMorePermissive(h);
      const { pending } = await eventually(
        async () => {
          const d = (await health(h)).decisionStore;
          return d.pending >= 6 ? d : undefined;
        },
        { what: 'records waiting' },
      );
      await h.riskgate.stop();
      stopped = true;
      expect(logged(h, 'records not written by the stop deadline are dropped')).toMatchObject({
        dropped: pending,
      });
    } finally {
      server.resume();
      if (!stopped) await h.riskgate.stop();
    }
    const again = await start(dir, { env: oneRiskgateOn(server.url) });
    await neverMorePermissive(again);
    await again.stop();
  }, 60_000);
});
