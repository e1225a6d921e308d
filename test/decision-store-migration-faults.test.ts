import { closeSync, existsSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { type FeatureMigrations, MIGRATION_TABLE } from '../src/database/database.ts';
import { databaseComponent } from '../src/database/database-component.ts';
import type { StateDatabases, StateTarget } from '../src/database/state-databases.ts';
import { CONTROL_FILE, DECISIONS_FILE, DECISIONS_PAGE_SIZE } from '../src/database/state-files.ts';
import { writeOps } from '../src/decision-store/decision-batch.ts';
import { createDecisionReader } from '../src/decision-store/decision-reader.ts';
import { storeOpOf } from '../src/decision-store/decision-rows.ts';
import type { DecisionTables } from '../src/decision-store/decision-tables.ts';
import { HOUR_MS, hourDriftCheck } from '../src/decision-store/hour-counts.ts';
import { CONTROL_MIGRATIONS, DECISION_MIGRATIONS } from '../src/service/database-migrations.ts';
import { eventually } from './support/eventually.ts';
import { describeOnPostgres } from './support/postgres-server.ts';

/**
 * The decision store's migrations 007 (SQLite: the hour counts move from row triggers to the
 * writer) and 008 (two unread indexes dropped) meet the files riskgate finds: a file an earlier
 * version left with 007 run and 008 not, a re-run of both (their records gone, 008 stopped after
 * its first drop), a file damaged where 008 works, and one damaged after both. The store's word
 * (observation): it never blocks a start; a damaged file is set aside, counted
 * (riskgate_decisions_file_set_aside_total) and logged, and a fresh one takes the decisions. On
 * PostgreSQL (no file to damage) the half-migrated database and the re-run.
 */

const MIGRATION_007 = 'decisions-007-sqlite-hour-counts-by-writer';
const MIGRATION_008 = 'decisions-008-unread-indexes';
const UNREAD_INDEXES = ['decision_label_decision', 'decision_rule_rule_at'];
const INSERT_TRIGGERS = ['decision_hour_insert', 'decision_rule_hour_insert'];
const T0 = Date.parse('2026-03-01T00:00:00Z');
const VERDICTS = ['allow', 'challenge', 'deny'] as const;

const without = (...names: string[]): FeatureMigrations =>
  Object.fromEntries(Object.entries(DECISION_MIGRATIONS).filter(([name]) => !names.includes(name)));

/** When decision `n` was made: 13 minutes after `n - 1` (a few hours' worth). */
const atOf = (n: number) => T0 + n * 13 * 60_000;

/** Decision `n`: every verdict, a rule on some. */
const record = (n: number) => ({
  kind: 'decision',
  decisionId: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
  at: new Date(atOf(n)).toISOString(),
  request: { accountId: `acct-${n % 5}` },
  policy: { name: 'login', revision: 'rev-a' },
  outcome: {
    verdict: VERDICTS[n % 3],
    score: n,
    matchedRules: n % 2 === 0 ? [{ id: 'new-browser' }] : [],
  },
});

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

interface Started {
  state: StateDatabases;
  logs: Record<string, unknown>[];
  metric(name: string): number;
  stop(): Promise<void>;
}

/** The state as riskgate starts it (the database component), its log lines and metrics kept. */
async function start(target: StateTarget, decisionMigrations = DECISION_MIGRATIONS): Promise<Started> {
  const logs: Record<string, unknown>[] = [];
  const component = databaseComponent({
    target,
    controlMigrations: CONTROL_MIGRATIONS,
    decisionMigrations,
    log: (line) => logs.push(line),
  });
  const started = await component.start();
  const reads = new Map<string, () => number>();
  started.observe?.({
    observeGauge: (name, _d, read) => reads.set(name, read),
    observeCounter: (name, _d, read) => reads.set(`${name}_total`, read),
  });
  return {
    state: started.handle,
    logs,
    metric: (name) => reads.get(name)!(),
    stop: async () => {
      await started.stop?.(Date.now() + 5000, 'graceful');
    },
  };
}

const decisionDb = (s: Started) => s.state.decisions.db.withTables<DecisionTables>();

async function write(s: Started, ns: number[]): Promise<void> {
  await writeOps(
    decisionDb(s),
    ns.map((n) => storeOpOf(record(n), 0)!),
  );
}

/** The store's counts (the hour tables, whole hours), the rows' count, and each hour's drift. */
async function counts(s: Started, ns: number[]) {
  const db = decisionDb(s);
  const reader = createDecisionReader(db, () => ({}) as never);
  const drift = hourDriftCheck({ db, maxAgeMs: 0, log: () => {}, everyMs: 3_600_000 });
  drift.stop();
  const hours = [...new Set(ns.map((n) => Math.floor(atOf(n) / HOUR_MS) * HOUR_MS))];
  const { rows } = await sql<{ n: number }>`select count(*) as n from decision`.execute(db);
  return {
    stored: (await reader.countByVerdict({})).total,
    rows: Number(rows[0]!.n),
    drift: (await Promise.all(hours.map((h) => drift.check(h)))).reduce((a, b) => a + b, 0),
  };
}

/** The names of the schema's `type` objects among `names`, read through the store's handle. */
async function present(s: Started, type: 'index' | 'trigger', names: string[]): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`select name from sqlite_master where type = ${type}`.execute(
    s.state.decisions.db,
  );
  return rows
    .map((r) => r.name)
    .filter((n) => names.includes(n))
    .sort();
}

async function migrationsRecorded(s: Started): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`select name from ${sql.table(MIGRATION_TABLE)}`.execute(
    s.state.decisions.db,
  );
  return rows.map((r) => r.name).filter((n) => n === MIGRATION_007 || n === MIGRATION_008);
}

/** 0xff over page `page` (1-based) of `file`: no B-tree page has that flag byte. */
function damagePage(file: string, page: number): void {
  const db = new DatabaseSync(file);
  const size = Number((db.prepare('pragma page_size').get() as { page_size: number }).page_size);
  db.close();
  const fd = openSync(file, 'r+');
  try {
    writeSync(fd, Buffer.alloc(size, 0xff), 0, size, (page - 1) * size);
  } finally {
    closeSync(fd);
  }
}

/** The root page of `name` in the (closed, checkpointed) SQLite `file`. */
function rootPage(file: string, name: string): number {
  const db = new DatabaseSync(file);
  try {
    db.exec('pragma wal_checkpoint(truncate)');
    return Number(
      (db.prepare('select rootpage from sqlite_master where name = ?').get(name) as { rootpage: number })
        .rootpage,
    );
  } finally {
    db.close();
  }
}

/** The damaged file kept beside the fresh one, under the name its log line gives. */
function expectKeptAside(s: Started): void {
  const aside = s.state.status().decisions.lastSetAsideAs;
  expect(aside).toMatch(new RegExp(`${DECISIONS_FILE}\\.corrupt-`));
  expect(existsSync(aside!)).toBe(true);
  expect(setAsideLine(s)?.setAsideAs).toBe(aside);
}

const setAsideLine = (s: Started) =>
  s.logs.find((l) => typeof l.msg === 'string' && l.msg.startsWith('decisions file set aside'));

describe('the decisions file across migrations 007 and 008 (SQLite)', () => {
  const dirs: string[] = [];
  const stateDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-decision-migrations-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('a file 007 left (008 not run) starts: 008 drops the unread indexes, rows and hour counts kept, nothing set aside', async () => {
    const dir = stateDir();
    const earlier = await start({ kind: 'sqlite', dir }, without(MIGRATION_008));
    await write(earlier, range(0, 40));
    expect(await present(earlier, 'index', UNREAD_INDEXES)).toEqual(UNREAD_INDEXES);
    expect(await migrationsRecorded(earlier)).toEqual([MIGRATION_007]);
    await earlier.stop();

    const s = await start({ kind: 'sqlite', dir });
    try {
      expect(s.state.status().decisions).toMatchObject({ setAside: 0, recreated: 0 });
      expect(s.metric('riskgate_decisions_file_set_aside_total')).toBe(0);
      expect(await present(s, 'index', UNREAD_INDEXES)).toEqual([]);
      expect(await present(s, 'trigger', INSERT_TRIGGERS)).toEqual([]);
      expect((await migrationsRecorded(s)).sort()).toEqual([MIGRATION_007, MIGRATION_008]);
      expect(await counts(s, range(0, 40))).toEqual({ stored: 40, rows: 40, drift: 0 });
      // The writer goes on counting on the migrated file.
      await write(s, range(40, 60));
      expect(await counts(s, range(0, 60))).toEqual({ stored: 60, rows: 60, drift: 0 });
      expect(s.logs.filter((l) => l.level === 'error')).toEqual([]);
    } finally {
      await s.stop();
    }
  });

  it('a re-run of 007 and 008 (unrecorded; 008 stopped after its first drop) starts with the same schema and rows', async () => {
    const dir = stateDir();
    const first = await start({ kind: 'sqlite', dir });
    await write(first, range(0, 30));
    const schemaOf = async (s: Started) =>
      (
        await sql<{
          type: string;
          name: string;
          sql: string | null;
        }>`select type, name, sql from sqlite_master
          where name not like 'sqlite_%' order by type, name`.execute(s.state.decisions.db)
      ).rows;
    const schema = await schemaOf(first);
    await first.stop();

    // Their records gone, and one of 008's indexes back: 008 as if stopped after its first drop.
    const file = new DatabaseSync(join(dir, DECISIONS_FILE));
    file.prepare(`delete from ${MIGRATION_TABLE} where name in (?, ?)`).run(MIGRATION_007, MIGRATION_008);
    file.exec('create index decision_label_decision on decision_label (decision_id)');
    file.close();

    const s = await start({ kind: 'sqlite', dir });
    try {
      expect(s.state.status().decisions).toMatchObject({ setAside: 0, recreated: 0 });
      expect(await schemaOf(s)).toEqual(schema);
      expect((await migrationsRecorded(s)).sort()).toEqual([MIGRATION_007, MIGRATION_008]);
      expect(await counts(s, range(0, 30))).toEqual({ stored: 30, rows: 30, drift: 0 });
    } finally {
      await s.stop();
    }
  });

  it('a file damaged where 008 works (an index it drops) is set aside at start, counted and logged; the fresh file is whole', async () => {
    const dir = stateDir();
    const earlier = await start({ kind: 'sqlite', dir }, without(MIGRATION_008));
    await write(earlier, range(0, 40));
    await earlier.stop();
    const path = join(dir, DECISIONS_FILE);
    damagePage(path, rootPage(path, 'decision_rule_rule_at'));

    const s = await start({ kind: 'sqlite', dir });
    try {
      expect(s.state.status().decisions).toMatchObject({ setAside: 1, recreated: 1 });
      expect(s.metric('riskgate_decisions_file_set_aside_total')).toBe(1);
      expect(s.metric('riskgate_decisions_file_recreated_total')).toBe(1);
      expect(setAsideLine(s)).toMatchObject({
        level: 'error',
        reason: expect.stringMatching(/malformed/),
      });
      expectKeptAside(s);
      // The fresh file: every migration, 008's state, no decision of the old file.
      expect((await migrationsRecorded(s)).sort()).toEqual([MIGRATION_007, MIGRATION_008]);
      expect(await present(s, 'index', UNREAD_INDEXES)).toEqual([]);
      expect(await present(s, 'trigger', INSERT_TRIGGERS)).toEqual([]);
      await write(s, range(40, 50));
      expect(await counts(s, range(40, 50))).toEqual({ stored: 10, rows: 10, drift: 0 });
    } finally {
      await s.stop();
    }
  });

  it('a file damaged after both (the hour counts 007 hands the writer) starts; the read meeting the damage sets it aside', async () => {
    const dir = stateDir();
    const first = await start({ kind: 'sqlite', dir });
    await write(first, range(0, 40));
    await first.stop();
    const path = join(dir, DECISIONS_FILE);
    damagePage(path, rootPage(path, 'decision_hour'));

    // Nothing to migrate, and no check of the decisions file at start: it opens.
    const s = await start({ kind: 'sqlite', dir });
    try {
      expect(s.state.status().decisions).toMatchObject({ setAside: 0, recreated: 0 });
      // The console's count reads the hour table: it fails, and the file is set aside.
      await expect(counts(s, range(0, 40))).rejects.toThrow(/malformed/);
      await eventually(
        async () => (s.state.status().decisions.recreated === 1 && setAsideLine(s) ? true : undefined),
        { what: 'the damaged decisions file set aside' },
      );
      expect(s.metric('riskgate_decisions_file_set_aside_total')).toBe(1);
      expect(setAsideLine(s)).toMatchObject({ level: 'error', reason: expect.stringMatching(/malformed/) });
      expectKeptAside(s);
      // Reads and writes go on, on the fresh file, migrated whole.
      await eventually(
        async () => ((await counts(s, []).catch(() => undefined))?.rows === 0 ? true : undefined),
        { what: 'the fresh decisions file readable' },
      );
      expect((await migrationsRecorded(s)).sort()).toEqual([MIGRATION_007, MIGRATION_008]);
      await write(s, range(40, 50));
      expect(await counts(s, range(40, 50))).toEqual({ stored: 10, rows: 10, drift: 0 });
    } finally {
      await s.stop();
    }
  });
});

describe("the decisions file's page size (SQLite)", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const fresh = () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-decision-pages-'));
    dirs.push(dir);
    return dir;
  };
  const pageSize = (file: string) => {
    const db = new DatabaseSync(file);
    try {
      return Number((db.prepare('pragma page_size').get() as { page_size: number }).page_size);
    } finally {
      db.close();
    }
  };
  /** Overflow pages of the `decision` table (SQLite's dbstat), through the store's handle. */
  const overflowPages = async (s: Started) =>
    Number(
      (
        await sql<{ n: number }>`select count(*) as n from dbstat
          where name = 'decision' and pagetype = 'overflow'`.execute(s.state.decisions.db)
      ).rows[0]!.n,
    );
  /** A decision whose logged line is about 5 KB, as the bench's are (signals' answers in it). */
  const wide = (n: number) => ({
    ...record(n),
    inputs: { signals: { evidence: 'e'.repeat(4800) } },
  });

  it('a fresh decisions file gets 16 KiB pages: a 5 KB line shares a leaf, no overflow page; the control file keeps 4 KiB', async () => {
    const dir = fresh();
    const s = await start({ kind: 'sqlite', dir });
    try {
      await writeOps(
        decisionDb(s),
        range(0, 30).map((n) => storeOpOf(wide(n), 0)!),
      );
      expect(await overflowPages(s)).toBe(0);
      expect(await counts(s, range(0, 30))).toEqual({ stored: 30, rows: 30, drift: 0 });
    } finally {
      await s.stop();
    }
    expect(pageSize(join(dir, DECISIONS_FILE))).toBe(DECISIONS_PAGE_SIZE);
    expect(DECISIONS_PAGE_SIZE).toBe(16_384);
    expect(pageSize(join(dir, CONTROL_FILE))).toBe(4096);
  });

  it('a decisions file made with 4 KiB pages keeps them, its rows and its writes; nothing set aside', async () => {
    const dir = fresh();
    const first = await start({ kind: 'sqlite', dir });
    await write(first, range(0, 20));
    await first.stop();
    // As an earlier riskgate made it: SQLite's default page size (changed only outside WAL, by VACUUM).
    const file = new DatabaseSync(join(dir, DECISIONS_FILE));
    file.exec('pragma journal_mode = delete; pragma page_size = 4096; vacuum; pragma journal_mode = wal');
    file.close();
    expect(pageSize(join(dir, DECISIONS_FILE))).toBe(4096);

    const s = await start({ kind: 'sqlite', dir });
    try {
      expect(s.state.status().decisions).toMatchObject({ setAside: 0, recreated: 0 });
      await write(s, range(20, 40));
      expect(await counts(s, range(0, 40))).toEqual({ stored: 40, rows: 40, drift: 0 });
    } finally {
      await s.stop();
    }
    expect(pageSize(join(dir, DECISIONS_FILE))).toBe(4096);
  });
});

describeOnPostgres('the decision store across migrations 007 and 008 (PostgreSQL)', (pg) => {
  const indexes = async (s: Started) =>
    (
      await sql<{
        indexname: string;
      }>`select indexname from pg_indexes where schemaname = current_schema()`.execute(s.state.decisions.db)
    ).rows
      .map((r) => r.indexname)
      .filter((n) => UNREAD_INDEXES.includes(n))
      .sort();

  it('a database 007 left (008 not run) starts and drops the unread indexes; a re-run changes nothing', async () => {
    const target: StateTarget = { kind: 'postgres', url: pg.url };
    const earlier = await start(target, without(MIGRATION_008));
    await write(earlier, range(0, 40));
    expect(await indexes(earlier)).toEqual(UNREAD_INDEXES);
    await earlier.stop();

    let s = await start(target);
    expect(await indexes(s)).toEqual([]);
    expect(await counts(s, range(0, 40))).toEqual({ stored: 40, rows: 40, drift: 0 });
    // A re-run: both unrecorded, one index back (008 as if stopped after its first drop).
    await sql`delete from ${sql.table(MIGRATION_TABLE)} where name in (${MIGRATION_007}, ${MIGRATION_008})`.execute(
      s.state.decisions.db,
    );
    await sql`create index decision_label_decision on decision_label (decision_id)`.execute(
      s.state.decisions.db,
    );
    await s.stop();

    s = await start(target);
    try {
      expect(await indexes(s)).toEqual([]);
      expect((await migrationsRecorded(s)).sort()).toEqual([MIGRATION_007, MIGRATION_008]);
      expect(await counts(s, range(0, 40))).toEqual({ stored: 40, rows: 40, drift: 0 });
      // The triggers count on PostgreSQL (007 leaves them): the next rows counted once.
      await write(s, range(40, 50));
      expect(await counts(s, range(0, 50))).toEqual({ stored: 50, rows: 50, drift: 0 });
    } finally {
      await s.stop();
    }
  });
});
