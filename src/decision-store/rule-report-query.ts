import { type Kysely, sql } from 'kysely';
import type { RiskgateDatabase } from '../database/database.ts';
import { INTERNAL_ERROR } from '../policy/policy-evaluator.ts';
import type { CompiledPolicy } from '../policy/policy-types.ts';
import type { Verdict } from './decision-query.ts';
import type { DecisionTables } from './decision-tables.ts';
import { type HourDb, splitByHours, type TimeRange } from './hour-counts.ts';
import { type KnownVersion, ruleHistory } from './rule-history-query.ts';
import type {
  FireCounts,
  RevisionReport,
  RuleQuality,
  RuleReport,
  RuleReportReader,
  RuleReportScope,
} from './rule-report.ts';
import { rate, round } from './rule-report.ts';

/**
 * The rule report (src/decision-store/rule-report.ts) computed from the decision store's tables with
 * a handful of grouped queries per revision, the same kysely on SQLite and PostgreSQL: decisions,
 * fires over 7 d and the agreement matrix from the counts per hour (src/decision-store/hour-counts.ts)
 * for a window's whole hours and from the rows for its ends; the hourly series (hours ending at
 * `now`, not on the clock's hours) and the labelled counts (labels change) from the rows, each a
 * range scan of an index of src/decision-store/rule-report-indexes.ts (its comment says why each).
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
  /**
   * The policy versions of the control database, to name the revisions of the history (who made
   * each, why). Unreadable: the history names none (the decision store alone is its source).
   */
  versions?: () => Promise<readonly KnownVersion[]>;
}

type Db = Kysely<DecisionTables>;
/** The hour tables on the same connection (src/decision-store/hour-counts.ts). */
const hourDb = (db: Db) => db as unknown as HourDb;
type PolicyKind = 'active' | 'shadow';

/** The report over the decision store; `report(nowMs)` is deterministic for a given `nowMs` and tables. */
export function createRuleReport(o: RuleReportOptions): RuleReportReader {
  const db = o.database.db.withTables<DecisionTables>();
  return {
    async report(nowMs = Date.now(), scope: RuleReportScope = {}) {
      const active = o.policies.store.current();
      const shadow = o.policies.shadow?.current();
      const [activeReport, shadowReport, agreement, versions] = await Promise.all([
        revisionReport(db, 'active', active, nowMs),
        shadow === undefined ? undefined : revisionReport(db, 'shadow', shadow, nowMs),
        shadow === undefined ? undefined : agreementMatrix(db, active.revision, shadow.revision, nowMs),
        o.versions?.().catch(() => []) ?? [],
      ]);
      const history = await ruleHistory({
        db,
        active,
        activeReport,
        nowMs,
        scope,
        versions,
        reportOf: (revision) => revisionReport(db, 'active', { name: active.name, revision }, nowMs),
      });
      return {
        generatedAt: new Date(nowMs).toISOString(),
        active: activeReport,
        ...(shadowReport !== undefined && { shadow: shadowReport }),
        ...(agreement !== undefined && { agreement }),
        history,
      } satisfies RuleReport;
    },
  };
}

export async function revisionReport(
  db: Db,
  policy: PolicyKind,
  ref: ReportedPolicy,
  nowMs: number,
): Promise<RevisionReport> {
  const listed = ref.ruleIds ?? [];
  // A revision is its content: its rows name its rules, or the engine's internal-error pseudo-rule.
  // An earlier revision's rules are not known here: every rule its rows name.
  const ruleIds = ref.ruleIds === undefined ? undefined : [...listed, INTERNAL_ERROR];
  const scope: Scope = { db, policy, revision: ref.revision, nowMs };
  const [decisions, fraud, week, hourly, labelled] = await Promise.all([
    decisionCounts(scope),
    labelledFraud(scope),
    weekFires(scope, ruleIds),
    hourlyFires(scope, ruleIds),
    labelledFires(scope),
  ]);
  // The policy's rules in file order (those that never fired too), then the pseudo-rule if it fired.
  const extra = [...new Set([...week.keys(), ...labelled.keys()])]
    .filter((id) => !listed.includes(id))
    .sort();
  const rules = [...listed, ...extra].map((ruleId): RuleQuality => {
    const hours = hourly.get(ruleId) ?? new Array<number>(24).fill(0);
    // The last hour and the last 24 h are the hourly series' last bucket and its sum.
    const f = { h1: hours[23]!, h24: hours.reduce((a, b) => a + b, 0), d7: week.get(ruleId) ?? 0 };
    const l = labelled.get(ruleId) ?? { fraud: 0, legit: 0 };
    const truePositives = l.fraud;
    const falsePositives = l.legit;
    const description = ref.ruleDescriptions?.get(ruleId);
    return {
      ruleId,
      ...(description !== undefined && { description }),
      fires: f,
      fireRate: {
        h1: rate(f.h1, decisions.h1),
        h24: rate(f.h24, decisions.h24),
        d7: rate(f.d7, decisions.d7),
      },
      hourly: hours,
      labelled: { truePositives, falsePositives, falseNegatives: fraud - truePositives },
      ...(truePositives + falsePositives > 0 && {
        precision: round(truePositives / (truePositives + falsePositives)),
      }),
      ...(fraud > 0 && { recall: round(truePositives / fraud) }),
      neverFired: f.d7 === 0,
    };
  });
  return { policy, name: ref.name, revision: ref.revision, decisions, rules };
}

/** One revision of one policy at one `now`: what every query of its report filters by. */
interface Scope {
  db: Db;
  policy: PolicyKind;
  revision: string;
  nowMs: number;
}

/** The `decision` column naming the scope's revision. */
const revisionColumn = (s: Scope) => (s.policy === 'active' ? 'policy_revision' : 'shadow_revision');

/**
 * A report window `(nowMs - windowMs, nowMs]` as `splitByHours` ranges (at_ms is whole
 * milliseconds): its whole hours from the hour tables, its ends from the rows.
 */
const windowParts = (nowMs: number, windowMs: number) =>
  splitByHours({ fromMs: Math.trunc(nowMs) - windowMs + 1, toMs: Math.trunc(nowMs) + 1 });

/** `q` over the range `r` of at_ms. */
const inRange = <Q extends { where: (...args: never[]) => Q }>(q: Q, column: string, r: TimeRange): Q => {
  // biome-ignore lint/suspicious/noExplicitAny: one helper over three builders' where.
  let w = q as any;
  if (r.fromMs !== undefined) w = w.where(column, '>=', r.fromMs);
  if (r.toMs !== undefined) w = w.where(column, '<', r.toMs);
  return w as Q;
};

/**
 * The revision's decisions per window: per window, the whole hours' counts from decision_hour and
 * the ends' from a range of decision_revision_at (or its shadow twin).
 */
async function decisionCounts(s: Scope): Promise<FireCounts> {
  const count = async (windowMs: number) => {
    const { hours, edges } = windowParts(s.nowMs, windowMs);
    const parts = await Promise.all([
      ...edges.map((r) =>
        inRange(
          s.db
            .selectFrom('decision')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where(revisionColumn(s), '=', s.revision),
          'at_ms',
          r,
        ).executeTakeFirst(),
      ),
      ...(hours === undefined
        ? []
        : [
            inRange(
              hourDb(s.db)
                .selectFrom('decision_hour')
                .select((eb) => eb.fn.sum<number>('decisions').as('n'))
                .where(revisionColumn(s), '=', s.revision),
              'hour_ms',
              hours,
            ).executeTakeFirst(),
          ]),
    ]);
    // PostgreSQL answers counts and sums as strings; a sum of no row is null.
    return parts.reduce((n, row) => n + Number(row?.n ?? 0), 0);
  };
  const [h1, h24, d7] = await Promise.all([count(WINDOW_MS.h1), count(WINDOW_MS.h24), count(WINDOW_MS.d7)]);
  return { h1, h24, d7 };
}

/** The revision's decisions of the last 7 d currently labelled fraud: the positives. */
async function labelledFraud(s: Scope): Promise<number> {
  const row = await s.db
    .selectFrom('decision')
    .select((eb) => eb.fn.countAll<number>().as('fraud'))
    .where(revisionColumn(s), '=', s.revision)
    .where('label', '=', 'fraud')
    .where('at_ms', '>', s.nowMs - WINDOW_MS.d7)
    .where('at_ms', '<=', s.nowMs)
    .executeTakeFirst();
  return Number(row?.fraud ?? 0);
}

/**
 * Each rule's fires over 7 d: the whole hours from decision_rule_hour, the ends from one range per
 * rule of decision_rule_revision, grouped in index order (naming the rules lets both engines seek
 * each rule's range instead of sorting every row).
 */
async function weekFires(s: Scope, ruleIds: readonly string[] | undefined): Promise<Map<string, number>> {
  const { hours, edges } = windowParts(s.nowMs, WINDOW_MS.d7);
  const parts = await Promise.all([
    ...edges.map((r) =>
      inRange(
        s.db
          .selectFrom('decision_rule')
          .select((eb) => ['rule_id', eb.fn.countAll<number>().as('fires')])
          .where('policy_revision', '=', s.revision)
          .where('policy', '=', s.policy)
          .$if(ruleIds !== undefined, (q) => q.where('rule_id', 'in', ruleIds!)),
        'at_ms',
        r,
      )
        .groupBy('rule_id')
        .execute(),
    ),
    ...(hours === undefined
      ? []
      : [
          inRange(
            hourDb(s.db)
              .selectFrom('decision_rule_hour')
              .select((eb) => ['rule_id', eb.fn.sum<number>('fires').as('fires')])
              .where('policy_revision', '=', s.revision)
              .where('policy', '=', s.policy)
              .$if(ruleIds !== undefined, (q) => q.where('rule_id', 'in', ruleIds!)),
            'hour_ms',
            hours,
          )
            .groupBy('rule_id')
            .execute(),
        ]),
  ]);
  const fires = new Map<string, number>();
  for (const r of parts.flat()) fires.set(r.rule_id, (fires.get(r.rule_id) ?? 0) + Number(r.fires));
  return fires;
}

/** Each rule's fires per hour over the last 24 h, oldest first (hours ago 0: the last hour). */
async function hourlyFires(s: Scope, ruleIds: readonly string[] | undefined): Promise<Map<string, number[]>> {
  const rows = await s.db
    .selectFrom('decision_rule')
    .select((eb) => [
      'rule_id',
      // Integer division on both engines: node:sqlite binds every number as a double, so the cast.
      sql<number>`(cast(${Math.trunc(s.nowMs)} as bigint) - ${eb.ref('at_ms')}) / ${sql.lit(HOUR_MS)}`.as(
        'hours_ago',
      ),
      eb.fn.countAll<number>().as('fires'),
    ])
    .where('policy_revision', '=', s.revision)
    .where('policy', '=', s.policy)
    .$if(ruleIds !== undefined, (q) => q.where('rule_id', 'in', ruleIds!))
    .where('at_ms', '>', s.nowMs - WINDOW_MS.h24)
    .where('at_ms', '<=', s.nowMs)
    .groupBy(['rule_id', 'hours_ago'])
    .execute();
  const byRule = new Map<string, number[]>();
  for (const row of rows) {
    const hours = byRule.get(row.rule_id) ?? new Array<number>(24).fill(0);
    const hoursAgo = Math.trunc(Number(row.hours_ago));
    if (hoursAgo >= 0 && hoursAgo < 24) hours[23 - hoursAgo]! += Number(row.fires);
    byRule.set(row.rule_id, hours);
  }
  return byRule;
}

/**
 * Per rule, its fires on the revision's labelled decisions of the last 7 d, by label. Driven from
 * the labelled decisions (few; a partial index) into each one's rule rows by primary key: a cross
 * join, which SQLite keeps in the written order, so it never walks every rule row instead.
 */
async function labelledFires(s: Scope): Promise<Map<string, { fraud: number; legit: number }>> {
  const rows = await s.db
    .selectFrom('decision as d')
    .crossJoin('decision_rule as r')
    .select((eb) => ['r.rule_id', 'd.label', eb.fn.countAll<number>().as('decisions')])
    .whereRef('r.decision_id', '=', 'd.decision_id')
    .where('r.policy', '=', s.policy)
    .where(`d.${revisionColumn(s)}`, '=', s.revision)
    .where('d.label', 'in', ['fraud', 'legit'])
    .where('d.at_ms', '>', s.nowMs - WINDOW_MS.d7)
    .where('d.at_ms', '<=', s.nowMs)
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

/**
 * agreement[active][shadow] over the last 7 d's decisions of both revisions, every cell present:
 * the whole hours from decision_hour, the ends from nine ranges of decision_agreement.
 */
async function agreementMatrix(
  db: Db,
  activeRevision: string,
  shadowRevision: string,
  nowMs: number,
): Promise<Record<Verdict, Record<Verdict, number>>> {
  const { hours, edges } = windowParts(nowMs, WINDOW_MS.d7);
  const parts = await Promise.all([
    ...edges.map((r) =>
      inRange(
        db
          .selectFrom('decision')
          .select((eb) => ['verdict', 'shadow_verdict', eb.fn.countAll<number>().as('decisions')])
          .where('policy_revision', '=', activeRevision)
          .where('shadow_revision', '=', shadowRevision)
          .where('verdict', 'in', VERDICTS)
          .where('shadow_verdict', 'in', VERDICTS),
        'at_ms',
        r,
      )
        .groupBy(['verdict', 'shadow_verdict'])
        .execute(),
    ),
    ...(hours === undefined
      ? []
      : [
          inRange(
            hourDb(db)
              .selectFrom('decision_hour')
              .select((eb) => ['verdict', 'shadow_verdict', eb.fn.sum<number>('decisions').as('decisions')])
              .where('policy_revision', '=', activeRevision)
              .where('shadow_revision', '=', shadowRevision)
              .where('verdict', 'in', VERDICTS)
              .where('shadow_verdict', 'in', VERDICTS),
            'hour_ms',
            hours,
          )
            .groupBy(['verdict', 'shadow_verdict'])
            .execute(),
        ]),
  ]);
  const rows = parts.flat();
  const row = () => Object.fromEntries(VERDICTS.map((v) => [v, 0])) as Record<Verdict, number>;
  const matrix = Object.fromEntries(VERDICTS.map((v) => [v, row()])) as Record<
    Verdict,
    Record<Verdict, number>
  >;
  for (const r of rows) matrix[r.verdict as Verdict][r.shadow_verdict as Verdict] += Number(r.decisions);
  return matrix;
}

/** How long a report is kept and shared (ms): what the Rules page says of its age. */
export const RULE_REPORT_MAX_AGE_MS = 30_000;
/** Scopes (revisions asked for) kept at once: an operator browsing earlier revisions. */
const MAX_CACHED_SCOPES = 16;

/**
 * `reader` with each scope's report kept for `maxAgeMs` (`RuleReportCacheOptions`) and
 * shared by concurrent callers: on SQLite the report's queries take ~80 ms of CPU per revision
 * over 1,000,000 decisions (bench/RESULTS.md "Issue 25: rule report"; on the database's thread,
 * off the event loop, but holding the one connection the other features query), so operators
 * refreshing the Rules page must not run them once each while the process is deciding logins. At
 * most `MAX_CACHED_SCOPES` scopes are kept (the oldest forgotten first). A report for an explicit
 * `nowMs` (tests, replays of a moment) is never cached. Kept per active revision (with
 * `options.revision`): after an activation the next read computes the new revision's report.
 */
export interface RuleReportCacheOptions {
  /** How long a report is kept (ms). Default `RULE_REPORT_MAX_AGE_MS` (30 000). */
  maxAgeMs?: number;
  /** The active revision: a report of another is never served (an activation shows at once). */
  revision?: () => string;
}

export function cachedRuleReport(
  reader: RuleReportReader,
  options: RuleReportCacheOptions = {},
): RuleReportReader & { invalidate(): void } {
  const maxAgeMs = options.maxAgeMs ?? RULE_REPORT_MAX_AGE_MS;
  const cached = new Map<string, { atMs: number; report: Promise<RuleReport> }>();
  return {
    report(nowMs?: number, scope: RuleReportScope = {}) {
      if (nowMs !== undefined) return reader.report(nowMs, scope);
      const key = `${options.revision?.() ?? ''} ${scope.revision ?? ''}`;
      const now = Date.now();
      let entry = cached.get(key);
      if (entry === undefined || now - entry.atMs >= maxAgeMs) {
        const report = reader.report(now, scope);
        entry = { atMs: now, report };
        cached.delete(key);
        cached.set(key, entry);
        if (cached.size > MAX_CACHED_SCOPES) cached.delete(cached.keys().next().value!);
        // A failed report is not kept: the next caller asks again.
        report.catch(() => {
          if (cached.get(key)?.report === report) cached.delete(key);
        });
      }
      return entry.report;
    },
    /** Forgets the kept reports: the next reader sees a label just written. */
    invalidate() {
      cached.clear();
    },
  };
}
