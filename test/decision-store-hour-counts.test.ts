import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { type DatabaseTarget, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { type DecisionSink, kyselySink, pruneStep, writeOps } from '../src/decision-store/decision-batch.ts';
import type { DecisionFilter } from '../src/decision-store/decision-query.ts';
import { createDecisionReader } from '../src/decision-store/decision-reader.ts';
import { type StoreOp, storeOpOf } from '../src/decision-store/decision-rows.ts';
import { storeSink } from '../src/decision-store/decision-store-component.ts';
import { DecisionStoreWriter, STORE_BATCH_MAX } from '../src/decision-store/decision-store-writer.ts';
import type { DecisionTables } from '../src/decision-store/decision-tables.ts';
import { wireBatch } from '../src/decision-store/decision-wire.ts';
import { HOUR_MS, type HourTables, hourDriftCheck } from '../src/decision-store/hour-counts.ts';
import { wireWriter } from '../src/decision-store/sqlite-batch-wire.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * The counts per hour (src/decision-store/hour-counts.ts) are a second copy of what the rows say:
 * after inserts through the writer threads (a batch written twice), retention cutting an hour in
 * two, a restart, a refused record and a full disk, each hour table equals a count of the rows,
 * and the console's counts read through them equal a count of the rows for ranges cutting hours,
 * on SQLite and on PostgreSQL.
 */

const T0 = Date.parse('2026-03-01T00:00:00Z');
const MINUTE = 60_000;
const VERDICTS = ['allow', 'challenge', 'deny'] as const;
const RULES = ['rat', 'new-browser', 'tor-exit'];

const idOf = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

/** Decision `n`, 17 minutes after `n - 1`: a few per hour, every verdict, some rules and shadows. */
function record(n: number, accountId = `acct-${n % 7}`): Record<string, unknown> {
  const verdict = VERDICTS[n % 3]!;
  return {
    kind: 'decision',
    decisionId: idOf(n),
    at: new Date(T0 + n * 17 * MINUTE).toISOString(),
    request: { accountId },
    policy: { name: 'login', revision: n < 40 ? 'rev-a' : 'rev-b' },
    outcome: {
      verdict,
      score: n,
      matchedRules: RULES.filter((_, i) => n % (i + 2) === 0).map((id) => ({ id })),
    },
    ...(n % 2 === 0 && {
      shadow: { policy: { revision: 'rev-s' }, verdict: VERDICTS[(n + 1) % 3], rules: ['candidate'] },
    }),
  };
}

/** The record refused (with rules: on SQLite its rule is what breaks). */
const POISON = 204;

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

const hourOf = (atMs: number) => Math.floor(atMs / HOUR_MS) * HOUR_MS;

/** The hour tables as stored, and as a count of the rows would have them: the two must be equal. */
async function bothCounts(database: RiskgateDatabase) {
  const db = database.db.withTables<DecisionTables & HourTables>();
  const decisions = await db.selectFrom('decision').selectAll().execute();
  const verdictOf = new Map(decisions.map((d) => [d.decision_id, d.verdict]));
  const rules = await db.selectFrom('decision_rule').selectAll().execute();
  const tally = (keys: string[]) => {
    const counts = new Map<string, number>();
    for (const k of keys) counts.set(k, (counts.get(k) ?? 0) + 1);
    return [...counts].sort();
  };
  const fromRows = {
    hours: tally(
      decisions.map((d) =>
        [
          hourOf(Number(d.at_ms)),
          d.verdict,
          d.policy_revision,
          d.shadow_revision ?? '',
          d.shadow_verdict ?? '',
        ].join('|'),
      ),
    ),
    rules: tally(
      rules.map((r) =>
        [
          r.rule_id,
          r.policy,
          hourOf(Number(r.at_ms)),
          r.policy_revision,
          verdictOf.get(r.decision_id) ?? '',
        ].join('|'),
      ),
    ),
  };
  const stored = {
    hours: (await db.selectFrom('decision_hour').selectAll().execute())
      .map(
        (h) =>
          [
            [Number(h.hour_ms), h.verdict, h.policy_revision, h.shadow_revision, h.shadow_verdict].join('|'),
            Number(h.decisions),
          ] as [string, number],
      )
      .sort(),
    rules: (await db.selectFrom('decision_rule_hour').selectAll().execute())
      .map(
        (h) =>
          [
            [h.rule_id, h.policy, Number(h.hour_ms), h.policy_revision, h.verdict].join('|'),
            Number(h.fires),
          ] as [string, number],
      )
      .sort(),
  };
  return { stored, fromRows, decisions: decisions.length, rules: rules.length };
}

async function expectHourCountsExact(database: RiskgateDatabase): Promise<number> {
  const { stored, fromRows, decisions } = await bothCounts(database);
  expect(stored).toEqual(fromRows);
  return decisions;
}

/** `filter`'s counts by verdict from the rows alone, in this process. */
async function rowCounts(database: RiskgateDatabase, f: DecisionFilter) {
  const db = database.db.withTables<DecisionTables>();
  let q = db.selectFrom('decision').select(['decision_id', 'verdict', 'at_ms']);
  if (f.fromMs !== undefined) q = q.where('at_ms', '>=', f.fromMs);
  if (f.toMs !== undefined) q = q.where('at_ms', '<', f.toMs);
  if (f.verdict !== undefined) q = q.where('verdict', '=', f.verdict);
  if (f.rule !== undefined)
    q = q.where('decision_id', 'in', (eb) =>
      eb
        .selectFrom('decision_rule')
        .select('decision_id')
        .where('rule_id', '=', f.rule!)
        .where('policy', '=', 'active'),
    );
  const rows = await q.execute();
  const counts = { allow: 0, challenge: 0, deny: 0, total: rows.length };
  for (const r of rows) counts[r.verdict as keyof typeof counts]++;
  return { counts, rows };
}

async function drain(sink: DecisionSink, records: object[]): Promise<DecisionStoreWriter> {
  const writer = new DecisionStoreWriter({ sink, keepRejected: async () => {} });
  for (const r of records) writer.push(r);
  expect(await writer.flush(20_000)).toBe(true);
  return writer;
}

function suite(engine: string, target: () => DatabaseTarget, poison: (sink: DecisionSink) => DecisionSink) {
  describe(`the hour counts on ${engine}`, () => {
    let database: RiskgateDatabase;
    const sinkOf = () => {
      const t = target();
      return storeSink(database, t.kind === 'sqlite' ? t.path : undefined);
    };
    const open = async () => {
      database = await openDatabase(target(), { migrations: ALL_MIGRATIONS });
      return sinkOf();
    };
    afterAll(() => database?.close());

    it('equal a count of the rows after inserts (a batch written twice), retention cutting an hour, and a restart', async () => {
      let sink = await open();
      let writer = await drain(
        sink,
        range(0, 60).map((n) => record(n)),
      );
      // A batch whose deadline passed is written again: its rows are kept once, and counted once.
      for (const n of range(0, 10)) writer.push(record(n));
      expect(await writer.flush(20_000)).toBe(true);
      expect(await expectHourCountsExact(database)).toBe(60);
      // Retention to the middle of an hour (decision 20 is at 5 h 40 min): the hour left half.
      const cutoffMs = T0 + 20 * 17 * MINUTE - 1;
      const nowMs = cutoffMs + 1000 * 86_400_000;
      const retention = { maxAgeMs: nowMs - cutoffMs, maxBytes: 1e12, chunk: 7 };
      while ((await sink.prune(retention, nowMs)) > 0) {}
      expect(hourOf(cutoffMs)).not.toBe(cutoffMs);
      expect(await expectHourCountsExact(database)).toBe(40);
      await writer.close(5000);
      await database.close();
      // A restart: the migrations find the tables, and the counts go on from the stored ones.
      sink = await open();
      writer = await drain(sink, [...range(55, 90).map((n) => record(n))]);
      expect(await expectHourCountsExact(database)).toBe(70);
      await writer.close(5000);
    });

    it('count exactly what the rows count over ranges cutting hours, by verdict, by rule, per slice', async () => {
      const reader = createDecisionReader(database.db.withTables<DecisionTables>(), () => {
        throw new Error('unused');
      });
      const edges = [undefined, T0, T0 + 6 * HOUR_MS, T0 + 6 * HOUR_MS + 7 * MINUTE, T0 + 13 * HOUR_MS + 1];
      for (const fromMs of edges) {
        for (const toMs of [...edges.slice(1), T0 + 25 * HOUR_MS - 1, undefined]) {
          for (const more of [
            {},
            { verdict: 'deny' as const },
            { rule: 'rat' },
            { rule: 'new-browser', verdict: 'allow' as const },
          ]) {
            const f: DecisionFilter = { fromMs, toMs, ...more };
            const { counts, rows } = await rowCounts(database, f);
            expect(await reader.countByVerdict(f), JSON.stringify(f)).toEqual(counts);
            for (const step of [3 * HOUR_MS, 15 * MINUTE]) {
              const slices = new Map<number, number>();
              for (const r of rows) {
                const at = Math.floor(Number(r.at_ms) / step) * step;
                slices.set(at, (slices.get(at) ?? 0) + 1);
              }
              const chart = await reader.countOverTime(f, step);
              expect(
                chart.map((s) => [s.atMs, s.total]),
                `${JSON.stringify(f)} per ${step}`,
              ).toEqual([...slices].sort((a, b) => a[0] - b[0]));
            }
          }
        }
      }
    });

    it('a check of an hour against its rows finds it exact, and finds a count made wrong, logged and counted', async () => {
      const lines: Record<string, unknown>[] = [];
      const db = database.db.withTables<DecisionTables & HourTables>();
      const check = hourDriftCheck({
        db: database.db.withTables<DecisionTables>(),
        maxAgeMs: 30 * 86_400_000,
        log: (line) => lines.push(line),
      });
      // Decisions 29 to 31 (every verdict, rules, shadows) are in this hour.
      const hourMs = hourOf(T0 + 30 * 17 * MINUTE);
      try {
        expect(await check.check(hourMs)).toBe(0);
        expect(await check.check(hourOf(T0) - HOUR_MS)).toBe(0);
        await db
          .insertInto('decision_hour')
          .values({
            hour_ms: hourMs,
            verdict: 'deny',
            policy_revision: 'rev-x',
            shadow_revision: '',
            shadow_verdict: '',
            decisions: 3,
          })
          .execute();
        await db
          .updateTable('decision_rule_hour')
          .set((eb) => ({ fires: eb('fires', '+', 1) }))
          .where('hour_ms', '=', hourMs)
          .where('rule_id', '=', 'rat')
          .where('policy', '=', 'active')
          .execute();
        expect(await check.check(hourMs)).toBe(4);
        expect(check.drift()).toBe(4);
        expect(lines).toEqual([
          expect.objectContaining({ level: 'error', hour: new Date(hourMs).toISOString(), drift: 4 }),
        ]);
      } finally {
        check.stop();
        await db.deleteFrom('decision_hour').where('policy_revision', '=', 'rev-x').execute();
        await db
          .updateTable('decision_rule_hour')
          .set((eb) => ({ fires: eb('fires', '-', 1) }))
          .where('hour_ms', '=', hourMs)
          .where('rule_id', '=', 'rat')
          .where('policy', '=', 'active')
          .execute();
      }
      expect(await check.check(hourMs)).toBe(0);
    });

    it('count nothing of a refused record, and the rest of its batch', async () => {
      const writer = new DecisionStoreWriter({ sink: poison(sinkOf()), keepRejected: async () => {} });
      for (const n of range(200, 206)) writer.push(record(n, n === POISON ? 'poison\u0000' : undefined));
      expect(await writer.flush(20_000)).toBe(true);
      expect(writer.status()).toMatchObject({ written: 5, rejected: 1 });
      expect(await expectHourCountsExact(database)).toBe(75);
      await writer.close(5000);
    });

    it('take a full batch (STORE_BATCH_MAX records) in one write: every row stored, and counted once', async () => {
      // Issue 32: a batch is a second's records up to STORE_BATCH_MAX; one that size must land whole
      // on each engine (SQLite's statements per row, PostgreSQL's arrays per column).
      const sink = sinkOf();
      const sizes: number[] = [];
      const counting: DecisionSink = {
        ...sink,
        write: (ops) => {
          sizes.push(ops.length);
          return sink.write(ops);
        },
      };
      const before = await expectHourCountsExact(database);
      const writer = await drain(
        counting,
        range(1000, 1000 + STORE_BATCH_MAX).map((n) => record(n)),
      );
      expect(sizes).toEqual([STORE_BATCH_MAX]);
      expect(await expectHourCountsExact(database)).toBe(before + STORE_BATCH_MAX);
      await writer.close(5000);
    });
  });
}

/** On SQLite a rule without its decision id is refused (NOT NULL): what test/decision-store-sqlite-thread.test.ts does. */
function sqlitePoison(sink: DecisionSink): DecisionSink {
  const broken = (op: StoreOp): StoreOp =>
    op.kind === 'decision' && op.row.decision_id === idOf(POISON)
      ? { ...op, rules: op.rules.map((r) => ({ ...r, decision_id: null as unknown as string })) }
      : op;
  return { ...sink, write: (ops) => sink.write(ops.map(broken)) };
}

const dir = tempDirForBlock('riskgate-hour-counts-');

suite(
  'SQLite (the writer thread)',
  () => ({ kind: 'sqlite', path: join(dir, 'decisions.sqlite') }),
  sqlitePoison,
);

describe("the SQLite writer's own hour counts", () => {
  it('count a batch written twice (a retry that had landed) once, a row repeated in it once, and a late rule under its stored verdict', async () => {
    const path = join(dir, 'wire.sqlite');
    const database = await openDatabase({ kind: 'sqlite', path }, { migrations: ALL_MIGRATIONS });
    const file = new DatabaseSync(path, { timeout: 5000 });
    try {
      const write = wireWriter(file);
      const ops = range(0, 30).map((n) => storeOpOf(record(n), 0)!);
      const batch = wireBatch([...ops, ops[3]!]);
      write(batch);
      write(batch);
      expect(await expectHourCountsExact(database)).toBe(30);
      // A rule row whose decision an earlier batch stored, the batch saying another verdict: the
      // decision is not written again, its new rule counts under the verdict stored.
      const op = ops[4]! as Extract<StoreOp, { kind: 'decision' }>;
      expect(op.row.verdict).not.toBe('allow');
      write(
        wireBatch([
          { ...op, row: { ...op.row, verdict: 'allow' }, rules: [{ ...op.rules[0]!, rule_id: 'late-rule' }] },
        ]),
      );
      const { fromRows } = await bothCounts(database);
      expect(
        fromRows.rules.some(
          ([key]) => key.startsWith('late-rule|active|') && key.endsWith(`|${op.row.verdict}`),
        ),
      ).toBe(true);
      expect(await expectHourCountsExact(database)).toBe(30);
    } finally {
      file.close();
      await database.close();
    }
  });
});

describe('the hour counts on SQLite with a full disk', () => {
  it('a batch that fills the disk counts nothing; the counts stay those of the rows', async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations: ALL_MIGRATIONS });
    try {
      const db = database.db.withTables<DecisionTables>();
      await writeOps(
        db,
        range(0, 30).map((n) => storeOpOf(record(n), 0)!),
      );
      const before = await bothCounts(database);
      // The database may grow by a few pages only: a batch of large lines meets SQLITE_FULL.
      const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(db);
      await sql.raw(`pragma max_page_count = ${Number(rows[0]!.page_count) + 4}`).execute(db);
      const big = range(30, 60).map(
        (n) => storeOpOf({ ...record(n), inputs: { pad: 'x'.repeat(20_000) } }, 0)!,
      );
      await expect(writeOps(db, big)).rejects.toThrow();
      expect(await bothCounts(database)).toEqual(before);
      expect(await expectHourCountsExact(database)).toBe(30);
      // Room again: the batch lands, counted once.
      await sql.raw('pragma max_page_count = 1073741823').execute(db);
      await kyselySink(db).write(big);
      expect(await expectHourCountsExact(database)).toBe(60);
      // Written again (a retry that had landed): nothing counted twice.
      await writeOps(db, big);
      expect(await expectHourCountsExact(database)).toBe(60);
      // Retention through kysely's path too.
      expect(await pruneStep(db, { maxAgeMs: 0, maxBytes: 1e12, chunk: 1000 }, T0 + 45 * 17 * MINUTE)).toBe(
        45,
      );
      expect(await expectHourCountsExact(database)).toBe(15);
    } finally {
      await database.close();
    }
  });
});

describeOnPostgres('on PostgreSQL', (pg) => {
  // A U+0000 in a text: PostgreSQL refuses the row ("invalid byte sequence ... 0x00").
  suite(
    'PostgreSQL (the writer thread)',
    () => ({ kind: 'postgres', url: pg.url }),
    (sink) => sink,
  );
});
