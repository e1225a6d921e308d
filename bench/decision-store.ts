import { randomUUID } from 'node:crypto';
import {
  closeSync,
  createWriteStream,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { DEFAULT_REDACTION, parseRedaction } from '../src/config/redaction-rules.ts';
import { chartFrame } from '../src/console/decisions-page.tsx';
import { type DatabaseTarget, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { openNodeSqlite } from '../src/database/node-sqlite-database.ts';
import { DECISIONS_PAGE_SIZE, DECISIONS_WAL_BYTES } from '../src/database/state-files.ts';
import { createDecisionLog } from '../src/decision-log/decision-log.ts';
import { createRedactor } from '../src/decision-log/log-redaction.ts';
import type { DecisionSink } from '../src/decision-store/decision-batch.ts';
import type { DecisionFilter } from '../src/decision-store/decision-query.ts';
import { createDecisionReader } from '../src/decision-store/decision-reader.ts';
import { type StoreOp, storeOpOf } from '../src/decision-store/decision-rows.ts';
import { storeSink } from '../src/decision-store/decision-store-component.ts';
import { DecisionStoreWriter } from '../src/decision-store/decision-store-writer.ts';
import type { DecisionTables } from '../src/decision-store/decision-tables.ts';
import { type WireBatch, wireBatch } from '../src/decision-store/decision-wire.ts';
import { columnTypes, pgWireWriter } from '../src/decision-store/pg-batch-wire.ts';
import { createRuleReport } from '../src/decision-store/rule-report-query.ts';
import { wireWriter } from '../src/decision-store/sqlite-batch-wire.ts';
import { sqliteThreadSink } from '../src/decision-store/sqlite-thread-sink.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { type RunningPostgres, startPostgres } from '../test/support/postgres-server.ts';
import { median } from './bench-median.ts';
import { mulberry32 } from './seeded-random.ts';

/**
 * The decision store (issue 25): how fast it takes decisions, and how fast it answers the console.
 *
 * 1. Sustained insert rate, SQLite and PostgreSQL: `--records` decision lines (of `--line-bytes`,
 *    the size of a shipped-policy line) pushed into the real writer as fast as it takes them
 *    (SQLite from its worker thread, PostgreSQL through the pool), timed until all are written;
 *    with the main thread's event-loop delay meanwhile (what the writes cost the decisions).
 * 2. A filtered `GET /decisions` page over `--seed` stored decisions on SQLite (with `--postgres`
 *    and `--skip-inserts`, on PostgreSQL): the store seeded in bulk through the writer threads' own
 *    statements (30 days, 50,000 accounts, 20,000 IPs, the shipped policy's rules), then each
 *    filter the console offers queried `--queries` times with random values through the reader
 *    the route calls (the HTTP edge adds its ~1 ms), p50 and p95 per filter; then the counts the
 *    Decisions page and the rule report make (issue 32: over 30 days, from the hour counts).
 *    With `--wal-writes N` (SQLite), N records written by the shipped writer thread after the seed,
 *    its connection open while the queries run (they read through the WAL it leaves).
 *
 * 4. With `--hot-cost`, instead of 1-3 (issue 32): the store's cost on the hot process. The shipped
 *    path (the decision log to a file with the default redaction, teed into the store's writer on
 *    its SQLite thread) fed `--rate` records/s for `--seconds`, against the log alone, interleaved
 *    pairs (`--runs`): CPU of the main thread (`process.threadCpuUsage`) and of the whole process
 *    (every thread) per record, store on minus store off, median over the pairs. With
 *    `--postgres`, the store on PostgreSQL (a server started as the tests do). With
 *    `--store-only`, one run with the store on (to profile: `node --cpu-prof --import tsx ...`).
 *    With `--intervals 100,250,1000`, the store on with each writer interval against it off. With
 *    `--store-seed N`, the SQLite file seeded with N decisions first (a store some days old).
 *
 * 5. With `--hour-count-cost`, instead of 1-3 (issue 32): the insert cost of the hour counts
 *    (SQLite: the writer's per-batch upserts; PostgreSQL: the triggers), the real writer with and
 *    without them, interleaved pairs (`--runs`) of `--records`
 *    (SQLite, or PostgreSQL with `--postgres`: the server's CPU counted too).
 *
 * 6. With `--indexes`: every index of the store's tables and the query that needs it (`INDEXES`),
 *    checked against a store migrated fresh.
 *
 * 7. With `--wal-pages`, instead of 1-3 (issue 32): the SQLite writer's pages per decision over a
 *    store seeded with `--seed` decisions: `--rate` hot-shaped records/s for `--seconds`, batched
 *    every `--intervals` ms, written by the writer's statements in this thread; the WAL's frames
 *    read from their headers, a PASSIVE checkpoint after the commit that takes the WAL to each of
 *    `--checkpoints` frames (SQLite's autocheckpoint, emulated to count the distinct pages each
 *    copies). Per decision: frames, pages checkpointed, the writer's CPU (writes, checkpoints);
 *    the largest WAL; with `--by-tree`, the frames by table or index (dbstat). Variants on one
 *    file (it grows by each one's records), the order reversed every other run.
 *
 * 3. With `--loop-delay`, instead of 2: the main thread's event-loop delay while `GET /decisions?
 *    counts=true` (a page and the counts by verdict over every stored decision, the reader calls the
 *    route makes) runs back to back for `--loop-seconds`, on kysely's own SQLite dialect (queries on
 *    the event loop, as before issue 25's follow-up) and on riskgate's (queries on a worker thread);
 *    and the cost of the thread hop: a trivial `select 1`, µs per query, one after another.
 *
 *   npx tsx bench/decision-store.ts [--records 20000] [--seed 1000000] [--queries 40] [--runs 3]
 *     [--loop-delay --loop-seconds 5]
 *     [--hot-cost --rate 300 --seconds 10 [--postgres | --store-only] [--intervals 100,250,1000]
       [--store-seed 100000]]
 *     [--skip-inserts --postgres --seed 1000000] [--skip-inserts --seed 100000 --wal-writes 6000] [--hour-count-cost [--postgres] --records 20000]
 *     [--page-size 4096] (SQLite files on that page size; default the decisions file's, 16384)
 *     [--indexes]
 *     [--wal-pages --seed 100000 --rate 200 --seconds 40 --intervals 1000,2000 --checkpoints 1000,4096 [--by-tree]]
 */

const RULES = [
  'rat',
  'new-browser',
  'geovelocity',
  'active-call',
  'proximity-far',
  'account-locked',
  'tor-exit',
];
const DAY_MS = 86_400_000;

/** A decision line shaped as riskgate writes them, `padBytes` of inputs. */
function line(rnd: () => number, atMs: number, padBytes: number): Record<string, unknown> {
  const account = Math.floor(rnd() * 50_000);
  const v = rnd();
  const verdict = v < 0.8 ? 'allow' : v < 0.95 ? 'challenge' : 'deny';
  const rules = RULES.filter((_, i) => rnd() < (verdict === 'allow' ? 0.05 : 0.3) / (i + 1));
  const shadow = rnd() < 0.5;
  return {
    kind: 'decision',
    schemaVersion: 1,
    decisionId: randomUUID(),
    at: new Date(atMs).toISOString(),
    request: {
      accountId: `account-${account}`,
      userId: `user-${account}`,
      ip: `10.${Math.floor(rnd() * 80)}.${Math.floor(rnd() * 250)}.1`,
      unitId: `unit-${account}`,
      platform: 'browser',
    },
    policy: { name: 'login', revision: 'sha256:abc' },
    inputs: { signals: { pad: 'x'.repeat(padBytes) } },
    outcome: {
      verdict,
      score: Math.floor(rnd() * 100),
      matchedRules: rules.map((id) => ({ id, description: id })),
    },
    actions: [],
    degraded: rnd() < 0.03,
    ...(shadow && {
      shadow: {
        policy: { name: 'login', revision: 'sha256:def' },
        verdict: rnd() < 0.04 ? 'deny' : verdict,
        score: 0,
        rules,
      },
    }),
    timings: { totalMs: 20 + rnd() * 50, evaluationMs: 0.3, calls: [] },
  };
}

/** Page size of the SQLite files made here, bytes: riskgate's decisions file's unless `--page-size`. */
let pageSize = DECISIONS_PAGE_SIZE;

const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;

function percentile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

interface InsertFigures {
  engine: string;
  recordsPerSecond: number;
  /** Main-thread event-loop delay while writing, milliseconds. */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  /** CPU of this process (every thread) per record, µs; with a server, its processes' too. */
  cpuUsPerRecord: number;
  serverCpuUsPerRecord?: number;
}

/** Pushes `records` lines through the writer as fast as it takes them; records/s until written. */
async function insertRate(
  engine: string,
  sink: DecisionSink,
  records: number,
  lineBytes: number,
  serverCpuUs?: () => number,
): Promise<InsertFigures> {
  const writer = new DecisionStoreWriter({ sink, maxPending: 5000, intervalMs: 5, batchSize: 500 });
  const rnd = mulberry32(1);
  // Built first: the event loop measured is the store's cost, not the bench building lines.
  const lines = Array.from({ length: records }, () => line(rnd, Date.now(), lineBytes));
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const startedAt = performance.now();
  const cpu0 = process.cpuUsage();
  const server0 = serverCpuUs?.();
  let pushed = 0;
  while (writer.status().written < records) {
    // A few hundred per turn, as decisions arrive, never past the buffer: what is measured is the
    // store, not the drop count.
    for (let i = 0; i < 250 && pushed < records && writer.status().pending < 4000; i++)
      writer.push(lines[pushed++]!);
    await new Promise((r) => setImmediate(r));
  }
  const seconds = (performance.now() - startedAt) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const server = server0 === undefined ? undefined : serverCpuUs!() - server0;
  loop.disable();
  await writer.close(5000);
  if (writer.status().dropped > 0) throw new Error('records dropped in the insert bench');
  return {
    engine,
    recordsPerSecond: Math.round(records / seconds),
    loopDelayP99Ms: round(loop.percentile(99) / 1e6),
    loopDelayMaxMs: round(loop.max / 1e6),
    cpuUsPerRecord: round((cpu.user + cpu.system) / records),
    ...(server !== undefined && { serverCpuUsPerRecord: round(server / records) }),
  };
}

/** CPU (µs) of the PostgreSQL server listening on `port` and of all its backends, from /proc. */
function postgresCpuUs(port: number): number {
  const ticks = 1e6 / 100; // CLK_TCK
  const procs = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  const parentOf = new Map<string, string>();
  const cpuOf = new Map<string, number>();
  let root: string | undefined;
  for (const pid of procs) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parentOf.set(pid, fields[1]!);
      cpuOf.set(pid, (Number(fields[11]) + Number(fields[12])) * ticks);
      if (root === undefined && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`-p\0${port}\0`))
        root = pid;
    } catch {
      // Gone meanwhile.
    }
  }
  if (root === undefined) throw new Error(`no PostgreSQL server on port ${port} in /proc`);
  let total = 0;
  for (const pid of cpuOf.keys()) {
    for (let p: string | undefined = pid; p !== undefined && p !== '0'; p = parentOf.get(p)) {
      if (p === root) {
        total += cpuOf.get(pid)!;
        break;
      }
    }
  }
  return total;
}

/**
 * SQLite: the store thread's writer (sqlite-batch-wire.ts) run in this thread, with its hour counts
 * or without (`countHours`); the CPU is this process's either way.
 */
function sqliteSinkHere(path: string, countHours: boolean): DecisionSink {
  const file = new DatabaseSync(path, { timeout: 5000 });
  file.exec('PRAGMA synchronous = NORMAL');
  const write = wireWriter(file, { countHours });
  return {
    write: async (ops) => write(wireBatch(ops)),
    prune: async () => 0,
    close: async () => file.close(),
  };
}

/** PostgreSQL's hour-count triggers (SQLite's writer counts: `countHours`). */
const HOUR_TRIGGERS = {
  decision_hour_insert: 'decision',
  decision_hour_delete: 'decision',
  decision_rule_hour_insert: 'decision_rule',
  decision_rule_hour_delete: 'decision_rule',
};

/**
 * The insert cost of the hour counts (issue 32): the real writer as fast as it takes records, on a
 * fresh store with the hour counts and without them, interleaved pairs, order alternating. SQLite:
 * the writer's statements with its per-batch counts on and off, CPU of this process; PostgreSQL
 * (`pg`): with the triggers and with them dropped (the store before), the server's CPU too.
 */
async function hourCountCost(
  dir: string,
  pg: RunningPostgres | undefined,
  records: number,
  runs: number,
  lineBytes: number,
): Promise<void> {
  const { loadavg } = await import('node:os');
  const load0 = loadavg()[0]!;
  // The store's threads and timers are unref'd (they never hold a stopping riskgate): this holds the bench.
  const keepAlive = setInterval(() => {}, 1000);
  let n = 0;
  const run = async (withCounts: boolean): Promise<InsertFigures> => {
    n++;
    let target: DatabaseTarget = { kind: 'sqlite', path: join(dir, `cost-${n}.sqlite`), pageSize };
    if (pg !== undefined) target = { kind: 'postgres', url: await pg.createDatabase(`cost_${n}`) };
    const database = await openDatabase(target, { migrations: ALL_MIGRATIONS });
    if (!withCounts && pg !== undefined) {
      for (const [trigger, table] of Object.entries(HOUR_TRIGGERS))
        await sql.raw(`drop trigger ${trigger} on ${table}`).execute(database.db);
    }
    const sink =
      target.kind === 'sqlite' ? sqliteSinkHere(target.path, withCounts) : storeSink(database, undefined);
    const figures = await insertRate(
      target.kind,
      sink,
      records,
      lineBytes,
      pg && (() => postgresCpuUs(pg.port)),
    );
    await database.close();
    return figures;
  };
  await run(true);
  await run(false);
  const pairs: { on: InsertFigures; off: InsertFigures }[] = [];
  for (let r = 0; r < runs; r++) {
    const first = r % 2 === 0;
    const a = await run(!first);
    const b = await run(first);
    const pair = first ? { on: b, off: a } : { on: a, off: b };
    pairs.push(pair);
    process.stderr.write(
      `[hour-count-cost] pair ${r + 1}: ${JSON.stringify(pair)} (load ${loadavg()[0]!.toFixed(2)})\n`,
    );
  }
  const m = (f: (p: { on: InsertFigures; off: InsertFigures }) => number) => round(median(pairs.map(f)));
  const cpu = (x: InsertFigures) => x.cpuUsPerRecord + (x.serverCpuUsPerRecord ?? 0);
  console.log(
    `hour counts' insert cost (${pg === undefined ? 'SQLite' : 'PostgreSQL'}, ${records} records a run, ${runs} pairs): ` +
      `CPU per record without ${m((p) => cpu(p.off))} µs, with ${m((p) => cpu(p.on))} µs, difference ${m((p) => cpu(p.on) - cpu(p.off))} µs ` +
      `(pairs: ${pairs.map((p) => round(cpu(p.on) - cpu(p.off))).join(', ')}); records/s without ${m((p) => p.off.recordsPerSecond)}, with ${m((p) => p.on.recordsPerSecond)}; ` +
      `load average ${load0.toFixed(2)} -> ${loadavg()[0]!.toFixed(2)}`,
  );
  clearInterval(keepAlive);
}

/** The `i`-th of `count` seeded decisions' ops (a label on 1 %), spread over the last 30 days. */
function seedOps(rnd: () => number, i: number, count: number, now: number, lineBytes: number): StoreOp[] {
  const atMs = now - 30 * DAY_MS + Math.floor((i / count) * 30 * DAY_MS);
  const record = line(rnd, atMs, lineBytes);
  const ops = [storeOpOf(record, atMs)!];
  if (rnd() < 0.01) {
    ops.push(
      storeOpOf(
        {
          kind: 'feedback',
          decisionId: record.decisionId,
          label: rnd() < 0.5 ? 'fraud' : 'legit',
          labelledBy: 'key-bench',
          at: new Date(atMs + 1000).toISOString(),
        },
        atMs,
      )!,
    );
  }
  return ops;
}

/**
 * Seeds `count` decisions over the last 30 days in bulk through the writer threads' own statements
 * (sqlite-batch-wire.ts, pg-batch-wire.ts: the hour counts included), in batches of
 * 20,000 records, each one transaction, in this thread (no decision is waiting).
 */
async function seed(target: DatabaseTarget, count: number, lineBytes: number): Promise<void> {
  const database = await openDatabase(target, { migrations: ALL_MIGRATIONS });
  let write: (batch: WireBatch) => unknown;
  let close: () => Promise<void>;
  if (target.kind === 'sqlite') {
    await database.close();
    const file = new DatabaseSync(target.path);
    // A bench's seed: a crash loses the file anyway, and a large cache keeps the indexes' pages.
    file.exec('PRAGMA synchronous = OFF; PRAGMA cache_size = -2000000');
    write = wireWriter(file);
    close = async () => file.close();
  } else {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: database.postgres!.url });
    await client.connect();
    write = pgWireWriter(client, await columnTypes(client));
    close = async () => {
      await client.end();
      await database.close();
    };
  }
  const rnd = mulberry32(2);
  const now = Date.now();
  const batch = 20_000;
  for (let i = 0; i < count; i += batch) {
    const ops: StoreOp[] = [];
    for (let j = i; j < Math.min(count, i + batch); j++) ops.push(...seedOps(rnd, j, count, now, lineBytes));
    await write(wireBatch(ops));
    if (i % 100_000 === 0) process.stderr.write(`[decision-store] seeded ${i}\n`);
  }
  await close();
}

/** Each console filter, with random values drawn per query. */
const FILTERS: Record<string, (rnd: () => number, now: number) => DecisionFilter> = {
  'newest (no filter)': () => ({}),
  'verdict=deny': () => ({ verdict: 'deny' }),
  accountId: (rnd) => ({ accountId: `account-${Math.floor(rnd() * 50_000)}` }),
  userId: (rnd) => ({ userId: `user-${Math.floor(rnd() * 50_000)}` }),
  ip: (rnd) => ({ ip: `10.${Math.floor(rnd() * 80)}.${Math.floor(rnd() * 250)}.1` }),
  unitId: (rnd) => ({ unitId: `unit-${Math.floor(rnd() * 50_000)}` }),
  'rule (common)': () => ({ rule: 'rat' }),
  'rule (rare)': () => ({ rule: 'tor-exit' }),
  'rule + verdict=challenge': () => ({ rule: 'new-browser', verdict: 'challenge' }),
  'last hour': (_r, now) => ({ fromMs: now - 3_600_000 }),
  'a day a week ago': (_r, now) => ({ fromMs: now - 8 * DAY_MS, toMs: now - 7 * DAY_MS }),
  'verdict=deny, a day a week ago': (_r, now) => ({
    verdict: 'deny',
    fromMs: now - 8 * DAY_MS,
    toMs: now - 7 * DAY_MS,
  }),
  'label=fraud': () => ({ label: 'fraud' }),
  'degraded=true': () => ({ degraded: true }),
  'shadowDisagrees=true': () => ({ shadowDisagrees: true }),
  'second page of verdict=deny': () => ({ verdict: 'deny' }),
};

async function queryTimes(
  target: DatabaseTarget,
  queries: number,
): Promise<Record<string, { p50: number; p95: number }>> {
  const database = await openDatabase(target, { migrations: ALL_MIGRATIONS });
  const reader = createDecisionReader(database.db.withTables<DecisionTables>(), () => {
    throw new Error('unused');
  });
  const rnd = mulberry32(3);
  const out: Record<string, { p50: number; p95: number }> = {};
  const all: number[] = [];
  for (const [name, make] of Object.entries(FILTERS)) {
    const times: number[] = [];
    for (let i = 0; i < queries + 3; i++) {
      let filter = { ...make(rnd, Date.now()), limit: 50 };
      if (name.startsWith('second page')) {
        const first = await reader.list(filter);
        filter = { ...filter, ...(first.nextCursor !== undefined && { cursor: first.nextCursor }) };
      }
      const t0 = performance.now();
      await reader.list(filter);
      if (i >= 3) times.push(performance.now() - t0);
    }
    all.push(...times);
    out[name] = { p50: round(percentile(times, 0.5), 2), p95: round(percentile(times, 0.95), 2) };
  }
  out['every filter'] = { p50: round(percentile(all, 0.5), 2), p95: round(percentile(all, 0.95), 2) };
  Object.assign(out, await countTimes(database, queries));
  await database.close();
  return out;
}

/**
 * What the console's Decisions page counts (issue 32): counts by verdict and the chart's slices
 * over 30 days (its default frame) and over shorter ranges, with and without filters; the rule
 * report; and, for comparison, the 30 days counted from the rows alone (before the hour counts).
 */
async function countTimes(
  database: RiskgateDatabase,
  queries: number,
): Promise<Record<string, { p50: number; p95: number }>> {
  const db = database.db.withTables<DecisionTables>();
  const reader = createDecisionReader(db, () => {
    throw new Error('unused');
  });
  const report = createRuleReport({
    database,
    policies: {
      store: { current: () => ({ name: 'login', revision: 'sha256:abc', ruleIds: RULES }) },
      shadow: { current: () => ({ name: 'login', revision: 'sha256:def', ruleIds: RULES }) },
    },
  });
  const chart = (f: DecisionFilter, now: number) => {
    const frame = chartFrame(f.fromMs, now);
    return reader.countOverTime({ ...f, fromMs: frame.fromMs, toMs: now }, frame.bucketMs);
  };
  const rowsOnly = (fromMs: number) =>
    db
      .selectFrom('decision')
      .select((eb) => ['verdict', eb.fn.countAll().as('n')])
      .where('at_ms', '>=', fromMs)
      .groupBy('verdict')
      .execute();
  const cases: Record<string, [n: number, (now: number) => Promise<unknown>]> = {
    'counts by verdict, 30 days': [queries, (now) => reader.countByVerdict({ fromMs: now - 30 * DAY_MS })],
    'chart, 30 days (12 h slices)': [queries, (now) => chart({ fromMs: now - 30 * DAY_MS }, now)],
    'counts + chart, 30 days, verdict=deny': [
      queries,
      (now) =>
        Promise.all([
          reader.countByVerdict({ fromMs: now - 30 * DAY_MS, verdict: 'deny' }),
          chart({ fromMs: now - 30 * DAY_MS, verdict: 'deny' }, now),
        ]),
    ],
    'counts + chart, 30 days, rule=rat': [
      queries,
      (now) =>
        Promise.all([
          reader.countByVerdict({ fromMs: now - 30 * DAY_MS, rule: 'rat' }),
          chart({ fromMs: now - 30 * DAY_MS, rule: 'rat' }, now),
        ]),
    ],
    'counts + chart, all (no range)': [
      queries,
      (now) => Promise.all([reader.countByVerdict({}), chart({}, now)]),
    ],
    'counts + chart, 24 h (1 h slices)': [
      queries,
      (now) =>
        Promise.all([reader.countByVerdict({ fromMs: now - DAY_MS }), chart({ fromMs: now - DAY_MS }, now)]),
    ],
    'counts + chart, 1 h (5 min slices, rows)': [
      queries,
      (now) =>
        Promise.all([
          reader.countByVerdict({ fromMs: now - 3_600_000 }),
          chart({ fromMs: now - 3_600_000 }, now),
        ]),
    ],
    'rule report (active + shadow, uncached)': [Math.min(queries, 10), (now) => report.report(now)],
    'before: counts by verdict, 30 days, from the rows': [3, (now) => rowsOnly(now - 30 * DAY_MS)],
  };
  const out: Record<string, { p50: number; p95: number }> = {};
  for (const [name, [n, run]] of Object.entries(cases)) {
    const times: number[] = [];
    for (let i = 0; i < n + 1; i++) {
      const t0 = performance.now();
      await run(Date.now());
      if (i >= 1) times.push(performance.now() - t0);
    }
    out[name] = { p50: round(percentile(times, 0.5), 2), p95: round(percentile(times, 0.95), 2) };
  }
  process.stderr.write(
    `[decision-store] 30 days: ${JSON.stringify(await reader.countByVerdict({ fromMs: Date.now() - 30 * DAY_MS }))}\n`,
  );
  return out;
}

// biome-ignore lint/complexity/noBannedTypes: kysely's empty schema.
type AnyDb = Kysely<{}>;

interface LoopFigures {
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  countsRequests: number;
  selectOneUs: number;
}

/** Event-loop delay while the counts query runs back to back on `db`, then the `select 1` cost. */
async function loopDelay(db: AnyDb, seconds: number): Promise<LoopFigures> {
  const reader = createDecisionReader(db.withTables<DecisionTables>(), () => {
    throw new Error('unused');
  });
  await Promise.all([reader.list({ limit: 50 }), reader.countByVerdict({})]);
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const endAt = performance.now() + seconds * 1000;
  let countsRequests = 0;
  while (performance.now() < endAt) {
    await Promise.all([reader.list({ limit: 50 }), reader.countByVerdict({})]);
    countsRequests++;
    // Requests arrive as I/O, between turns of the loop: without this turn, the main thread's
    // queries (promises, never a timer) would never let the delay monitor sample at all.
    await new Promise((resolve) => setImmediate(resolve));
  }
  loop.disable();
  const n = 2000;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await sql`select 1`.execute(db);
  return {
    loopDelayP99Ms: round(loop.percentile(99) / 1e6),
    loopDelayMaxMs: round(loop.max / 1e6),
    countsRequests,
    selectOneUs: round(((performance.now() - t0) * 1000) / n),
  };
}

/** `loopDelay` on each dialect, `runs` times, printed as medians. */
async function loopDelayRuns(path: string, seconds: number, runs: number): Promise<void> {
  const dialects: Record<string, () => Promise<{ db: AnyDb; close: () => Promise<void> }>> = {
    'main thread (kysely SqliteDialect)': async () => {
      const db: AnyDb = new Kysely({ dialect: new SqliteDialect({ database: openNodeSqlite(path) }) });
      return { db, close: () => db.destroy() };
    },
    'worker thread (SqliteThreadDialect)': () =>
      openDatabase({ kind: 'sqlite', path, pageSize }, { migrations: ALL_MIGRATIONS }),
  };
  console.log(
    '\n| queries on | loop delay p99 ms | max ms | counts requests/s | select 1 µs |\n|---|---:|---:|---:|---:|',
  );
  for (const [name, open] of Object.entries(dialects)) {
    const perRun: LoopFigures[] = [];
    for (let r = 0; r < runs; r++) {
      const database = await open();
      perRun.push(await loopDelay(database.db, seconds));
      await database.close();
    }
    const m = (f: (x: LoopFigures) => number) => median(perRun.map(f));
    process.stderr.write(`[decision-store] ${name}: ${JSON.stringify(perRun)}\n`);
    console.log(
      `| ${name} | ${m((f) => f.loopDelayP99Ms)} | ${m((f) => f.loopDelayMaxMs)} | ${round(m((f) => f.countsRequests) / seconds)} | ${m((f) => f.selectOneUs)} |`,
    );
  }
}

/** A shipped-shaped decision record: `line` plus an Admin user and devices (with display names). */
function hotRecord(rnd: () => number, lineBytes: number): Record<string, unknown> {
  const r = line(rnd, Date.now(), lineBytes);
  const inputs = r.inputs as Record<string, unknown>;
  const account = (r.request as { accountId: string }).accountId;
  inputs.user = {
    id: account,
    username: `${account}@example.com`,
    display_name: `User ${account}`,
    status: 'active',
  };
  inputs.devices = [
    { id: `${account}-web`, display_name: 'Work laptop', platform: 'browser', trusted: true },
    { id: `${account}-app`, display_name: 'Phone', platform: 'ios', trusted: true },
  ];
  inputs.adminUnavailable = false;
  return r;
}

interface HotFigures {
  mainUsPerRecord: number;
  processUsPerRecord: number;
}

/**
 * CPU of the log (and the store, `withStore`; its writer's `intervalMs` when given) fed `rate`
 * records/s for `seconds`, per record.
 */
async function hotRun(
  dir: string,
  target: DatabaseTarget | undefined,
  withStore: boolean,
  rate: number,
  seconds: number,
  lineBytes: number,
  intervalMs?: number,
): Promise<HotFigures> {
  const rules = parseRedaction(DEFAULT_REDACTION);
  if (typeof rules === 'string') throw new Error(rules);
  const log = createDecisionLog(createWriteStream(join(dir, `hot-${withStore}.log`), { flags: 'a' }), {
    ownsStream: true,
    redact: createRedactor(rules, undefined),
  });
  const path = join(dir, 'hot.sqlite');
  // As shipped: SQLite (the default) and PostgreSQL each written from the store's thread.
  const database = await openDatabase(target ?? { kind: 'sqlite', path, pageSize }, {
    migrations: ALL_MIGRATIONS,
  });
  const sink = storeSink(database, target === undefined ? path : undefined);
  const writer = withStore
    ? new DecisionStoreWriter({ sink, ...(intervalMs !== undefined && { intervalMs }) })
    : undefined;
  const rnd = mulberry32(3);
  const total = Math.round(rate * seconds);
  // Built first: what is measured is the log and the store, not the bench building records.
  const records = Array.from({ length: total }, () => hotRecord(rnd, lineBytes));
  const tickMs = 10;
  const perTick = Math.max(1, Math.round((rate * tickMs) / 1000));
  // The writer's timers and thread are unref'd (they never hold a stopping riskgate): this holds the bench.
  const keepAlive = setInterval(() => {}, 1000);
  // The thread started and the log's file opened before the clock starts: a running riskgate has both.
  const warm = hotRecord(rnd, lineBytes);
  log.write(warm);
  writer?.push(warm);
  await log.flush();
  await writer?.flush(30_000);
  const main0 = process.threadCpuUsage();
  const all0 = process.cpuUsage();
  let pushed = 0;
  const startedAt = performance.now();
  while (pushed < total) {
    for (let i = 0; i < perTick && pushed < total; i++) {
      const record = records[pushed++]!;
      log.write(record);
      writer?.push(record);
    }
    // Paced as decisions arrive: at a few hundred per second the store's batches are small.
    const due = startedAt + (pushed / perTick) * tickMs;
    await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())));
  }
  await log.flush();
  if (writer !== undefined && !(await writer.flush(30_000))) throw new Error('the store did not drain');
  const main = process.threadCpuUsage(main0);
  const all = process.cpuUsage(all0);
  await log.close();
  await writer?.close(5000);
  await database.close();
  clearInterval(keepAlive);
  if (writer !== undefined && writer.status().written !== total + 1) throw new Error('records not written');
  return {
    mainUsPerRecord: (main.user + main.system) / total,
    processUsPerRecord: (all.user + all.system) / total,
  };
}

/**
 * Store on minus store off per record, interleaved: each run measures the store off and on with
 * each of `intervals` (the writer's `intervalMs`; undefined: its default), in an order rotating
 * from run to run, so a drift in the machine's load falls on every side.
 */
async function hotCost(
  dir: string,
  target: DatabaseTarget | undefined,
  o: {
    rate: number;
    seconds: number;
    runs: number;
    lineBytes: number;
    intervals: (number | undefined)[];
    storeSeed: number;
  },
): Promise<void> {
  const { rate, seconds, lineBytes } = o;
  const { loadavg } = await import('node:os');
  // `--store-seed`: the store's file (SQLite) holding that many decisions first, as a store some
  // days old does: its indexes on random keys then cost about a leaf a row (bench/RESULTS.md).
  if (o.storeSeed > 0 && target === undefined)
    await seed({ kind: 'sqlite', path: join(dir, 'hot.sqlite'), pageSize }, o.storeSeed, lineBytes);
  // A connection open throughout, as riskgate's query thread keeps one: the WAL file then lives
  // from run to run (the last connection to close deletes it), grown once, as in a running riskgate.
  const holder = target === undefined ? new DatabaseSync(join(dir, 'hot.sqlite')) : undefined;
  const load0 = loadavg()[0]!;
  // A warm-up pair, not counted (JIT, the thread's first start; over a seeded store, the WAL grown
  // to its bound).
  const warmSeconds = o.storeSeed > 0 ? seconds : 1;
  await hotRun(dir, target, false, rate, warmSeconds, lineBytes);
  await hotRun(dir, target, true, rate, warmSeconds, lineBytes);
  const sides = [undefined, ...o.intervals.map((intervalMs) => ({ intervalMs }))];
  const deltas = o.intervals.map(() => ({ main: [] as number[], proc: [] as number[] }));
  for (let r = 0; r < o.runs; r++) {
    const figures = new Map<number, HotFigures>();
    for (let k = 0; k < sides.length; k++) {
      const at = (k + r) % sides.length;
      const side = sides[at];
      figures.set(
        at,
        await hotRun(dir, target, side !== undefined, rate, seconds, lineBytes, side?.intervalMs),
      );
    }
    const off = figures.get(0)!;
    const said = [`off main ${round(off.mainUsPerRecord)} / process ${round(off.processUsPerRecord)} µs`];
    for (const [i, d] of deltas.entries()) {
      const on = figures.get(i + 1)!;
      d.main.push(round(on.mainUsPerRecord - off.mainUsPerRecord));
      d.proc.push(round(on.processUsPerRecord - off.processUsPerRecord));
      said.push(
        `on${o.intervals[i] === undefined ? '' : ` (${o.intervals[i]} ms)`} main ${round(on.mainUsPerRecord)} / process ${round(on.processUsPerRecord)} µs`,
      );
    }
    process.stderr.write(
      `[hot-cost] run ${r + 1}: ${said.join(', ')} per record (load ${loadavg()[0]!.toFixed(2)})\n`,
    );
  }
  holder?.close();
  for (const [i, d] of deltas.entries()) {
    const interval = o.intervals[i] === undefined ? '' : `, batches every ${o.intervals[i]} ms`;
    console.log(
      `store's cost per record at ${rate}/s${interval}: main thread ${median(d.main)} µs (pairs: ${d.main.join(', ')}), whole process ${median(d.proc)} µs (pairs: ${d.proc.join(', ')}); load average ${load0.toFixed(2)} -> ${loadavg()[0]!.toFixed(2)}`,
    );
  }
}

/** Mode 2: `seeded` decisions bulk-seeded (SQLite, or PostgreSQL `pg`), then pages and counts timed. */
async function seededQueries(
  dir: string,
  pg: RunningPostgres | undefined,
  seeded: number,
  values: { queries?: string; 'loop-delay'?: boolean; 'loop-seconds'?: string; 'wal-writes'?: string },
  runs: number,
  lineBytes: number,
): Promise<void> {
  const path = join(dir, 'seeded.sqlite');
  const target: DatabaseTarget =
    pg === undefined ? { kind: 'sqlite', path, pageSize } : { kind: 'postgres', url: pg.url };
  const { loadavg } = await import('node:os');
  const t0 = performance.now();
  await seed(target, seeded, lineBytes);
  const size = pg === undefined ? `${round(statSync(path).size / 1e6)} MB` : 'PostgreSQL';
  console.log(
    `seeded ${seeded} decisions in ${round((performance.now() - t0) / 1000)} s (${size}); load average ${loadavg()[0]!.toFixed(2)}`,
  );
  if (values['loop-delay'] && pg === undefined) {
    await loopDelayRuns(path, Number(values['loop-seconds']), runs);
    return;
  }
  // `--wal-writes N` (SQLite): N hot records through the shipped writer thread in batches of 200
  // (a second's at 200/s), its connection kept open while the queries run: they read through the
  // WAL the writer leaves (its checkpoints' bound), as the console's do while decisions arrive.
  const walWrites = Number(values['wal-writes'] ?? 0);
  const walSink = walWrites > 0 && pg === undefined ? sqliteThreadSink(path) : undefined;
  if (walSink !== undefined) {
    const rnd = mulberry32(4);
    for (let i = 0; i < walWrites; i += 200) {
      const ops = Array.from(
        { length: Math.min(200, walWrites - i) },
        () => storeOpOf(hotRecord(rnd, lineBytes), Date.now())!,
      );
      await walSink.write(ops);
    }
    console.log(
      `then ${walWrites} written by the writer thread: WAL ${round(statSync(`${path}-wal`).size / 1e6)} MB`,
    );
  }
  const perRun: Record<string, { p50: number; p95: number }>[] = [];
  for (let r = 0; r < runs; r++) {
    perRun.push(await queryTimes(target, Number(values.queries)));
    process.stderr.write(`[decision-store] run ${r + 1} done, load average ${loadavg()[0]!.toFixed(2)}\n`);
  }
  const engine = pg === undefined ? 'SQLite' : 'PostgreSQL';
  console.log(
    `\n| query (page of 50, over ${seeded} decisions, ${engine}) | p50 ms | p95 ms |\n|---|---:|---:|`,
  );
  for (const name of Object.keys(perRun[0]!)) {
    console.log(
      `| ${name} | ${median(perRun.map((p) => p[name]!.p50))} | ${median(perRun.map((p) => p[name]!.p95))} |`,
    );
  }
  console.log(`load average at the end ${loadavg()[0]!.toFixed(2)}`);
  // The writer's thread is unref'd (it never holds a stopping riskgate): this holds the bench.
  const keepAlive = setInterval(() => {}, 1000);
  await walSink?.close();
  clearInterval(keepAlive);
}

/**
 * Every index of the decision store's tables and the console's or the API's query that needs it
 * (issue 32: each index is paid by every row written; an index no query reads goes). The primary
 * keys (SQLite's `sqlite_autoindex_*`) are each table's conflict target besides what they serve
 * here. `--indexes` prints this list and fails when a store migrated fresh has an index it does not
 * list, or lacks one it lists. Dropped by `decisions-008-unread-indexes`: `decision_rule_rule_at`
 * (rule_id, at_ms, decision_id; every rule query names the policy: decision_rule_policy_rule_at)
 * and `decision_label_decision` (decision_id, at_ms; a prefix of decision_label_once).
 */
const INDEXES: [name: string, table: string, columns: string, servedQuery: string][] = [
  [
    '(primary key)',
    'decision',
    'decision_id',
    'a decision by id (`GET /decisions/{id}`), the label updates, retention deleting by id, a rule row to its decision',
  ],
  [
    'decision_at',
    'decision',
    'at_ms, decision_id',
    "the newest page without a filter and a time range's pages; the ends of a counted range; retention by age; the backtest's and replay's keyset pages",
  ],
  [
    'decision_verdict_at',
    'decision',
    'verdict, at_ms, decision_id',
    "the page `verdict=`, the counts' ends with a verdict",
  ],
  [
    'decision_account_at',
    'decision',
    'account_id, at_ms, decision_id',
    "the page `accountId=`; the `outcomes` input (an account's recent step-ups, on the decision path)",
  ],
  ['decision_user_at', 'decision', 'user_id, at_ms, decision_id', 'the page `userId=`'],
  ['decision_ip_at', 'decision', 'ip, at_ms, decision_id', 'the page `ip=`'],
  ['decision_unit_at', 'decision', 'unit_id, at_ms, decision_id', 'the page `unitId=`'],
  [
    'decision_at_bytes',
    'decision',
    'at_ms, line_bytes',
    "retention by size: the lines' total read from the index, not the table of whole lines",
  ],
  ['decision_label_at', 'decision', 'label, at_ms, decision_id (labelled only)', 'the page `label=`'],
  ['decision_degraded_at', 'decision', 'at_ms, decision_id (degraded only)', 'the page `degraded=true`'],
  [
    'decision_shadow_disagrees_at',
    'decision',
    'at_ms, decision_id (disagreeing only)',
    'the page `shadowDisagrees=true`',
  ],
  [
    'decision_revision_at',
    'decision',
    'policy_revision, at_ms',
    "rule report: the active revision's decisions at a window's ends (whole hours: decision_hour)",
  ],
  [
    'decision_shadow_revision_at',
    'decision',
    'shadow_revision, at_ms',
    "rule report: the shadow revision's decisions at a window's ends",
  ],
  [
    'decision_agreement',
    'decision',
    'policy_revision, shadow_revision, verdict, shadow_verdict, at_ms',
    "rule report: the agreement matrix at the 7 days' ends",
  ],
  [
    'decision_revision_labelled',
    'decision',
    'policy_revision, label, at_ms (labelled only)',
    'rule report: precision and recall (active)',
  ],
  [
    'decision_shadow_revision_labelled',
    'decision',
    'shadow_revision, label, at_ms (labelled only)',
    'rule report: precision and recall (shadow)',
  ],
  [
    'decision_name_revision_at',
    'decision',
    'policy_name, policy_revision, at_ms',
    "rule history: a name's revisions (skip scan), each one's first and last decision",
  ],
  [
    '(primary key)',
    'decision_rule',
    'decision_id, policy, rule_id',
    "a page's rules, the labelled decisions' rules (rule report), retention",
  ],
  [
    'decision_rule_policy_rule_at',
    'decision_rule',
    'rule_id, policy, at_ms, decision_id',
    "the page `rule=` (in page order) and its counts' ends",
  ],
  [
    'decision_rule_revision',
    'decision_rule',
    'policy_revision, policy, rule_id, at_ms',
    "rule report: fires over 24 h by hour, and at the 7 days' ends",
  ],
  [
    'decision_label_once',
    'decision_label',
    'decision_id, at_ms, labelled_by, label (unique)',
    "a label kept once; a decision's labels, its newest (the current label), retention",
  ],
  ['(primary key)', 'decision_action', 'action_id', "an action's newest outcome kept (upsert)"],
  [
    'decision_action_decision',
    'decision_action',
    'decision_id',
    "a decision's actions (`GET /decisions/{id}`), retention",
  ],
  [
    '(primary key)',
    'decision_outcome',
    'decision_id, type, value',
    "an outcome kept once; a decision's outcomes, its outcome label, the `outcomes` input, retention",
  ],
  ['(primary key)', 'decision_reject', 'id', 'a set-aside record by id'],
  ['decision_reject_at', 'decision_reject', 'at_ms', 'trimming to the newest 1,000 set-aside records'],
  [
    '(primary key)',
    'decision_hour',
    'hour_ms, verdict, policy_revision, shadow_revision, shadow_verdict',
    "the table itself (SQLite: without rowid): counts and chart by hour, the rule report's decisions and matrix",
  ],
  [
    '(primary key)',
    'decision_rule_hour',
    'rule_id, policy, hour_ms, policy_revision, verdict',
    "the table itself: counts under `rule=`, the rule report's fires",
  ],
  [
    'decision_rule_hour_revision',
    'decision_rule_hour',
    'policy_revision, policy, hour_ms',
    "rule report: an earlier revision's fires (its rules unknown: by revision)",
  ],
];

/** Prints `INDEXES`; throws when a fresh SQLite store's indexes are not exactly those listed. */
async function indexList(dir: string): Promise<void> {
  const path = join(dir, 'indexes.sqlite');
  await (await openDatabase({ kind: 'sqlite', path, pageSize }, { migrations: ALL_MIGRATIONS })).close();
  const file = new DatabaseSync(path);
  const tables = [...new Set(INDEXES.map(([, table]) => table))];
  const present = file
    .prepare(
      `select name from sqlite_master where type = 'index' and name not like 'sqlite_autoindex_%'
          and tbl_name in (${tables.map(() => '?').join(', ')})`,
    )
    .all(...tables)
    .map((r) => String(r.name));
  file.close();
  console.log('| index | table | columns | the query that needs it |\n|---|---|---|---|');
  for (const [name, table, columns, query] of INDEXES)
    console.log(`| ${name} | ${table} | ${columns} | ${query} |`);
  const listed = new Set(INDEXES.map(([name]) => name));
  const unlisted = present.filter((name) => !listed.has(name));
  const missing = [...listed].filter((name) => !name.startsWith('(') && !present.includes(name));
  if (unlisted.length > 0 || missing.length > 0)
    throw new Error(
      `indexes not as listed: unlisted ${unlisted.join(', ') || 'none'}, missing ${missing.join(', ') || 'none'}`,
    );
}

/** Frames a WAL file holds since its last reset, read from the frames' headers (salts match the file's). */
class WalFrames {
  #offset = 32;
  #salts: [number, number] | undefined;
  readonly #header = Buffer.alloc(32);
  /** Pages (by number) the frames since the last checkpoint wrote, and how many frames. */
  pages = new Map<number, number>();
  frames = 0;
  constructor(
    private readonly path: string,
    private readonly pageBytes: number,
  ) {}
  /** Reads the frames appended since the last call. */
  scan(): void {
    const fd = openSync(this.path, 'r');
    try {
      if (this.#salts === undefined) {
        if (readSync(fd, this.#header, 0, 32, 0) < 32) return;
        this.#salts = [this.#header.readUInt32BE(16), this.#header.readUInt32BE(20)];
      }
      const frame = this.#header.subarray(0, 24);
      while (readSync(fd, frame, 0, 24, this.#offset) === 24) {
        if (frame.readUInt32BE(8) !== this.#salts[0] || frame.readUInt32BE(12) !== this.#salts[1]) break;
        const page = frame.readUInt32BE(0);
        this.pages.set(page, (this.pages.get(page) ?? 0) + 1);
        this.frames++;
        this.#offset += 24 + this.pageBytes;
      }
    } finally {
      closeSync(fd);
    }
  }
  /** After a complete checkpoint: the next commit starts the WAL over, with new salts. */
  reset(): void {
    this.#offset = 32;
    this.#salts = undefined;
    this.pages = new Map();
  }
}

interface WalFigures {
  framesPerDecision: number;
  checkpointedPerDecision: number;
  checkpoints: number;
  maxWalMb: number;
  writeUs: number;
  checkpointUs: number;
  byTree: Record<string, number>;
}

/**
 * Mode 7 (`--wal-pages`): over a store seeded with `--seed` decisions, the SQLite writer's pages per
 * decision (WAL frames, pages checkpointed) and its CPU in this thread, at `--rate` decisions/s for
 * `--seconds`, for each batch interval (`--intervals`) and checkpoint threshold in frames
 * (`--checkpoints`; SQLite's autocheckpoint, PASSIVE after a commit, emulated to count).
 */
async function walPages(
  dir: string,
  o: {
    seeded: number;
    rate: number;
    seconds: number;
    runs: number;
    lineBytes: number;
    intervals: number[];
    checkpoints: number[];
    /** KiB of page cache on the writer's connection (`PRAGMA cache_size = -N`); undefined: SQLite's default. */
    caches: (number | undefined)[];
    byTree: boolean;
  },
): Promise<void> {
  const { loadavg } = await import('node:os');
  const path = join(dir, 'wal.sqlite');
  const t0 = performance.now();
  await seed({ kind: 'sqlite', path, pageSize }, o.seeded, o.lineBytes);
  process.stderr.write(
    `[wal-pages] seeded ${o.seeded} in ${round((performance.now() - t0) / 1000)} s, ${round(statSync(path).size / 1e6)} MB\n`,
  );
  const variants = o.intervals.flatMap((intervalMs) =>
    o.checkpoints.flatMap((frames) => o.caches.map((cacheKib) => ({ intervalMs, frames, cacheKib }))),
  );
  const results = new Map<string, WalFigures[]>();
  const rnd = mulberry32(5);
  let clock = Date.now();
  for (let r = 0; r < o.runs; r++) {
    const order = r % 2 === 0 ? variants : [...variants].reverse();
    for (const v of order) {
      const file = new DatabaseSync(path, { timeout: 5000 });
      file.exec('PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0');
      if (v.cacheKib !== undefined) file.exec(`PRAGMA cache_size = -${v.cacheKib}`);
      file.exec('PRAGMA wal_checkpoint(TRUNCATE)');
      const write = wireWriter(file);
      const wal = new WalFrames(`${path}-wal`, pageSize);
      const perBatch = Math.max(1, Math.round((o.rate * v.intervalMs) / 1000));
      const total = Math.round(o.rate * o.seconds);
      let frames = 0;
      let checkpointed = 0;
      let checkpoints = 0;
      let maxFrames = 0;
      let writeUs = 0;
      let checkpointUs = 0;
      const byPage = new Map<number, number>();
      const checkpoint = () => {
        const c0 = process.threadCpuUsage();
        const [row] = file.prepare('PRAGMA wal_checkpoint(PASSIVE)').all() as {
          log: number;
          checkpointed: number;
        }[];
        const c = process.threadCpuUsage(c0);
        checkpointUs += c.user + c.system;
        if (row!.log !== row!.checkpointed) throw new Error(`checkpoint incomplete: ${JSON.stringify(row)}`);
        checkpointed += wal.pages.size;
        checkpoints++;
        wal.reset();
      };
      for (let i = 0; i < total; i += perBatch) {
        const ops: StoreOp[] = [];
        for (let j = i; j < Math.min(total, i + perBatch); j++) {
          clock += 1000 / o.rate;
          const record = hotRecord(rnd, o.lineBytes);
          record.at = new Date(clock).toISOString();
          ops.push(storeOpOf(record, clock)!);
        }
        const batch = wireBatch(ops);
        const c0 = process.threadCpuUsage();
        write(batch);
        const c = process.threadCpuUsage(c0);
        writeUs += c.user + c.system;
        const before = wal.frames;
        const pagesBefore = new Map(wal.pages);
        wal.scan();
        frames += wal.frames - before;
        for (const [page, n] of wal.pages)
          byPage.set(page, (byPage.get(page) ?? 0) + n - (pagesBefore.get(page) ?? 0));
        maxFrames = Math.max(
          maxFrames,
          wal.pages.size === 0 ? 0 : [...wal.pages.values()].reduce((a, b) => a + b, 0),
        );
        if ([...wal.pages.values()].reduce((a, b) => a + b, 0) >= v.frames) checkpoint();
      }
      if (wal.pages.size > 0) checkpoint();
      const byTree: Record<string, number> = {};
      if (o.byTree) {
        const names = new Map<number, string>();
        for (const row of file.prepare('select pageno, name from dbstat').all() as {
          pageno: number;
          name: string;
        }[])
          names.set(row.pageno, row.name);
        for (const [page, n] of byPage) {
          const name = names.get(page) ?? (page === 1 ? 'page 1' : 'other');
          byTree[name] = round((byTree[name] ?? 0) + n / total, 3);
        }
      }
      file.close();
      const f: WalFigures = {
        framesPerDecision: round(frames / total, 3),
        checkpointedPerDecision: round(checkpointed / total, 3),
        checkpoints,
        maxWalMb: round((maxFrames * (pageSize + 24)) / 1e6),
        writeUs: round(writeUs / total),
        checkpointUs: round(checkpointUs / total),
        byTree,
      };
      const key = `batches every ${v.intervalMs} ms (${perBatch}), checkpoint at ${v.frames} frames${v.cacheKib === undefined ? '' : `, cache ${v.cacheKib} KiB`}`;
      results.set(key, [...(results.get(key) ?? []), f]);
      process.stderr.write(
        `[wal-pages] run ${r + 1}: ${key}: ${JSON.stringify(f)} (load ${loadavg()[0]!.toFixed(2)})\n`,
      );
    }
  }
  console.log(
    `\n| writer at ${o.rate}/s over ${o.seeded} seeded (median of ${o.runs}) | WAL frames per decision | pages checkpointed per decision | checkpoints | WAL at most MB | write µs per decision | checkpoint µs per decision |\n|---|---:|---:|---:|---:|---:|---:|`,
  );
  for (const [key, fs] of results) {
    const m = (f: (x: WalFigures) => number) => round(median(fs.map(f)), 3);
    console.log(
      `| ${key} | ${m((x) => x.framesPerDecision)} | ${m((x) => x.checkpointedPerDecision)} | ${m((x) => x.checkpoints)} | ${m((x) => x.maxWalMb)} | ${m((x) => x.writeUs)} | ${m((x) => x.checkpointUs)} |`,
    );
  }
  console.log(`load average at the end ${loadavg()[0]!.toFixed(2)}`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      records: { type: 'string', default: '20000' },
      seed: { type: 'string', default: '1000000' },
      queries: { type: 'string', default: '40' },
      runs: { type: 'string', default: '3' },
      'line-bytes': { type: 'string', default: '2500' },
      /** SQLite page size of the files made, bytes (riskgate's decisions file: DECISIONS_PAGE_SIZE). */
      'page-size': { type: 'string', default: String(DECISIONS_PAGE_SIZE) },
      'skip-inserts': { type: 'boolean', default: false },
      'loop-delay': { type: 'boolean', default: false },
      'loop-seconds': { type: 'string', default: '5' },
      'hot-cost': { type: 'boolean', default: false },
      indexes: { type: 'boolean', default: false },
      'hour-count-cost': { type: 'boolean', default: false },
      'store-only': { type: 'boolean', default: false },
      postgres: { type: 'boolean', default: false },
      rate: { type: 'string', default: '300' },
      intervals: { type: 'string' },
      seconds: { type: 'string', default: '10' },
      'wal-pages': { type: 'boolean', default: false },
      'store-seed': { type: 'string', default: '0' },
      'wal-writes': { type: 'string', default: '0' },
      checkpoints: { type: 'string' },
      caches: { type: 'string' },
      'by-tree': { type: 'boolean', default: false },
    },
  });
  pageSize = Number(values['page-size']);
  const records = Number(values.records);
  const runs = Number(values.runs);
  const lineBytes = Number(values['line-bytes']);
  const dir = mkdtempSync(join(tmpdir(), 'riskgate-store-bench-'));
  try {
    if (values.indexes) {
      await indexList(dir);
      return;
    }
    if (values['wal-pages']) {
      await walPages(dir, {
        seeded: Number(values.seed),
        rate: Number(values.rate),
        seconds: Number(values.seconds),
        runs,
        lineBytes,
        intervals: (values.intervals ?? '1000').split(',').map(Number),
        // Default: riskgate's bound (state-files.ts) against SQLite's default of 1,000 pages.
        checkpoints: (values.checkpoints ?? `1000,${DECISIONS_WAL_BYTES / pageSize}`).split(',').map(Number),
        // `default` (or none): SQLite's own page cache, 2,000 KiB.
        caches: (values.caches ?? 'default').split(',').map((c) => (c === 'default' ? undefined : Number(c))),
        byTree: values['by-tree'],
      });
      return;
    }
    if (values['hot-cost'] && values['store-only']) {
      // For a profile (--cpu-prof) of the shipped path alone: one run, store on.
      await hotRun(dir, undefined, true, Number(values.rate), Number(values.seconds), lineBytes);
      return;
    }
    if (values['hour-count-cost']) {
      const pg = values.postgres ? await startPostgres() : undefined;
      try {
        await hourCountCost(dir, pg, records, runs, lineBytes);
      } finally {
        await pg?.stop();
      }
      return;
    }
    if (values['hot-cost']) {
      const pg = values.postgres ? await startPostgres() : undefined;
      try {
        const target: DatabaseTarget | undefined = pg && { kind: 'postgres', url: pg.url };
        // `--intervals 100,250,1000`: the writer's interval, each against the store off, interleaved.
        const intervals =
          values.intervals === undefined ? [undefined] : values.intervals.split(',').map(Number);
        await hotCost(dir, target, {
          rate: Number(values.rate),
          seconds: Number(values.seconds),
          runs,
          lineBytes,
          intervals,
          storeSeed: Number(values['store-seed']),
        });
      } finally {
        await pg?.stop();
      }
      return;
    }
    if (!values['skip-inserts']) {
      const pg = await startPostgres();
      try {
        for (const engine of ['sqlite', 'postgres'] as const) {
          const perRun: InsertFigures[] = [];
          for (let r = 0; r < runs; r++) {
            const target: DatabaseTarget =
              engine === 'sqlite'
                ? { kind: 'sqlite', path: join(dir, `insert-${r}.sqlite`), pageSize }
                : { kind: 'postgres', url: pg.url };
            const database = await openDatabase(target, { migrations: ALL_MIGRATIONS });
            const sink = storeSink(
              database,
              engine === 'sqlite' ? join(dir, `insert-${r}.sqlite`) : undefined,
            );
            perRun.push(await insertRate(engine, sink, records, lineBytes));
            await database.close();
          }
          console.log(
            `insert ${engine}: ${median(perRun.map((f) => f.recordsPerSecond))} records/s (runs: ${perRun.map((f) => f.recordsPerSecond).join(', ')}); ` +
              `main event-loop delay p99 ${median(perRun.map((f) => f.loopDelayP99Ms))} ms, max ${median(perRun.map((f) => f.loopDelayMaxMs))} ms`,
          );
        }
      } finally {
        await pg.stop();
      }
    }
    const seeded = Number(values.seed);
    if (seeded > 0) {
      const pg = values.postgres ? await startPostgres() : undefined;
      try {
        await seededQueries(dir, pg, seeded, values, runs, lineBytes);
      } finally {
        await pg?.stop();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
