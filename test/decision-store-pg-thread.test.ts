import pg from 'pg';
import { expect, it } from 'vitest';
import { openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { writeOps } from '../src/decision-store/decision-batch.ts';
import type { Reject } from '../src/decision-store/decision-rejects.ts';
import { type StoreOp, storeOpOf } from '../src/decision-store/decision-rows.ts';
import { storeSink } from '../src/decision-store/decision-store-component.ts';
import { DecisionStoreWriter } from '../src/decision-store/decision-store-writer.ts';
import type { DecisionTables } from '../src/decision-store/decision-tables.ts';
import { pgThreadSink } from '../src/decision-store/pg-thread-sink.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { describeOnPostgres, oneRiskgateOn } from './support/postgres-server.ts';

/**
 * The decision store's PostgreSQL writer thread (src/decision-store/pg-thread-sink.ts): the same
 * rows as kysely's path (`writeOps`) for the same batch, duplicates and late outcomes included; a
 * poison row set aside with the rest written and counted; a connection killed or a server frozen
 * mid-run (writes fail and are retried, counted, nothing lost below the buffer, no crash, the
 * thread connects again); and its connection gone once the store is closed.
 */

const WRITER_APP = 'riskgate decision store writer';
const T0 = Date.parse('2026-11-01T00:00:00Z');

const decision = (id: string, extra: Record<string, unknown> = {}) => ({
  kind: 'decision',
  decisionId: id,
  at: new Date(T0).toISOString(),
  request: { accountId: 'acme', userId: 'u1', ip: '10.0.0.1' },
  outcome: { verdict: 'challenge', score: 61.5, matchedRules: [{ id: 'new-device' }, { id: 'rat' }] },
  shadow: { verdict: 'deny', policy: { revision: 'r2' }, rules: ['rat'] },
  policy: { name: 'login', revision: 'r1' },
  timings: { totalMs: 12.25 },
  ...extra,
});

/** A batch with every kind of row, its keys repeated (the last of each kept) and a late outcome. */
function mixedBatch(): StoreOp[] {
  const records: object[] = [
    decision('d1'),
    decision('d2', { degraded: true }),
    decision('d1', { outcome: { verdict: 'allow', score: 1 } }),
    {
      kind: 'action',
      decisionId: 'd1',
      key: 'a1',
      type: 'lock',
      target: 'u1',
      status: 'queued',
      at: new Date(T0 + 5).toISOString(),
    },
    {
      kind: 'action',
      decisionId: 'd1',
      key: 'a1',
      type: 'lock',
      target: 'u1',
      status: 'done',
      at: new Date(T0 + 9).toISOString(),
      attempt: 2,
    },
    {
      kind: 'feedback',
      decisionId: 'd1',
      label: 'legit',
      operator: 'ann',
      at: new Date(T0 + 20).toISOString(),
    },
    {
      kind: 'feedback',
      decisionId: 'd1',
      label: 'legit',
      operator: 'ann',
      at: new Date(T0 + 20).toISOString(),
      note: 'twice',
    },
    {
      kind: 'outcome',
      decisionId: 'd2',
      type: 'step_up',
      value: 'failed',
      reportedBy: 'k1',
      occurredAt: new Date(T0 + 30).toISOString(),
    },
    {
      kind: 'outcome',
      decisionId: 'd2',
      type: 'account_event',
      value: 'user_reported_fraud',
      reportedBy: 'k1',
    },
    { kind: 'outcome', decisionId: 'd3', type: 'step_up', value: 'passed', reportedBy: 'k1' },
  ];
  return records.map((r) => storeOpOf(r, T0)!);
}

/** Every table's rows, in a stable order, numbers as numbers (bigint columns come back as text). */
async function dump(database: RiskgateDatabase) {
  const db = database.db.withTables<DecisionTables>();
  const all = async (table: keyof DecisionTables, order: string[]) =>
    (
      await db
        .selectFrom(table)
        .selectAll()
        .orderBy(order as never)
        .execute()
    ).map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([k, v]) => [k, typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v]),
      ),
    );
  return {
    decision: await all('decision', ['decision_id']),
    decision_rule: await all('decision_rule', ['decision_id', 'policy', 'rule_id']),
    decision_action: await all('decision_action', ['action_id']),
    decision_label: await all('decision_label', ['decision_id', 'at_ms', 'labelled_by']),
    decision_outcome: await all('decision_outcome', ['decision_id', 'type', 'value']),
  };
}

/** `text` run once on its own connection to `url`: the test's hand, the store's connections untouched. */
async function queryOnce<R extends pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

async function writerConnections(url: string): Promise<number> {
  const rows = await queryOnce<{ n: number }>(
    url,
    'select count(*)::int as n from pg_stat_activity where application_name = $1',
    [WRITER_APP],
  );
  return rows[0]!.n;
}

describeOnPostgres('the decision store PostgreSQL writer thread', (server) => {
  /** A fresh database on the server, migrated, with timeouts short enough for a test. */
  async function freshDatabase(name: string, timeoutMs = 5000): Promise<RiskgateDatabase> {
    return openDatabase(
      { kind: 'postgres', url: await server.createDatabase(name) },
      { migrations: ALL_MIGRATIONS, statementTimeoutMs: timeoutMs, connectTimeoutMs: timeoutMs },
    );
  }

  it('writes the same rows as kysely’s path: the last of each key, the newest action, the labels set', async () => {
    const viaThread = await freshDatabase('same_thread');
    const viaKysely = await freshDatabase('same_kysely');
    const sink = storeSink(viaThread, undefined);
    try {
      expect(viaThread.postgres).toBeDefined();
      const ops = mixedBatch();
      await sink.write(ops);
      await writeOps(viaKysely.db.withTables<DecisionTables>(), ops);
      // Again, and an older action outcome arriving late: idempotent, the newer outcome kept.
      const late = storeOpOf(
        {
          kind: 'action',
          decisionId: 'd1',
          key: 'a1',
          type: 'lock',
          target: 'u1',
          status: 'queued',
          at: new Date(T0).toISOString(),
        },
        T0,
      )!;
      await sink.write([...ops, late]);
      await writeOps(viaKysely.db.withTables<DecisionTables>(), [...ops, late]);
      const rows = await dump(viaThread);
      expect(rows).toEqual(await dump(viaKysely));
      expect(rows.decision.map((d) => [d.decision_id, d.verdict, d.label, d.outcome_label])).toEqual([
        ['d1', 'allow', 'legit', null],
        ['d2', 'challenge', 'fraud', 'fraud'],
      ]);
      expect(rows.decision_action).toMatchObject([{ action_id: 'a1', status: 'done', at_ms: T0 + 9 }]);
      expect(rows.decision_label).toMatchObject([{ decision_id: 'd1', note: 'twice' }]);
    } finally {
      await sink.close();
      await viaThread.close();
      await viaKysely.close();
    }
  }, 60_000);

  it('sets a poison row aside, writes the rest of its batch, and counts both', async () => {
    const database = await freshDatabase('poison');
    const rejects: Reject[] = [];
    const logged: Record<string, unknown>[] = [];
    const writer = new DecisionStoreWriter({
      sink: storeSink(database, undefined),
      keepRejected: async (r) => {
        rejects.push(...r);
      },
      log: (line) => logged.push(line),
    });
    try {
      for (let i = 0; i < 9; i++) writer.push(decision(`ok-${i}`));
      // U+0000, which PostgreSQL refuses in text (SQLSTATE 22021).
      writer.push(decision('poison', { request: { accountId: 'ali\u0000ce' } }));
      expect(await writer.flush(20_000)).toBe(true);
      expect(writer.status()).toMatchObject({
        written: 9,
        rejected: 1,
        dropped: 0,
        pending: 0,
        writing: true,
      });
      expect(rejects.map((r) => (r.record as { decisionId: string }).decisionId)).toEqual(['poison']);
      expect(rejects[0]!.error).toContain('0x00');
      expect(logged).toMatchObject([
        { msg: 'decision store: a record the database refused is set aside', decisionId: 'poison' },
      ]);
      const stored = await database.db
        .withTables<DecisionTables>()
        .selectFrom('decision')
        .select('decision_id')
        .execute();
      expect(stored.map((d) => d.decision_id).sort()).toEqual(Array.from({ length: 9 }, (_, i) => `ok-${i}`));
    } finally {
      await writer.close(5000);
      await database.close();
    }
  }, 60_000);

  it('a connection killed between batches: the next batch is written on a new one, nothing failed', async () => {
    const database = await freshDatabase('killed');
    const changes: (string | undefined)[] = [];
    const writer = new DecisionStoreWriter({
      sink: storeSink(database, undefined),
      onWritingChange: (error) => changes.push(error),
    });
    try {
      writer.push(decision('before'));
      expect(await writer.flush(20_000)).toBe(true);
      expect(await writerConnections(server.url)).toBe(1);
      await queryOnce(
        server.url,
        'select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1',
        [WRITER_APP],
      );
      writer.push(decision('after'));
      expect(await writer.flush(20_000)).toBe(true);
      expect(writer.status()).toMatchObject({ written: 2, dropped: 0, rejected: 0, writing: true });
      // Found gone (its error heard, or its write failing): reconnected at once, never a failed batch.
      expect(changes).toEqual([]);
      const stored = await database.db
        .withTables<DecisionTables>()
        .selectFrom('decision')
        .select('decision_id')
        .execute();
      expect(stored.map((d) => d.decision_id).sort()).toEqual(['after', 'before']);
    } finally {
      await writer.close(5000);
      await database.close();
    }
  }, 60_000);

  it('a server frozen mid-run: writes fail and wait, past the buffer exactly counted dropped, then caught up', async () => {
    const database = await freshDatabase('frozen', 300);
    const changes: (string | undefined)[] = [];
    const writer = new DecisionStoreWriter({
      sink: storeSink(database, undefined),
      maxPending: 5,
      writeTimeoutMs: 200,
      backoff: { initialMs: 20, maxMs: 200 },
      onWritingChange: (error) => changes.push(error),
    });
    try {
      writer.push(decision('warm'));
      expect(await writer.flush(20_000)).toBe(true);
      server.pause();
      try {
        for (let i = 0; i < 8; i++) writer.push(decision(`frozen-${i}`));
        await eventually(() => writer.status().writing === false, {
          what: 'writes failing',
          timeoutMs: 10_000,
        });
        expect(writer.status()).toMatchObject({ pending: 5, dropped: 3 });
      } finally {
        server.resume();
      }
      expect(await writer.flush(30_000)).toBe(true);
      expect(writer.status()).toMatchObject({ written: 6, dropped: 3, pending: 0, writing: true });
      expect(changes.at(-1)).toBeUndefined();
      expect(changes[0]).toEqual(expect.any(String));
      const stored = await database.db
        .withTables<DecisionTables>()
        .selectFrom('decision')
        .select('decision_id')
        .execute();
      expect(stored).toHaveLength(6);
    } finally {
      server.resume();
      await writer.close(5000);
      await database.close();
    }
  }, 60_000);

  it('closing the store ends the thread and its connection, even with the server frozen', async () => {
    const database = await freshDatabase('closing');
    const sink = pgThreadSink(database.postgres!, database.db.withTables<DecisionTables>());
    await sink.write([storeOpOf(decision('one'), T0)!]);
    expect(await writerConnections(server.url)).toBe(1);
    await sink.close();
    await eventually(async () => (await writerConnections(server.url)) === 0, {
      what: 'the writer connection gone',
    });
    // Frozen mid-write: the close still ends within its bound (the write abandoned, never hung on).
    const again = pgThreadSink(database.postgres!, database.db.withTables<DecisionTables>());
    await again.write([storeOpOf(decision('two'), T0)!]);
    server.pause();
    try {
      const stuck = again.write([storeOpOf(decision('three'), T0)!]).catch((e: unknown) => e);
      await again.close();
      expect(await stuck).toBeInstanceOf(Error);
    } finally {
      server.resume();
    }
    await eventually(async () => (await writerConnections(server.url)) === 0, {
      what: 'the writer connection gone',
    });
    await database.close();
  }, 60_000);

  it('a riskgate on PostgreSQL writes its decisions from the thread, and its stop ends the thread’s connection', async () => {
    const url = await server.createDatabase('riskgate_stop');
    const h = await startHarness({ env: oneRiskgateOn(url) });
    let stopped = false;
    try {
      const { status } = await h.decide(demoRequest('alice', undefined));
      expect(status).toBe(200);
      await eventually(async () => (await writerConnections(server.url)) === 1, {
        what: 'the writer connected',
      });
      await h.stop();
      stopped = true;
      expect(await queryOnce(url, 'select count(*)::int as n from decision', [])).toEqual([{ n: 1 }]);
      await eventually(async () => (await writerConnections(server.url)) === 0, {
        what: 'the writer connection gone',
      });
    } finally {
      if (!stopped) await h.stop();
    }
  }, 60_000);
});
