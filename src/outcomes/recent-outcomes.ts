import type { Kysely } from 'kysely';
import type { DecisionTables } from '../decision-store/decision-tables.ts';

/**
 * An account's recent step-up outcomes, read from the decision store for the `outcomes` input
 * (src/policy/inputs/outcome-row.ts): the account's decisions of the window (decision_account_at)
 * joined to their outcomes by `decision_outcome`'s primary key.
 */

/** Counts of the step-ups an account's decisions of the window were reported to have. */
export interface RecentStepUps {
  passed: number;
  failed: number;
  /** Passed on decisions from the same unit (device, browser) as this login. */
  passedFromUnit: number;
}

export interface RecentOutcomesReader {
  /** The step-ups of `accountId`'s decisions made after `sinceMs` (epoch ms); rejects when the store fails. */
  recentStepUps(accountId: string, unitId: string | undefined, sinceMs: number): Promise<RecentStepUps>;
}

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
