import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../src/database/database.ts';
import { isRefusedRow } from '../src/database/refused-row.ts';
import type { DecisionSink } from '../src/decision-store/decision-batch.ts';
import type { Reject } from '../src/decision-store/decision-rejects.ts';
import { type StoreOp, storeOpOf } from '../src/decision-store/decision-rows.ts';
import { DecisionStoreWriter } from '../src/decision-store/decision-store-writer.ts';
import type { DecisionTables } from '../src/decision-store/decision-tables.ts';
import { sqliteThreadSink } from '../src/decision-store/sqlite-thread-sink.ts';
import {
  DECISIONS_WRITER_CACHE_KIB,
  openWriterConnections,
} from '../src/decision-store/sqlite-writer-connections.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * The SQLite writer thread's prepared statements (src/decision-store/sqlite-batch-wire.ts): a row
 * SQLite refuses fails its whole batch with SQLite's code, so the writer can split it and set the
 * row aside with an exact count. No record riskgate builds is refused by SQLite's schema today, so
 * a sink in front of the thread breaks one (a rule without its decision id: NOT NULL).
 */

const dir = tempDirForBlock('riskgate-store-thread-');

const record = (id: string) => ({
  kind: 'decision',
  decisionId: id,
  at: new Date().toISOString(),
  request: { accountId: 'acme' },
  outcome: { verdict: 'deny', score: 90, matchedRules: [{ id: 'rat' }] },
});

/** `sink`, with the rule of decision `poison` made one SQLite refuses. */
function poisoning(sink: DecisionSink): DecisionSink {
  const poison = (op: StoreOp): StoreOp =>
    op.kind === 'decision' && op.row.decision_id === 'poison'
      ? { ...op, rules: op.rules.map((r) => ({ ...r, decision_id: null as unknown as string })) }
      : op;
  return { ...sink, write: (ops) => sink.write(ops.map(poison)) };
}

async function openStore(name: string) {
  const path = join(dir, `${name}.sqlite`);
  const database = await openDatabase({ kind: 'sqlite', path }, { migrations: ALL_MIGRATIONS });
  return { path, database, db: database.db.withTables<DecisionTables>() };
}

describe('the decision store SQLite writer thread', () => {
  it('fails a batch with a refused row whole, with SQLite’s code, and writes nothing of it', async () => {
    const { path, database, db } = await openStore('whole');
    const sink = poisoning(sqliteThreadSink(path));
    const writer = new DecisionStoreWriter({ sink });
    try {
      const ops = [storeOpOf(record('fine'), 0)!, storeOpOf(record('poison'), 0)!];
      const error = await sink.write(ops).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toMatchObject({ errcode: 1299 }); // SQLITE_CONSTRAINT_NOTNULL
      expect(isRefusedRow(error)).toBe(true);
      expect(await db.selectFrom('decision').select('decision_id').execute()).toEqual([]);
    } finally {
      await writer.close(2000);
      await database.close();
    }
  });

  it('sets the refused record aside, counted once, and writes the rest of its batch', async () => {
    const { path, database, db } = await openStore('split');
    const rejects: Reject[] = [];
    const writer = new DecisionStoreWriter({
      sink: poisoning(sqliteThreadSink(path)),
      keepRejected: async (r) => {
        rejects.push(...r);
      },
    });
    try {
      for (const id of ['a', 'b', 'poison', 'c', 'd']) writer.push(record(id));
      expect(await writer.flush(10_000)).toBe(true);
      expect(writer.status()).toMatchObject({ written: 4, rejected: 1, dropped: 0, pending: 0 });
      expect(rejects.map((r) => (r.record as { decisionId: string }).decisionId)).toEqual(['poison']);
      expect(rejects[0]!.error).toMatch(/NOT NULL/);
      const rows = await db.selectFrom('decision').select('decision_id').orderBy('decision_id').execute();
      expect(rows.map((r) => r.decision_id)).toEqual(['a', 'b', 'c', 'd']);
      const rules = await db.selectFrom('decision_rule').select(['decision_id', 'rule_id']).execute();
      expect(rules).toHaveLength(4);
      // Written again (a batch whose deadline passed may have landed): nothing doubles.
      writer.push(record('a'));
      expect(await writer.flush(10_000)).toBe(true);
      expect(await db.selectFrom('decision').select('decision_id').execute()).toHaveLength(4);
    } finally {
      await writer.close(2000);
      await database.close();
    }
  });

  it("keeps its batches' pages between batches: the batch connection's cache holds 64 MiB", async () => {
    // Issue 32: at SQLite's default (2,000 KiB, 125 pages of 16 KiB) a batch of a second read the
    // random-key indexes' leaves back from the file every time, and a large batch spilled to the WAL.
    const { path, database } = await openStore('cache');
    const { writer, db } = openWriterConnections(path, 5000);
    try {
      expect(DECISIONS_WRITER_CACHE_KIB).toBe(64 * 1024);
      expect(writer.prepare('PRAGMA cache_size').get()).toEqual({ cache_size: -DECISIONS_WRITER_CACHE_KIB });
    } finally {
      writer.close();
      await db.destroy();
      await database.close();
    }
  });
});
