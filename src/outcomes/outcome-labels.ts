import { type Expression, type SqlBool, sql } from 'kysely';
import type { Label } from '../replay/replay-labels.ts';

/**
 * How outcomes become labels (README, "Outcomes from the login backend"): the one declaration,
 * which the decision store's writes (src/decision-store/decision-batch.ts) turn into SQL.
 *
 * - A `failed` step-up after a `challenge` points to fraud; a `passed` one to legit. A step-up
 *   outcome of a decision that was not challenged says nothing (nobody was asked).
 * - `user_reported_fraud` points to fraud, whatever the verdict.
 * - The user's own answer to "was this you?" (`ask_user`, src/ask-user/): `no` points to fraud,
 *   `yes` to legit.
 * - `abandoned`, `password_reset` and `account_recovered` are kept and shown, and label nothing:
 *   each is as likely from the owner as from an attacker.
 * - Fraud outweighs legit: a decision with both kinds of outcome (a passed step-up, then the user
 *   reports fraud: the second factor was the attacker's) points to fraud.
 * - An analyst's label (`POST /feedback`, the console) always wins over outcomes: the decision's
 *   current label is the newest analyst label, else the outcomes' label.
 */
export interface OutcomeLabelRule {
  type: 'step_up' | 'account_event' | 'ask_user';
  value: string;
  /** The decision's verdict the outcome must follow to count; undefined: any. */
  afterVerdict?: 'challenge';
  label: Label;
}

export const OUTCOME_LABEL_RULES: readonly OutcomeLabelRule[] = [
  { type: 'step_up', value: 'failed', afterVerdict: 'challenge', label: 'fraud' },
  { type: 'account_event', value: 'user_reported_fraud', label: 'fraud' },
  { type: 'ask_user', value: 'no', label: 'fraud' },
  { type: 'step_up', value: 'passed', afterVerdict: 'challenge', label: 'legit' },
  { type: 'ask_user', value: 'yes', label: 'legit' },
];

/** The label one outcome points to for a decision with `verdict`, or undefined. */
export function outcomeLabelOf(verdict: string, type: string, value: string): Label | undefined {
  const rule = OUTCOME_LABEL_RULES.find(
    (r) =>
      r.type === type && r.value === value && (r.afterVerdict === undefined || r.afterVerdict === verdict),
  );
  return rule?.label;
}

/**
 * SQL over a `decision` row in scope: the label its outcomes point to (fraud before legit), or
 * null. Both engines: a CASE of EXISTS over `decision_outcome`'s primary key.
 */
export function outcomeLabelSql(): Expression<string | null> {
  const exists = (label: Label) => {
    const rules = OUTCOME_LABEL_RULES.filter((r) => r.label === label).map(
      (r) =>
        sql<SqlBool>`(o.type = ${r.type} and o.value = ${r.value}${
          r.afterVerdict === undefined ? sql`` : sql` and decision.verdict = ${r.afterVerdict}`
        })`,
    );
    return sql<SqlBool>`exists (select 1 from decision_outcome o where o.decision_id = decision.decision_id and (${sql.join(rules, sql` or `)}))`;
  };
  return sql<
    string | null
  >`case when ${exists('fraud')} then 'fraud' when ${exists('legit')} then 'legit' else null end`;
}
