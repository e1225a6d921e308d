import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseTarget, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { type DecisionDb, pruneStep, writeOps } from '../src/decision-store/decision-batch.ts';
import type { DecisionReader } from '../src/decision-store/decision-query.ts';
import { createDecisionReader } from '../src/decision-store/decision-reader.ts';
import { storeOpOf } from '../src/decision-store/decision-rows.ts';
import type { DecisionTables } from '../src/decision-store/decision-tables.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { describeOnPostgres } from './support/postgres-server.ts';

/**
 * The decision store's writes and queries, the same on SQLite and on a real PostgreSQL: every
 * filter, cursor paging newest first, counts, a decision whole with its labels and actions (in
 * whatever order they arrive, written twice), and retention by age and by size.
 */

const T0 = Date.parse('2026-01-01T00:00:00Z');
const MINUTE = 60_000;

interface Spec {
  n: number;
  verdict: 'allow' | 'challenge' | 'deny';
  account: string;
  rules?: string[];
  shadow?: 'allow' | 'challenge' | 'deny';
  degraded?: boolean;
  ip?: string;
}

const idOf = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

function decisionLine(s: Spec): Record<string, unknown> {
  return {
    kind: 'decision',
    schemaVersion: 1,
    decisionId: idOf(s.n),
    at: new Date(T0 + s.n * MINUTE).toISOString(),
    request: {
      accountId: s.account,
      userId: `u-${s.account}`,
      ip: s.ip ?? '203.0.113.1',
      unitId: `${s.account}-web`,
    },
    policy: { name: 'login', revision: 'rev-a' },
    inputs: {},
    outcome: {
      verdict: s.verdict,
      score: s.n,
      matchedRules: (s.rules ?? []).map((id) => ({ id, description: id })),
    },
    actions: s.verdict === 'deny' ? [{ type: 'lock_out_user', source: 'rat', status: 'queued' }] : [],
    degraded: s.degraded ?? false,
    ...(s.shadow !== undefined && {
      shadow: {
        policy: { name: 'login', revision: 'rev-b' },
        verdict: s.shadow,
        score: 0,
        rules: ['candidate'],
      },
    }),
    timings: { totalMs: 12.5, evaluationMs: 1, calls: [] },
  };
}

const SPECS: Spec[] = [
  { n: 1, verdict: 'allow', account: 'alice' },
  { n: 2, verdict: 'challenge', account: 'bob', rules: ['new-browser'], shadow: 'challenge' },
  {
    n: 3,
    verdict: 'deny',
    account: 'mallory',
    rules: ['rat', 'new-browser'],
    shadow: 'allow',
    ip: '198.51.100.7',
  },
  { n: 4, verdict: 'allow', account: 'alice', degraded: true, shadow: 'allow' },
  { n: 5, verdict: 'challenge', account: 'carol', rules: ['new-browser'] },
];

const ops = (records: object[]) => records.map((r) => storeOpOf(r, T0)!);

function suite(name: string, target: () => DatabaseTarget) {
  describe(name, () => {
    let database: RiskgateDatabase;
    let db: DecisionDb;
    let reader: DecisionReader;
    const ids = async (filter: Parameters<DecisionReader['list']>[0]) =>
      (await reader.list(filter)).decisions.map((d) => d.decisionId);

    beforeAll(async () => {
      database = await openDatabase(target(), { migrations: ALL_MIGRATIONS });
      db = database.db.withTables<DecisionTables>();
      reader = createDecisionReader(db, () => ({
        engine: database.engine,
        writing: true,
        pending: 0,
        rejected: 0,
        dropped: 0,
        written: 0,
        lagMs: 0,
      }));
      // A label given before its decision is written (another worker's batch), then the rest.
      const early = {
        kind: 'feedback',
        decisionId: idOf(3),
        label: 'legit',
        labelledBy: 'key-a',
        at: new Date(T0).toISOString(),
      };
      await writeOps(db, ops([early]));
      const batch = [
        ...SPECS.map(decisionLine),
        {
          kind: 'action',
          key: `${idOf(3)}:lock_out_user:u-mallory`,
          decisionId: idOf(3),
          type: 'lock_out_user',
          target: 'u-mallory',
          status: 'done',
          attempts: 1,
          elapsedMs: 40,
          at: new Date(T0 + 10 * MINUTE).toISOString(),
        },
        {
          kind: 'feedback',
          decisionId: idOf(3),
          label: 'fraud',
          labelledBy: 'key-b',
          note: 'ring',
          at: new Date(T0 + 20 * MINUTE).toISOString(),
        },
      ];
      await writeOps(db, ops(batch));
      // Written again (a batch whose deadline passed but landed): nothing doubles.
      await writeOps(db, ops(batch));
      // An older outcome arriving late does not hide the newer one.
      await writeOps(
        db,
        ops([{ ...batch[5]!, status: 'failed', at: new Date(T0 + 5 * MINUTE).toISOString() }]),
      );
    });
    afterAll(() => database?.close());

    it('lists newest first under every filter', async () => {
      expect(await ids({})).toEqual([5, 4, 3, 2, 1].map(idOf));
      expect(await ids({ verdict: 'challenge' })).toEqual([5, 2].map(idOf));
      expect(await ids({ accountId: 'alice' })).toEqual([4, 1].map(idOf));
      expect(await ids({ userId: 'u-bob' })).toEqual([idOf(2)]);
      expect(await ids({ ip: '198.51.100.7' })).toEqual([idOf(3)]);
      expect(await ids({ unitId: 'carol-web' })).toEqual([idOf(5)]);
      expect(await ids({ rule: 'new-browser' })).toEqual([5, 3, 2].map(idOf));
      expect(await ids({ rule: 'candidate' })).toEqual([]); // the shadow's rules are not the active policy's
      expect(await ids({ degraded: true })).toEqual([idOf(4)]);
      expect(await ids({ degraded: false })).toHaveLength(4);
      expect(await ids({ label: 'fraud' })).toEqual([idOf(3)]);
      expect(await ids({ label: 'legit' })).toEqual([]);
      expect(await ids({ label: 'none' })).toEqual([5, 4, 2, 1].map(idOf));
      expect(await ids({ shadowDisagrees: true })).toEqual([idOf(3)]);
      expect(await ids({ shadowDisagrees: false })).toEqual([4, 2].map(idOf));
      expect(await ids({ fromMs: T0 + 2 * MINUTE, toMs: T0 + 4 * MINUTE })).toEqual([3, 2].map(idOf));
      expect(await ids({ rule: 'new-browser', verdict: 'challenge', fromMs: T0 + 3 * MINUTE })).toEqual([
        idOf(5),
      ]);
    });

    it('pages by cursor, each decision once', async () => {
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await reader.list({ limit: 2, ...(cursor !== undefined && { cursor }) });
        seen.push(...page.decisions.map((d) => d.decisionId));
        cursor = page.nextCursor;
        pages++;
      } while (cursor !== undefined);
      expect(pages).toBe(3);
      expect(seen).toEqual([5, 4, 3, 2, 1].map(idOf));
      const filtered = await reader.list({ rule: 'new-browser', limit: 2 });
      expect(filtered.decisions.map((d) => d.decisionId)).toEqual([5, 3].map(idOf));
      const rest = await reader.list({ rule: 'new-browser', limit: 2, cursor: filtered.nextCursor! });
      expect(rest).toEqual({ decisions: [expect.objectContaining({ decisionId: idOf(2) })] });
    });

    it('counts by verdict over a filter', async () => {
      expect(await reader.countByVerdict({})).toEqual({ allow: 2, challenge: 2, deny: 1, total: 5 });
      expect(await reader.countByVerdict({ rule: 'new-browser', limit: 1 })).toEqual({
        allow: 0,
        challenge: 2,
        deny: 1,
        total: 3,
      });
    });

    it('counts by verdict per slice of time, oldest first, empty slices left out', async () => {
      // One decision a minute (T0 + 1..5 min): by the minute, five slices of one.
      const byMinute = await reader.countOverTime({}, MINUTE);
      expect(byMinute.map((s) => [s.atMs, s.total])).toEqual(
        [1, 2, 3, 4, 5].map((k) => [T0 + k * MINUTE, 1]),
      );
      // By 2 minutes: [2,3] and [4,5] share a slice; the counts add up to the filter's.
      const byTwo = await reader.countOverTime({}, 2 * MINUTE);
      expect(byTwo.map((s) => [s.atMs, s.total])).toEqual([
        [T0, 1],
        [T0 + 2 * MINUTE, 2],
        [T0 + 4 * MINUTE, 2],
      ]);
      const all = await reader.countByVerdict({});
      for (const v of ['allow', 'challenge', 'deny'] as const)
        expect(byTwo.reduce((n, s) => n + s[v], 0)).toBe(all[v]);
      // The filter applies as to the counts.
      const rule = await reader.countOverTime({ rule: 'new-browser' }, 60 * MINUTE);
      expect(rule).toEqual([{ atMs: T0, allow: 0, challenge: 2, deny: 1, total: 3 }]);
    });

    it('gets a decision whole: its summary, line, labels oldest first, and the newest action outcome', async () => {
      const d = await reader.get(idOf(3));
      expect(d).toMatchObject({
        decisionId: idOf(3),
        at: new Date(T0 + 3 * MINUTE).toISOString(),
        verdict: 'deny',
        score: 3,
        degraded: false,
        rules: expect.arrayContaining(['rat', 'new-browser']),
        accountId: 'mallory',
        userId: 'u-mallory',
        ip: '198.51.100.7',
        unitId: 'mallory-web',
        policy: { name: 'login', revision: 'rev-a' },
        shadowVerdict: 'allow',
        label: 'fraud',
        totalMs: 12.5,
        line: { kind: 'decision', decisionId: idOf(3) },
        labels: [
          { label: 'legit', labelledBy: 'key-a', at: new Date(T0).toISOString() },
          { label: 'fraud', labelledBy: 'key-b', note: 'ring', at: new Date(T0 + 20 * MINUTE).toISOString() },
        ],
        actions: [
          {
            actionId: `${idOf(3)}:lock_out_user:u-mallory`,
            type: 'lock_out_user',
            target: 'u-mallory',
            status: 'done',
            at: new Date(T0 + 10 * MINUTE).toISOString(),
            detail: { attempts: 1, elapsedMs: 40 },
          },
        ],
      });
      expect(d!.rules).toHaveLength(2);
      expect(await reader.get(idOf(99))).toBeUndefined();
    });

    it('retention: deletes the oldest past the age, then past the size, in bounded steps, from every table', async () => {
      // Five decisions of the same line size; age: keep those at or after T0 + 2.5 min.
      const now = T0 + 3 * MINUTE;
      const age = { maxAgeMs: MINUTE / 2, maxBytes: 1e12, chunk: 1 };
      expect(await pruneStep(db, age, now)).toBe(1);
      expect(await pruneStep(db, age, now)).toBe(1);
      expect(await pruneStep(db, age, now)).toBe(0);
      expect(await ids({})).toEqual([5, 4, 3].map(idOf));
      const lines = await db.selectFrom('decision').select(['decision_id', 'line_bytes']).execute();
      const total = lines.reduce((sum, l) => sum + Number(l.line_bytes), 0);
      const oldest = Number(lines.find((l) => l.decision_id === idOf(3))!.line_bytes);
      // One byte too many: the oldest (3, with its rules, labels and action) goes, and only it.
      const size = { maxAgeMs: 1e12, maxBytes: total - 1, chunk: 10 };
      expect(oldest).toBeGreaterThan(1);
      expect(await pruneStep(db, size, now)).toBe(1);
      expect(await pruneStep(db, size, now)).toBe(0);
      expect(await ids({})).toEqual([5, 4].map(idOf));
      for (const table of ['decision_rule', 'decision_label', 'decision_action'] as const) {
        const left = await db
          .selectFrom(table)
          .select('decision_id')
          .where('decision_id', '=', idOf(3))
          .execute();
        expect(left, table).toEqual([]);
      }
    });
  });
}

suite('the decision store on SQLite', () => ({ kind: 'memory' }));

describeOnPostgres('on PostgreSQL', (pg) => {
  suite('the decision store on PostgreSQL', () => ({ kind: 'postgres', url: pg.url }));
});
