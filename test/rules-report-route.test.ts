import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import type { RuleReport } from '../src/decision-store/rule-report.ts';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { CALLER_KEY, type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { seedDecisions } from './support/decision-rows.ts';
import { failingDatabase } from './support/failing-database.ts';

/**
 * `GET /rules/report` over HTTP (issue 25): riskgate started with the shipped policy as active and
 * shadow, its database seeded as the decision store writes it; the report names every rule of
 * the shipped policy in file order, never-fired exactly for those no decision matched, and the
 * shadow's agreement; a dead database is a 503 problem, never a 500 or its error.
 */

let h: Harness;
let database: RiskgateDatabase;
let ruleIds: readonly string[];

beforeAll(async () => {
  database = await openDatabase({ kind: 'memory' }, { migrations: ALL_MIGRATIONS });
  h = await startHarness({
    env: { RISKGATE_SHADOW_POLICY_PATH: 'policies/' },
    riskgate: { database },
  });
  ruleIds = (await loadPolicy('policies/')).ruleIds ?? [];
});
afterAll(async () => {
  await h?.stop();
  await database?.close();
});

const report = async (key = OPS_KEY) =>
  fetch(`${h.url}/rules/report`, { headers: { authorization: `Bearer ${key}` } });

describe('GET /rules/report', () => {
  it('names every rule of the live policy, never fired but for those the stored decisions matched', async () => {
    // No live decision here: the store's writer would add it to the counts whenever it flushes.
    const { revision } = (await (await h.ops('/policies')).json()) as { revision: string };
    const now = Date.now();
    const fired = [ruleIds[0]!, ruleIds[3]!];
    await seedDecisions(database, [
      {
        id: 'e2e-1',
        atMs: now - 60_000,
        verdict: 'deny',
        revision,
        rules: fired,
        label: 'fraud',
        shadow: { verdict: 'challenge', revision, rules: [ruleIds[3]!] },
      },
      { id: 'e2e-2', atMs: now - 2 * 3_600_000, verdict: 'allow', revision, rules: [], label: 'legit' },
    ]);

    const res = await report();
    expect(res.status).toBe(200);
    const body = (await res.json()) as RuleReport;
    expect(body.active.revision).toBe(revision);
    expect(body.active.decisions).toEqual({ h1: 1, h24: 2, d7: 2 });
    expect(body.active.rules.map((r) => r.ruleId)).toEqual(ruleIds);
    expect(body.active.rules.filter((r) => !r.neverFired).map((r) => r.ruleId)).toEqual(fired);
    expect(body.active.rules.every((r) => r.description !== undefined && r.hourly.length === 24)).toBe(true);
    expect(body.active.rules[0]).toMatchObject({ fires: { h1: 1, h24: 1, d7: 1 }, precision: 1, recall: 1 });
    expect(body.shadow?.rules.filter((r) => !r.neverFired).map((r) => r.ruleId)).toEqual([ruleIds[3]]);
    expect(body.agreement?.deny).toEqual({ allow: 0, challenge: 1, deny: 0 });
  });

  it('is an operator route: a caller key is refused', async () => {
    expect((await report(CALLER_KEY)).status).toBe(401);
  });

  it('answers 503 RG_ERR_DECISION_STORE_UNAVAILABLE while the database does not answer', async () => {
    const b = await startHarness({ riskgate: { database: await failingDatabase() } });
    try {
      const res = await fetch(`${b.url}/rules/report`, { headers: { authorization: `Bearer ${OPS_KEY}` } });
      expect(res.status).toBe(503);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      expect(((await res.json()) as { code: string }).code).toBe('RG_ERR_DECISION_STORE_UNAVAILABLE');
    } finally {
      await b.stop();
    }
  });
});
