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

export interface RuleReport {
  generatedAt: string;
  active: RevisionReport;
  shadow?: RevisionReport;
  /** agreement[active][shadow]: decisions over 7 d with that pair of verdicts. Absent with no shadow. */
  agreement?: Record<Verdict, Record<Verdict, number>>;
}

export interface RuleReportReader {
  report(nowMs?: number): Promise<RuleReport>;
}
