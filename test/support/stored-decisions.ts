import type { Kysely } from 'kysely';
import type { DecisionTables } from '../../src/decision-store/decision-tables.ts';
import { countInserted } from '../../src/decision-store/hour-counts.ts';
import { decisionRows } from './decision-rows.ts';

/**
 * Decisions stored with a decision line replay can read (src/replay/replay-record.ts): a browser or
 * mobile login of an account, its recorded verdict, score and matched rules. For tests and benches
 * of what replays the decision store (a policy version's backtest).
 */

export interface ReplayableDecision {
  id: string;
  atMs: number;
  accountId: string;
  platform: 'browser' | 'mobile';
  verdict: 'allow' | 'challenge' | 'deny';
  score: number;
  rules: string[];
  revision: string;
}

/** The decision line riskgate would have written for `d` (schemaVersion 1). */
export function replayableLine(d: ReplayableDecision): string {
  return JSON.stringify({
    kind: 'decision',
    schemaVersion: 1,
    decisionId: d.id,
    at: new Date(d.atMs).toISOString(),
    request: { accountId: d.accountId, platform: d.platform, ip: '203.0.113.10' },
    policy: { name: 'login', revision: d.revision },
    inputs: { signals: {}, devices: [] },
    outcome: { verdict: d.verdict, score: d.score, matchedRules: d.rules.map((id) => ({ id })) },
  });
}

/** The `decision` and `decision_rule` rows of `d`, its line replayable. */
export function replayableRows(d: ReplayableDecision) {
  const rows = decisionRows({
    id: d.id,
    atMs: d.atMs,
    verdict: d.verdict,
    revision: d.revision,
    rules: d.rules,
  });
  const line = replayableLine(d);
  return {
    decision: {
      ...rows.decision,
      account_id: d.accountId,
      score: d.score,
      line,
      line_bytes: Buffer.byteLength(line),
    },
    rules: rows.rules,
  };
}

/** Inserts `decisions` in transactions of at most 5,000 rows (multi-row inserts of 200). */
export async function storeReplayable(
  db: Kysely<DecisionTables>,
  decisions: Iterable<ReplayableDecision>,
): Promise<number> {
  let batch: ReturnType<typeof replayableRows>[] = [];
  let count = 0;
  const flush = async () => {
    const rows = batch;
    batch = [];
    await db.transaction().execute(async (tx) => {
      for (let i = 0; i < rows.length; i += 200) {
        const slice = rows.slice(i, i + 200);
        await tx
          .insertInto('decision')
          .values(slice.map((r) => r.decision))
          .execute();
        const rules = slice.flatMap((r) => r.rules);
        for (let j = 0; j < rules.length; j += 200)
          await tx
            .insertInto('decision_rule')
            .values(rules.slice(j, j + 200))
            .execute();
        // Every row was stored (no conflict clause): counted by its hour, as the writers do.
        await countInserted(
          tx,
          slice.map((r) => r.decision),
          rules,
        );
      }
    });
  };
  for (const d of decisions) {
    batch.push(replayableRows(d));
    count++;
    if (batch.length >= 5000) await flush();
  }
  if (batch.length > 0) await flush();
  return count;
}
