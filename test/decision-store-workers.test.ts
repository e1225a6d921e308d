import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../src/database/database.ts';
import { DecisionStoreWriter } from '../src/decision-store/decision-store-writer.ts';
import type { DecisionTables } from '../src/decision-store/decision-tables.ts';
import { sqliteThreadSink } from '../src/decision-store/sqlite-thread-sink.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * With RISKGATE_WORKERS > 1 each worker writes its own batches into the one SQLite file: writers
 * on their own threads and connections, at once, lose nothing (WAL, and the busy timeout waits out
 * the other's write lock).
 */

const dir = tempDirForBlock('riskgate-store-workers-');

describe('the decision store with several writers on one SQLite file', () => {
  it('keeps every decision each writer took, written at the same time', async () => {
    const path = join(dir, 'riskgate.sqlite');
    const database = await openDatabase({ kind: 'sqlite', path }, { migrations: ALL_MIGRATIONS });
    const WRITERS = 3;
    const EACH = 3000;
    const failures: string[] = [];
    const writers = Array.from(
      { length: WRITERS },
      () =>
        new DecisionStoreWriter({
          sink: sqliteThreadSink(path),
          batchSize: 200,
          intervalMs: 5,
          maxPending: EACH,
        }),
    );
    for (let i = 0; i < EACH; i++) {
      for (const [k, w] of writers.entries()) {
        w.push({
          kind: 'decision',
          decisionId: `w${k}-${i}`,
          at: new Date(1_700_000_000_000 + i).toISOString(),
          outcome: { verdict: 'allow', score: 0, matchedRules: [{ id: `rule-${k}` }] },
          inputs: { pad: 'x'.repeat(1000) },
        });
      }
    }
    expect(await Promise.all(writers.map((w) => w.flush(30_000)))).toEqual(Array(WRITERS).fill(true));
    // Not one batch failed: each waited out the others' locks (the busy timeout), none was retried.
    expect(failures).toEqual([]);
    for (const w of writers) expect(w.status()).toMatchObject({ written: EACH, dropped: 0, writing: true });
    await Promise.all(writers.map((w) => w.close(5000)));
    const db = database.db.withTables<DecisionTables>();
    const n = await db
      .selectFrom('decision')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    const rules = await db
      .selectFrom('decision_rule')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    expect([Number(n.n), Number(rules.n)]).toEqual([WRITERS * EACH, WRITERS * EACH]);
    await database.close();
  }, 60_000);
});
