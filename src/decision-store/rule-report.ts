import type { Verdict } from './decision-query.ts';

/**
 * Each rule's quality on live traffic, from the decision store: how often it fires over 1 h, 24 h
 * and 7 d (with an hourly series for a small chart), its precision and recall against the labels,
 * whether it never fired, and how the shadow policy's verdicts compare with the active one's.
 * What the console's Rules page and `GET /rules/report` show.
 */

export interface FireCounts {
  h1: number;
  h24: number;
  d7: number;
}

export interface RuleQuality {
  ruleId: string;
  description?: string;
  /** Decisions of this revision it matched, per window. */
  fires: FireCounts;
  /** `fires` over the revision's decisions in the same window (0 when none). */
  fireRate: FireCounts;
  /** Matches per hour over the last 24 h, oldest first (24 numbers). */
  hourly: number[];
  /** Against labelled decisions (7 d): fired on fraud, fired on legit, missed fraud. */
  labelled: { truePositives: number; falsePositives: number; falseNegatives: number };
  /** truePositives / (truePositives + falsePositives); absent with no labelled fire. */
  precision?: number;
  /** truePositives / (truePositives + falseNegatives); absent with no labelled fraud. */
  recall?: number;
  neverFired: boolean;
}

export interface RevisionReport {
  policy: 'active' | 'shadow';
  name: string;
  revision: string;
  decisions: FireCounts;
  rules: RuleQuality[];
}

/**
 * One revision of the active policy's name that decided in the last 7 d: a marker on each rule's
 * series. When it began deciding is its first stored decision (the decisions carry their revision);
 * the policy version carrying it, when the control database has one, says who made it and why.
 */
export interface RevisionMarker {
  revision: string;
  /** Its first stored decision (RFC 3339): when it became active, as far as the store knows. */
  firstDecisionAt: string;
  /** Its last stored decision (RFC 3339). */
  lastDecisionAt: string;
  /** Its decisions per window. */
  decisions: FireCounts;
  /** The active policy's current revision. */
  current: boolean;
  /** The policy version carrying this revision, when one does. */
  version?: { id: string; author: string; message: string; state: string };
}

/** One rule's counts in one revision (over the last 7 d). */
export interface RuleInRevision {
  revision: string;
  fires: number;
  truePositives: number;
  falsePositives: number;
  falseNegatives: number;
  precision?: number;
}

/**
 * One rule id across the revisions reported: one series, whatever the revisions changed around
 * it. Counts are the sums over the revisions in which it was a rule (listed, or matched a decision).
 */
export interface RuleAcrossRevisions extends RuleQuality {
  /** `current`: a rule of the active revision; `removed`: only earlier revisions had it. */
  status: 'current' | 'removed';
  /** Its counts per revision, in the order of `RuleHistory.revisions`. */
  byRevision: RuleInRevision[];
}

/** The active policy's rules across its revisions (or the one revision asked for). */
export interface RuleHistory {
  name: string;
  /** `all`: every revision of the name that decided in 7 d (the newest `MAX_REPORTED_REVISIONS`). */
  scope: 'all' | 'revision';
  /** Oldest first. */
  revisions: RevisionMarker[];
  /** Revisions of the window left out (past the bound), 0 when none. */
  omittedRevisions: number;
  /** The active revision's rule ids first (file order), then rules only earlier revisions had. */
  rules: RuleAcrossRevisions[];
}

export interface RuleReport {
  generatedAt: string;
  active: RevisionReport;
  shadow?: RevisionReport;
  /** agreement[active][shadow]: decisions over 7 d with that pair of verdicts. Absent with no shadow. */
  agreement?: Record<Verdict, Record<Verdict, number>>;
  /** Each rule by id across the active policy's revisions (issue 33). */
  history: RuleHistory;
}

/** What a report covers: by default every revision of the active policy's name. */
export interface RuleReportScope {
  /** One revision of the active policy's name alone (an earlier one, say). */
  revision?: string;
}

export interface RuleReportReader {
  report(nowMs?: number, scope?: RuleReportScope): Promise<RuleReport>;
}

/** A figure of the report, to four decimals. */
export const round = (x: number) => Math.round(x * 10_000) / 10_000;

/**
 * `part` of `whole`, at most 1. The report's counts are separate queries over a store being
 * written: a decision stored between the decisions' count and the fires' count can make a rule
 * that fires on every decision read 5 fires of 4 decisions. A share of decisions is never above 1.
 */
export const rate = (part: number, whole: number) => (whole === 0 ? 0 : round(Math.min(1, part / whole)));
