import type { RiskgateDatabase } from '../../src/database/database.ts';
import type { DecisionTables } from '../../src/decision-store/decision-tables.ts';
import { countInserted } from '../../src/decision-store/hour-counts.ts';

/**
 * Decisions written straight into the decision store's tables (src/decision-store/decision-tables.ts),
 * as the store's writer would: the `decision` row and one `decision_rule` row per matched rule of the
 * active policy and of the shadow. For tests of what reads the tables.
 */

export interface SeededDecision {
  id: string;
  atMs: number;
  verdict: 'allow' | 'challenge' | 'deny';
  /** The active policy's revision. */
  revision: string;
  /** The active policy's matched rule ids. */
  rules: string[];
  /** The current label. */
  label?: 'fraud' | 'legit';
  shadow?: { verdict: 'allow' | 'challenge' | 'deny'; revision: string; rules: string[] };
}

type DecisionRow = DecisionTables['decision'];
type RuleRow = DecisionTables['decision_rule'];

/** The rows of `d`: its `decision` row and its `decision_rule` rows. */
export function decisionRows(
  d: SeededDecision,
  policyName = 'login',
): { decision: DecisionRow; rules: RuleRow[] } {
  const line = JSON.stringify({ kind: 'decision', decisionId: d.id, at: new Date(d.atMs).toISOString() });
  const rule = (policy: string, revision: string) => (ruleId: string) => ({
    decision_id: d.id,
    policy,
    policy_revision: revision,
    rule_id: ruleId,
    at_ms: d.atMs,
  });
  return {
    decision: {
      decision_id: d.id,
      at_ms: d.atMs,
      verdict: d.verdict,
      score: 0,
      degraded: 0,
      policy_name: policyName,
      policy_revision: d.revision,
      account_id: 'acct-1',
      user_id: null,
      ip: null,
      unit_id: null,
      shadow_verdict: d.shadow?.verdict ?? null,
      shadow_revision: d.shadow?.revision ?? null,
      shadow_disagrees: d.shadow !== undefined && d.shadow.verdict !== d.verdict ? 1 : 0,
      outcome_label: null,
      label: d.label ?? null,
      total_ms: 1,
      line,
      line_bytes: Buffer.byteLength(line),
    },
    rules: [
      ...d.rules.map(rule('active', d.revision)),
      ...(d.shadow === undefined ? [] : d.shadow.rules.map(rule('shadow', d.shadow.revision))),
    ],
  };
}

/** Inserts `decisions` (and their rule rows) in one transaction. */
export async function seedDecisions(
  database: RiskgateDatabase,
  decisions: readonly SeededDecision[],
): Promise<void> {
  const db = database.db.withTables<DecisionTables>();
  await db.transaction().execute(async (tx) => {
    for (const d of decisions) {
      const rows = decisionRows(d);
      await tx.insertInto('decision').values(rows.decision).execute();
      if (rows.rules.length > 0) await tx.insertInto('decision_rule').values(rows.rules).execute();
      // Every row was stored (no conflict clause): counted by its hour, as the writers do.
      await countInserted(tx, [rows.decision], rows.rules);
    }
  });
}

/** Empties the decision store's tables. */
export async function clearDecisions(database: RiskgateDatabase): Promise<void> {
  const db = database.db.withTables<DecisionTables>();
  await db.deleteFrom('decision_rule').execute();
  await db.deleteFrom('decision').execute();
}
