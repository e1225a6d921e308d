import { type Expression, type Kysely, type SqlBool, sql } from 'kysely';
import type { RiskgateDatabase } from '../database/database.ts';
import type { CompiledPolicy } from '../policy/policy-types.ts';
import type { Verdict } from './decision-query.ts';
import type { DecisionTables } from './decision-tables.ts';
import type { FireCounts, RevisionReport, RuleQuality, RuleReport, RuleReportReader } from './rule-report.ts';

/**
 * The rule report (src/decision-store/rule-report.ts) computed from the decision store's tables with
 * a handful of grouped queries per revision, the same kysely on SQLite and PostgreSQL.
 *
 * Definitions, as `GET /policies/stats` and `riskgate replay --labels` have them: a rule fires on
 * a decision when it matched (a `decision_rule` row); a decision labelled fraud is a positive. A
 * window of W ends at `now` and includes it: `now - W < at_ms <= now`. The 24 hourly buckets are
 * the last 24 h in one-hour steps ending at `now` (so they add up to `fires.h24`). Precision and
 * recall count the decisions of the last 7 d with a current label. A revision's decisions are the
 * rows naming it: `policy_revision` for the active policy, `shadow_revision` for the shadow. The
 * agreement matrix counts the last 7 d's decisions of the active revision that the current shadow
 * revision also decided (a matrix over an earlier candidate would mislead about this one).
 */

const HOUR_MS = 3_600_000;
const WINDOW_MS = { h1: HOUR_MS, h24: 24 * HOUR_MS, d7: 7 * 24 * HOUR_MS } as const;
const VERDICTS: readonly Verdict[] = ['allow', 'challenge', 'deny'];

/** What the report needs of a loaded policy. */
export type ReportedPolicy = Pick<CompiledPolicy, 'name' | 'revision' | 'ruleIds' | 'ruleDescriptions'>;

export interface RuleReportOptions {
  database: RiskgateDatabase;
  /** The live policies (the policy component's handle): the revisions reported are the current ones. */
  policies: {
    store: { current(): ReportedPolicy };
    shadow?: { current(): ReportedPolicy | undefined } | undefined;
  };
}

type Db = Kysely<DecisionTables>;
type PolicyKind = 'active' | 'shadow';

/** The report over the decision store; `report(nowMs)` is deterministic for a given `nowMs` and tables. */
export function createRuleReport(o: RuleReportOptions): RuleReportReader {
  const db = o.database.db.withTables<DecisionTables>();
  return {
    async report(nowMs = Date.now()) {
      const active = o.policies.store.current();
      const shadow = o.policies.shadow?.current();
      const [activeReport, shadowReport, agreement] = await Promise.all([
        revisionReport(db, 'active', active, nowMs),
        shadow === undefined ? undefined : revisionReport(db, 'shadow', shadow, nowMs),
        shadow === undefined ? undefined : agreementMatrix(db, active.revision, shadow.revision, nowMs),
      ]);
      return {
        generatedAt: new Date(nowMs).toISOString(),
        active: activeReport,
        ...(shadowReport !== undefined && { shadow: shadowReport }),
        ...(agreement !== undefined && { agreement }),
      } satisfies RuleReport;
    },
  };
}

/** `1` when `condition` holds, else `0`: summed, a count under a condition in one pass. */
const when = (condition: Expression<SqlBool>) => sql<number>`case when ${condition} then 1 else 0 end`;

async function revisionReport(
  db: Db,
  policy: PolicyKind,
  ref: ReportedPolicy,
  nowMs: number,
): Promise<RevisionReport> {
  const [decisions, fires, labelled] = await Promise.all([
    decisionCounts(db, policy, ref.revision, nowMs),
    fireCounts(db, policy, ref.revision, nowMs),
    labelledFires(db, policy, ref.revision, nowMs),
  ]);
  // The policy's rules in file order (those that never fired too), then any rule the store names
  // that this revision does not list (an outage rule), by id.
  const listed = ref.ruleIds ?? [];
  const extra = [...new Set([...fires.keys(), ...labelled.keys()])]
    .filter((id) => !listed.includes(id))
    .sort();
  const rules = [...listed, ...extra].map((ruleId): RuleQuality => {
    const f = fires.get(ruleId) ?? {
      counts: { h1: 0, h24: 0, d7: 0 },
      hourly: new Array<number>(24).fill(0),
    };
    const l = labelled.get(ruleId) ?? { fraud: 0, legit: 0 };
    const truePositives = l.fraud;
    const falsePositives = l.legit;
    const falseNegatives = decisions.fraud - l.fraud;
    const description = ref.ruleDescriptions?.get(ruleId);
    return {
      ruleId,
      ...(description !== undefined && { description }),
      fires: f.counts,
      fireRate: {
        h1: rate(f.counts.h1, decisions.counts.h1),
        h24: rate(f.counts.h24, decisions.counts.h24),
        d7: rate(f.counts.d7, decisions.counts.d7),
      },
      hourly: f.hourly,
      labelled: { truePositives, falsePositives, falseNegatives },
      ...(truePositives + falsePositives > 0 && {
        precision: round(truePositives / (truePositives + falsePositives)),
      }),
      ...(decisions.fraud > 0 && { recall: round(truePositives / decisions.fraud) }),
      neverFired: f.counts.d7 === 0,
    };
  });
  return { policy, name: ref.name, revision: ref.revision, decisions: decisions.counts, rules };
}

/** The revision's decisions per window, and its labelled ones over 7 d: one pass. */
async function decisionCounts(
  db: Db,
  policy: PolicyKind,
  revision: string,
  nowMs: number,
): Promise<{ counts: FireCounts; fraud: number }> {
  const row = await db
    .selectFrom('decision')
    .select((eb) => [
      eb.fn.sum<number>(when(eb('at_ms', '>', nowMs - WINDOW_MS.h1))).as('h1'),
      eb.fn.sum<number>(when(eb('at_ms', '>', nowMs - WINDOW_MS.h24))).as('h24'),
      eb.fn.countAll<number>().as('d7'),
      eb.fn.sum<number>(when(eb('label', '=', 'fraud'))).as('fraud'),
    ])
    .where(policy === 'active' ? 'policy_revision' : 'shadow_revision', '=', revision)
    .where('at_ms', '>', nowMs - WINDOW_MS.d7)
    .where('at_ms', '<=', nowMs)
    .executeTakeFirst();
  // sum() over no rows is NULL; PostgreSQL answers counts and sums as strings.
  return {
    counts: { h1: Number(row?.h1 ?? 0), h24: Number(row?.h24 ?? 0), d7: Number(row?.d7 ?? 0) },
    fraud: Number(row?.fraud ?? 0),
  };
}

interface RuleFires {
  counts: FireCounts;
  /** Oldest first. */
  hourly: number[];
}

/**
 * Each rule's fires per hour over 7 d, grouped by rule and hours-ago (0: the last hour), summed
 * into the windows here: one grouped query for every rule and window.
 */
async function fireCounts(
  db: Db,
  policy: PolicyKind,
  revision: string,
  nowMs: number,
): Promise<Map<string, RuleFires>> {
  const rows = await db
    .selectFrom('decision_rule')
    .select((eb) => [
      'rule_id',
      // Integer division on both engines: node:sqlite binds every number as a double, so the cast.
      sql<number>`(cast(${Math.trunc(nowMs)} as bigint) - ${eb.ref('at_ms')}) / ${sql.lit(HOUR_MS)}`.as(
        'hours_ago',
      ),
      eb.fn.countAll<number>().as('fires'),
    ])
    .where('policy_revision', '=', revision)
    .where('policy', '=', policy)
    .where('at_ms', '>', nowMs - WINDOW_MS.d7)
    .where('at_ms', '<=', nowMs)
    .groupBy(['rule_id', 'hours_ago'])
    .execute();
  const byRule = new Map<string, RuleFires>();
  for (const row of rows) {
    let r = byRule.get(row.rule_id);
    if (r === undefined) {
      r = { counts: { h1: 0, h24: 0, d7: 0 }, hourly: new Array<number>(24).fill(0) };
      byRule.set(row.rule_id, r);
    }
    const hoursAgo = Math.trunc(Number(row.hours_ago));
    const fires = Number(row.fires);
    r.counts.d7 += fires;
    if (hoursAgo < 24) {
      r.counts.h24 += fires;
      r.hourly[23 - hoursAgo]! += fires;
    }
    if (hoursAgo === 0) r.counts.h1 += fires;
  }
  return byRule;
}

/**
 * Per rule, its fires on the revision's labelled decisions of the last 7 d, by label. Driven from
 * the labelled decisions (few) into their rule rows, never from every rule row into its decision.
 */
async function labelledFires(
  db: Db,
  policy: PolicyKind,
  revision: string,
  nowMs: number,
): Promise<Map<string, { fraud: number; legit: number }>> {
  const rows = await db
    .selectFrom('decision as d')
    .innerJoin('decision_rule as r', (join) =>
      join
        .onRef('r.decision_id', '=', 'd.decision_id')
        .on('r.policy', '=', policy)
        .on('r.policy_revision', '=', revision),
    )
    .select((eb) => ['r.rule_id', 'd.label', eb.fn.countAll<number>().as('decisions')])
    .where(policy === 'active' ? 'd.policy_revision' : 'd.shadow_revision', '=', revision)
    .where('d.label', 'in', ['fraud', 'legit'])
    .where('d.at_ms', '>', nowMs - WINDOW_MS.d7)
    .where('d.at_ms', '<=', nowMs)
    .groupBy(['r.rule_id', 'd.label'])
    .execute();
  const byRule = new Map<string, { fraud: number; legit: number }>();
  for (const row of rows) {
    const r = byRule.get(row.rule_id) ?? { fraud: 0, legit: 0 };
    r[row.label as 'fraud' | 'legit'] += Number(row.decisions);
    byRule.set(row.rule_id, r);
  }
  return byRule;
}

/** agreement[active][shadow] over the last 7 d's decisions of both revisions; every cell present. */
async function agreementMatrix(
  db: Db,
  activeRevision: string,
  shadowRevision: string,
  nowMs: number,
): Promise<Record<Verdict, Record<Verdict, number>>> {
  const rows = await db
    .selectFrom('decision')
    .select((eb) => ['verdict', 'shadow_verdict', eb.fn.countAll<number>().as('decisions')])
    .where('policy_revision', '=', activeRevision)
    .where('shadow_revision', '=', shadowRevision)
    .where('at_ms', '>', nowMs - WINDOW_MS.d7)
    .where('at_ms', '<=', nowMs)
    .groupBy(['verdict', 'shadow_verdict'])
    .execute();
  const row = () => Object.fromEntries(VERDICTS.map((v) => [v, 0])) as Record<Verdict, number>;
  const matrix = Object.fromEntries(VERDICTS.map((v) => [v, row()])) as Record<
    Verdict,
    Record<Verdict, number>
  >;
  for (const r of rows) {
    const cells = matrix[r.verdict as Verdict];
    if (cells !== undefined && r.shadow_verdict !== null && r.shadow_verdict in cells)
      cells[r.shadow_verdict as Verdict] += Number(r.decisions);
  }
  return matrix;
}

const rate = (part: number, whole: number) => (whole === 0 ? 0 : round(part / whole));
const round = (x: number) => Math.round(x * 10_000) / 10_000;
