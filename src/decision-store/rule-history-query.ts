import type { Kysely } from 'kysely';
import type { DecisionTables } from './decision-tables.ts';
import type {
  RevisionMarker,
  RevisionReport,
  RuleAcrossRevisions,
  RuleHistory,
  RuleInRevision,
  RuleReportScope,
} from './rule-report.ts';
import { rate, round } from './rule-report.ts';

/**
 * The rule report's history (issue 33): each rule id of the active policy's name as one series
 * across the revisions that decided in the last 7 d, so an edit no longer wipes a rule's fires,
 * precision and recall, and labels given under the previous revision still count for it.
 *
 * Which revisions: the distinct `policy_revision` of the name's decisions, found by a skip scan of
 * decision_name_revision (one index seek per revision, not a pass over the decisions), each with
 * its first and last decision (two more seeks). The newest `MAX_REPORTED_REVISIONS` that decided in
 * the window are reported (the active one always), each by the same queries as the active revision
 * (src/decision-store/rule-report-query.ts), so the report's cost grows with the revisions
 * reported, never with the decisions beyond the index ranges it already read.
 *
 * An earlier revision's rules are those its stored rows name (what fired or was labelled): the
 * store keeps no policy text. A rule is `removed` when the active revision does not list it.
 */

/** Revisions of one name reported at most (their per-revision queries are the report's cost). */
export const MAX_REPORTED_REVISIONS = 8;
/** Distinct revisions of one name looked at at most (within retention: edits, not decisions). */
const MAX_SCANNED_REVISIONS = 200;
const WEEK_MS = 7 * 24 * 3_600_000;

type Db = Kysely<DecisionTables>;

/** A policy version of the control database, as a marker names it. */
export interface KnownVersion {
  id: string;
  name: string;
  revision: string;
  author: string;
  message: string;
  state: string;
}

interface Span {
  revision: string;
  firstMs: number;
  lastMs: number;
}

/** What the history is computed from. */
export interface RuleHistoryInput {
  db: Db;
  /** The active policy's name and current revision. */
  active: { name: string; revision: string };
  /** The current revision's report (already computed): it stands for that revision. */
  activeReport: RevisionReport;
  nowMs: number;
  scope: RuleReportScope;
  /** The policy versions of the control database: they name the revisions they carry. */
  versions: readonly KnownVersion[];
  /** An earlier revision's report (its rules: those its rows name). */
  reportOf(revision: string): Promise<RevisionReport>;
}

/** The history of the active policy's name at `nowMs`. */
export async function ruleHistory(input: RuleHistoryInput): Promise<RuleHistory> {
  const { db, active, activeReport, nowMs, scope, versions } = input;
  const spans = (await revisionSpans(db, active.name, nowMs)).filter(
    (s) => s.revision === active.revision || (s.lastMs > nowMs - WEEK_MS && s.firstMs <= nowMs),
  );
  const chosen = chooseRevisions(spans, active.revision, scope);
  const reports = await Promise.all(
    chosen.revisions.map((s) => (s.revision === active.revision ? activeReport : input.reportOf(s.revision))),
  );
  // The current revision counts even before its first stored decision (its rules, never fired).
  const merged =
    scope.revision !== undefined || reports.includes(activeReport) ? reports : [...reports, activeReport];
  const markers = chosen.revisions.map((s, i): RevisionMarker => {
    const version = versions.find((v) => v.revision === s.revision && v.name === active.name);
    return {
      revision: s.revision,
      firstDecisionAt: new Date(s.firstMs).toISOString(),
      lastDecisionAt: new Date(s.lastMs).toISOString(),
      decisions: reports[i]!.decisions,
      current: s.revision === active.revision,
      ...(version !== undefined && {
        version: { id: version.id, author: version.author, message: version.message, state: version.state },
      }),
    };
  });
  return {
    name: active.name,
    scope: scope.revision === undefined ? 'all' : 'revision',
    revisions: markers,
    omittedRevisions: chosen.omitted,
    rules: mergeByRuleId(merged, activeReport, scope.revision === undefined),
  };
}

/** Oldest first; the newest bounded few (the current one always), or the one asked for. */
function chooseRevisions(
  spans: Span[],
  current: string,
  scope: RuleReportScope,
): { revisions: Span[]; omitted: number } {
  if (scope.revision !== undefined)
    return { revisions: spans.filter((s) => s.revision === scope.revision), omitted: 0 };
  const newestFirst = [...spans].sort((a, b) => b.lastMs - a.lastMs || b.firstMs - a.firstMs);
  const kept = newestFirst.slice(0, MAX_REPORTED_REVISIONS);
  const currentSpan = spans.find((s) => s.revision === current);
  if (currentSpan !== undefined && !kept.includes(currentSpan)) kept[kept.length - 1] = currentSpan;
  return { revisions: kept.sort((a, b) => a.firstMs - b.firstMs), omitted: spans.length - kept.length };
}

/**
 * Each revision of `name` with its first and last stored decision: a skip scan of
 * decision_name_revision (the next revision after the last one found), then two seeks each.
 */
async function revisionSpans(db: Db, name: string, nowMs: number): Promise<Span[]> {
  const revisions: string[] = [];
  let after = '';
  for (let i = 0; i < MAX_SCANNED_REVISIONS; i++) {
    const row = await db
      .selectFrom('decision')
      .select('policy_revision')
      .where('policy_name', '=', name)
      .where('policy_revision', '>', after)
      .orderBy('policy_revision')
      .limit(1)
      .executeTakeFirst();
    if (row === undefined) break;
    revisions.push(row.policy_revision);
    after = row.policy_revision;
  }
  const edge = async (revision: string, order: 'asc' | 'desc') => {
    const row = await db
      .selectFrom('decision')
      .select('at_ms')
      .where('policy_name', '=', name)
      .where('policy_revision', '=', revision)
      .where('at_ms', '<=', nowMs)
      .orderBy('at_ms', order)
      .limit(1)
      .executeTakeFirst();
    return row === undefined ? undefined : Number(row.at_ms);
  };
  const spans = await Promise.all(
    revisions.map(async (revision) => {
      const [firstMs, lastMs] = await Promise.all([edge(revision, 'asc'), edge(revision, 'desc')]);
      return firstMs === undefined || lastMs === undefined ? undefined : { revision, firstMs, lastMs };
    }),
  );
  return spans.filter((s): s is Span => s !== undefined);
}

/**
 * One series per rule id: with `activeFirst`, the active revision's rules first (its order), then
 * the removed ones (sorted); otherwise the rules of the reports alone, in their order.
 */
function mergeByRuleId(
  reports: RevisionReport[],
  activeReport: RevisionReport,
  activeFirst: boolean,
): RuleAcrossRevisions[] {
  const current = activeReport.rules.map((r) => r.ruleId);
  const seen = [...new Set(reports.flatMap((rev) => rev.rules.map((r) => r.ruleId)))];
  const order = activeFirst ? [...current, ...seen.filter((id) => !current.includes(id)).sort()] : seen;
  const decisions = sumWindows(reports.map((rev) => rev.decisions));
  return order.map((ruleId) => {
    const inRevisions = reports.flatMap((rev) => {
      const r = rev.rules.find((x) => x.ruleId === ruleId);
      return r === undefined ? [] : [{ rev, r }];
    });
    const fires = sumWindows(inRevisions.map(({ r }) => r.fires));
    const hourly = new Array<number>(24).fill(0);
    for (const { r } of inRevisions) for (const [i, n] of r.hourly.entries()) hourly[i]! += n;
    const sum = (k: 'truePositives' | 'falsePositives' | 'falseNegatives') =>
      inRevisions.reduce((a, { r }) => a + r.labelled[k], 0);
    const labelled = {
      truePositives: sum('truePositives'),
      falsePositives: sum('falsePositives'),
      falseNegatives: sum('falseNegatives'),
    };
    const description = inRevisions.find(({ r }) => r.description !== undefined)?.r.description;
    return {
      ruleId,
      ...(description !== undefined && { description }),
      status: current.includes(ruleId) ? 'current' : 'removed',
      fires,
      fireRate: {
        h1: rate(fires.h1, decisions.h1),
        h24: rate(fires.h24, decisions.h24),
        d7: rate(fires.d7, decisions.d7),
      },
      hourly,
      labelled,
      ...precisionAndRecall(labelled),
      neverFired: fires.d7 === 0,
      byRevision: inRevisions.map(
        ({ rev, r }): RuleInRevision => ({
          revision: rev.revision,
          fires: r.fires.d7,
          ...r.labelled,
          ...(r.precision !== undefined && { precision: r.precision }),
        }),
      ),
    } satisfies RuleAcrossRevisions;
  });
}

function precisionAndRecall(l: RuleAcrossRevisions['labelled']): { precision?: number; recall?: number } {
  const fired = l.truePositives + l.falsePositives;
  const fraud = l.truePositives + l.falseNegatives;
  return {
    ...(fired > 0 && { precision: round(l.truePositives / fired) }),
    ...(fraud > 0 && { recall: round(l.truePositives / fraud) }),
  };
}

const sumWindows = (all: { h1: number; h24: number; d7: number }[]) =>
  all.reduce((a, w) => ({ h1: a.h1 + w.h1, h24: a.h24 + w.h24, d7: a.d7 + w.d7 }), { h1: 0, h24: 0, d7: 0 });
