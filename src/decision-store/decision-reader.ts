import { type SelectQueryBuilder, sql } from 'kysely';
import type { DecisionLine } from '../decide/decision-line.ts';
import { outcomeLabelOf } from '../outcomes/outcome-labels.ts';
import type { DecisionDb } from './decision-batch.ts';
import type {
  DecisionFilter,
  DecisionPage,
  DecisionReader,
  DecisionStoreStatus,
  DecisionSummary,
  Label,
  StoredActionOutcome,
  StoredDecision,
  StoredOutcome,
  TimeSlice,
  Verdict,
  VerdictCounts,
} from './decision-query.ts';
import type { DecisionTables } from './decision-tables.ts';
import { HOUR_MS, type HourCount, type HourDb, hourVerdictCounts, splitByHours } from './hour-counts.ts';

/**
 * The decision store's queries, in kysely's builder: the same text on SQLite and PostgreSQL. Pages
 * are newest first on (at_ms, decision_id), each filter served by an index ending in that order
 * (src/decision-store/decision-tables.ts); the cursor is the last row's pair. PostgreSQL returns
 * bigint columns and counts as strings: every number read goes through `Number()`.
 */

export const DEFAULT_PAGE_LIMIT = 50;
export const MAX_PAGE_LIMIT = 200;

/** A page's cursor: the last row's time and id, opaque to callers (base64url). */
export function encodeCursor(atMs: number, decisionId: string): string {
  return Buffer.from(`${atMs}:${decisionId}`).toString('base64url');
}

/** The cursor's time and id, or undefined when it is not one of ours. */
export function decodeCursor(cursor: string): { atMs: number; decisionId: string } | undefined {
  const text = Buffer.from(cursor, 'base64url').toString();
  const m = /^(\d{1,16}):([\w-]{1,100})$/.exec(text);
  return m === null ? undefined : { atMs: Number(m[1]), decisionId: m[2]! };
}

type DecisionQuery<O> = SelectQueryBuilder<DecisionTables, 'decision', O>;

/**
 * The decisions of `filter`, from `decision`; with a rule, from that rule's rows joined to their
 * decisions, so that a page walks the rule's index in page order (an `in (subquery)` read every
 * match first). The page order's table is `decision_rule` then (same times, same ids).
 */
function source(db: DecisionDb, f: DecisionFilter): { q: DecisionQuery<object>; order: string } {
  const { rule, fromMs, toMs } = f;
  if (rule === undefined) return { q: db.selectFrom('decision'), order: 'decision' };
  // The time range on the rule's rows too (their at_ms is their decision's): the rule's index is
  // read for the range only, not for every match of the rule (3.4 s for a common rule's hour
  // over 1,000,000 decisions, bench/RESULTS.md "Issue 32: the store over 1,000,000 decisions").
  const joined = db
    .selectFrom('decision_rule')
    .innerJoin('decision', 'decision.decision_id', 'decision_rule.decision_id')
    .where('decision_rule.rule_id', '=', rule)
    .where('decision_rule.policy', '=', 'active')
    .$if(fromMs !== undefined, (q) => q.where('decision_rule.at_ms', '>=', fromMs!))
    .$if(toMs !== undefined, (q) => q.where('decision_rule.at_ms', '<', toMs!));
  // Every filter names its column with its table: the join's wider scope changes nothing else.
  return { q: joined as unknown as DecisionQuery<object>, order: 'decision_rule' };
}

function filtered<O>(q: DecisionQuery<O>, f: DecisionFilter): DecisionQuery<O> {
  if (f.fromMs !== undefined) q = q.where('decision.at_ms', '>=', f.fromMs);
  if (f.toMs !== undefined) q = q.where('decision.at_ms', '<', f.toMs);
  if (f.verdict !== undefined) q = q.where('decision.verdict', '=', f.verdict);
  if (f.accountId !== undefined) q = q.where('decision.account_id', '=', f.accountId);
  if (f.userId !== undefined) q = q.where('decision.user_id', '=', f.userId);
  if (f.ip !== undefined) q = q.where('decision.ip', '=', f.ip);
  if (f.unitId !== undefined) q = q.where('decision.unit_id', '=', f.unitId);
  // Literals, not parameters: SQLite uses a partial index only for a condition it sees.
  if (f.degraded !== undefined) q = q.where('decision.degraded', '=', sql.lit(f.degraded ? 1 : 0));
  if (f.shadowDisagrees !== undefined) {
    q = f.shadowDisagrees
      ? q.where('decision.shadow_disagrees', '=', sql.lit(1))
      : q
          .where('decision.shadow_disagrees', '=', sql.lit(0))
          .where('decision.shadow_verdict', 'is not', null);
  }
  if (f.label === 'none') q = q.where('decision.label', 'is', null);
  else if (f.label !== undefined) q = q.where('decision.label', '=', f.label);
  return q;
}

const SUMMARY_COLUMNS = [
  'decision_id',
  'at_ms',
  'verdict',
  'score',
  'degraded',
  'policy_name',
  'policy_revision',
  'account_id',
  'user_id',
  'ip',
  'unit_id',
  'shadow_verdict',
  'label',
  'total_ms',
] as const;

type SummaryRow = Pick<DecisionTables['decision'], (typeof SUMMARY_COLUMNS)[number]>;

function summaryOf(row: SummaryRow, rules: string[]): DecisionSummary {
  return {
    decisionId: row.decision_id,
    at: new Date(Number(row.at_ms)).toISOString(),
    verdict: row.verdict as Verdict,
    score: Number(row.score),
    degraded: Number(row.degraded) === 1,
    rules,
    ...(row.account_id !== null && { accountId: row.account_id }),
    ...(row.user_id !== null && { userId: row.user_id }),
    ...(row.ip !== null && { ip: row.ip }),
    ...(row.unit_id !== null && { unitId: row.unit_id }),
    policy: { name: row.policy_name, revision: row.policy_revision },
    ...(row.shadow_verdict !== null && { shadowVerdict: row.shadow_verdict as Verdict }),
    ...(row.label !== null && { label: row.label as Label }),
    totalMs: Number(row.total_ms),
  };
}

/** The active policy's matched rules of `ids`, by decision. */
async function activeRules(db: DecisionDb, ids: string[]): Promise<Map<string, string[]>> {
  const byDecision = new Map<string, string[]>();
  if (ids.length === 0) return byDecision;
  const rows = await db
    .selectFrom('decision_rule')
    .select(['decision_id', 'rule_id'])
    .where('decision_id', 'in', ids)
    .where('policy', '=', 'active')
    .execute();
  for (const r of rows) byDecision.set(r.decision_id, [...(byDecision.get(r.decision_id) ?? []), r.rule_id]);
  return byDecision;
}

/**
 * The actions of a decision: each outcome the outbox reported, and for an action the decision
 * answered that has none yet (queued, deferred, skipped, or done before the answer), what the
 * decision line says of it.
 */
function actionsOf(line: DecisionLine, rows: DecisionTables['decision_action'][]): StoredActionOutcome[] {
  const outcomes: StoredActionOutcome[] = rows.map((a) => ({
    actionId: a.action_id,
    type: a.type,
    target: a.target,
    status: a.status,
    at: new Date(Number(a.at_ms)).toISOString(),
    detail: JSON.parse(a.detail) as Record<string, unknown>,
  }));
  const reported = new Set(outcomes.map((o) => o.type));
  for (const action of line.actions ?? []) {
    if (reported.has(action.type)) continue;
    const { type, status, oneTimeCode: _secret, ...detail } = action;
    outcomes.push({ actionId: `${line.decisionId}:${type}`, type, target: '', status, at: line.at, detail });
  }
  return outcomes;
}

/** The reader over `db`; `status` is the writer's. */
export function createDecisionReader(db: DecisionDb, status: () => DecisionStoreStatus): DecisionReader {
  return {
    status,
    async list(filter) {
      const limit = Math.min(filter.limit ?? DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT);
      const { q: from, order } = source(db, filter);
      let q = filtered(from.select(SUMMARY_COLUMNS.map((c) => `decision.${c}` as const)), filter);
      const at = sql.ref<number>(`${order}.at_ms`);
      const id = sql.ref<string>(`${order}.decision_id`);
      const after = filter.cursor === undefined ? undefined : decodeCursor(filter.cursor);
      if (after !== undefined) {
        q = q.where((eb) =>
          eb.or([eb(at, '<', after.atMs), eb.and([eb(at, '=', after.atMs), eb(id, '<', after.decisionId)])]),
        );
      }
      const rows = await q
        .orderBy(at, 'desc')
        .orderBy(id, 'desc')
        .limit(limit + 1)
        .execute();
      const page = rows.slice(0, limit);
      const rules = await activeRules(
        db,
        page.map((r) => r.decision_id),
      );
      const last = page.at(-1);
      const result: DecisionPage = {
        decisions: page.map((r) => summaryOf(r, rules.get(r.decision_id) ?? [])),
      };
      if (rows.length > limit && last !== undefined)
        result.nextCursor = encodeCursor(Number(last.at_ms), last.decision_id);
      return result;
    },
    async get(decisionId) {
      const row = await db
        .selectFrom('decision')
        .selectAll()
        .where('decision_id', '=', decisionId)
        .executeTakeFirst();
      if (row === undefined) return undefined;
      const [rules, labels, outcomes, actions] = await Promise.all([
        activeRules(db, [decisionId]),
        db
          .selectFrom('decision_label')
          .selectAll()
          .where('decision_id', '=', decisionId)
          .orderBy('at_ms')
          .execute(),
        db
          .selectFrom('decision_outcome')
          .selectAll()
          .where('decision_id', '=', decisionId)
          .orderBy('at_ms')
          .execute(),
        db
          .selectFrom('decision_action')
          .selectAll()
          .where('decision_id', '=', decisionId)
          .orderBy('at_ms')
          .execute(),
      ]);
      const line = JSON.parse(row.line) as DecisionLine;
      const whole: StoredDecision = {
        ...summaryOf(row, rules.get(decisionId) ?? []),
        line,
        labels: labels.map((l) => ({
          label: l.label as Label,
          labelledBy: l.labelled_by,
          at: new Date(Number(l.at_ms)).toISOString(),
          ...(l.note !== null && { note: l.note }),
        })),
        outcomes: outcomes.map((o) => {
          const label = outcomeLabelOf(row.verdict, o.type, o.value);
          return {
            type: o.type as StoredOutcome['type'],
            value: o.value,
            reportedBy: o.reported_by,
            at: new Date(Number(o.at_ms)).toISOString(),
            ...(label !== undefined && { label }),
          };
        }),
        ...(row.outcome_label !== null && { outcomeLabel: row.outcome_label as Label }),
        actions: actionsOf(line, actions),
      };
      return whole;
    },
    async countByVerdict(filter) {
      const counts: VerdictCounts = { allow: 0, challenge: 0, deny: 0, total: 0 };
      for (const r of await countParts(db, filter)) {
        if (r.verdict === 'allow' || r.verdict === 'challenge' || r.verdict === 'deny')
          counts[r.verdict] += r.n;
        counts.total += r.n;
      }
      return counts;
    },
    async countOverTime(filter, bucketMs) {
      const step = Math.max(1, Math.trunc(bucketMs));
      const bySlice = new Map<number, TimeSlice>();
      for (const r of await countParts(db, filter, step)) {
        const atMs = r.atMs!;
        const s = bySlice.get(atMs) ?? { atMs, allow: 0, challenge: 0, deny: 0, total: 0 };
        if (r.verdict === 'allow' || r.verdict === 'challenge' || r.verdict === 'deny') s[r.verdict] += r.n;
        s.total += r.n;
        bySlice.set(atMs, s);
      }
      return [...bySlice.values()].sort((a, b) => a.atMs - b.atMs);
    },
  };
}

/** The filters the hour tables count by (src/decision-store/hour-counts.ts); any other, the rows. */
const HOURLY_FILTERS = new Set(['fromMs', 'toMs', 'verdict', 'rule', 'cursor', 'limit']);

/**
 * The counts of `filter` by verdict (and by slice of `step` when given): from the hour tables for
 * the whole hours of its range when it filters by nothing else than time, verdict and rule (and
 * slices are whole hours), from the rows for the rest. Exact either way: the parts do not overlap.
 */
async function countParts(db: DecisionDb, filter: DecisionFilter, step?: number): Promise<HourCount[]> {
  const hourly =
    Object.entries(filter).every(([k, v]) => v === undefined || HOURLY_FILTERS.has(k)) &&
    (step === undefined || step % HOUR_MS === 0);
  const { hours, edges } = hourly ? splitByHours(filter) : { hours: undefined, edges: [filter] };
  const parts = await Promise.all([
    ...edges.map((range) => rowCounts(db, { ...filter, ...range }, step)),
    ...(hours === undefined
      ? []
      : [
          hourVerdictCounts(db as unknown as HourDb, hours, {
            verdict: filter.verdict,
            rule: filter.rule,
            ...(step !== undefined && { stepMs: step }),
          }),
        ]),
  ]);
  return parts.flat();
}

/** The counts of `filter` by verdict (and by slice of `step`) from the decisions' rows. */
async function rowCounts(db: DecisionDb, filter: DecisionFilter, step?: number): Promise<HourCount[]> {
  // Integer division on both engines, at_ms never negative. The width is a literal (an integer
  // riskgate computed): bound as a parameter, SQLite takes a JS number for a REAL and divides
  // to a fraction, one slice per decision.
  const slice = step === undefined ? sql<number>`0` : sql<number | string>`decision.at_ms / ${sql.lit(step)}`;
  const rows = await filtered(
    source(db, filter).q.select((eb) => [
      slice.as('slice'),
      'decision.verdict',
      eb.fn.countAll<number | string>().as('n'),
    ]),
    filter,
  )
    .groupBy(step === undefined ? ['decision.verdict'] : [slice, 'decision.verdict'])
    .execute();
  // PostgreSQL answers counts as strings.
  return rows.map((r) => ({
    ...(step !== undefined && { atMs: Number(r.slice) * step }),
    verdict: r.verdict,
    n: Number(r.n),
  }));
}
