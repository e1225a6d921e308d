import type { Kysely } from 'kysely';
import type { RecentOutcomesReader, RecentStepUps } from '../policy/inputs/input-row.ts';
import type { DecisionTables } from './decision-tables.ts';

/**
 * An account's recent step-up outcomes, read from the decision store for the `outcomes` input
 * (src/policy/inputs/outcome-row.ts, whose port this is): the account's decisions of the window (decision_account_at)
 * joined to their outcomes by `decision_outcome`'s primary key.
 */

export function recentOutcomesReader(db: Kysely<DecisionTables>): RecentOutcomesReader {
  return {
    async recentStepUps(accountId, unitId, sinceMs) {
      const rows = await db
        .selectFrom('decision as d')
        .innerJoin('decision_outcome as o', 'o.decision_id', 'd.decision_id')
        .select((eb) => ['o.value', 'd.unit_id', eb.fn.countAll<number | string>().as('n')])
        .where('d.account_id', '=', accountId)
        .where('d.at_ms', '>', sinceMs)
        .where('o.type', '=', 'step_up')
        .where('o.value', 'in', ['passed', 'failed'])
        .groupBy(['o.value', 'd.unit_id'])
        .execute();
      const counts: RecentStepUps = { passed: 0, failed: 0, passedFromUnit: 0 };
      for (const r of rows) {
        const n = Number(r.n);
        if (r.value === 'failed') counts.failed += n;
        else {
          counts.passed += n;
          if (unitId !== undefined && r.unit_id === unitId) counts.passedFromUnit += n;
        }
      }
      return counts;
    },
  };
}
