import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';

/**
 * A failing outbox store is counted, not only logged: riskgate started on a database it shares with
 * the test, whose outbox table then disappears under it; every failed claim or count the delivery
 * loop makes is logged and counted in `riskgate_outbox_store_errors_total`, read over `/metrics`.
 */

let database: RiskgateDatabase;
let h: Harness;

beforeAll(async () => {
  database = await openDatabase({ kind: 'memory' }, { migrations: ALL_MIGRATIONS });
  // A fast poll, so the failures come within the test's wait.
  h = await startHarness({ riskgate: { database, outbox: { pollMs: 20 } } });
});
afterAll(async () => {
  await h?.stop();
  await database?.close();
});

async function storeErrors(): Promise<number | undefined> {
  const text = await (await h.ops('/metrics')).text();
  const sample = /^riskgate_outbox_store_errors_total (\d+)$/m.exec(text);
  return sample === null ? undefined : Number(sample[1]);
}

describe('riskgate_outbox_store_errors_total', () => {
  it('is 0 while the store answers, and counts each failure once the outbox table is gone, beside its log line', async () => {
    expect(await storeErrors()).toBe(0);
    expect(h.serviceLog.filter((l) => l.msg === 'outbox store failed')).toEqual([]);

    await sql`DROP TABLE outbox_entry`.execute(database.db);

    const counted = await eventually(async () => {
      const n = await storeErrors();
      return n !== undefined && n >= 2 ? n : undefined;
    });
    const logged = h.serviceLog.filter((l) => l.msg === 'outbox store failed');
    // Each count was logged first (the metric is read after the lines it counts).
    expect(logged.length).toBeGreaterThanOrEqual(counted);
    expect(String(logged[0]?.error)).toMatch(/outbox_entry/);
  });
});
