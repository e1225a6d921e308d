import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { numberedLines } from '../logs/ndjson-lines.ts';
import type { CompiledPolicy, PolicySignalName, Verdict } from '../policy/policy-types.ts';
import {
  formatLabelReport,
  type Label,
  type LabelReport,
  LabelTally,
  MAX_REPLAY_LINE_BYTES,
} from './replay-labels.ts';
import { type LoggedDecision, readDecisionLine } from './replay-record.ts';

/**
 * Replays logged decisions with a candidate policy: each decision's recorded inputs evaluated again
 * (no vendor call), compared with what was decided. Streams: a line is read, evaluated and
 * forgotten, so a log of any size runs in constant memory.
 */

export interface ReplayChange {
  decisionId: string;
  from: Verdict;
  to: Verdict;
  scoreFrom: number;
  scoreTo: number;
  /** Inputs the candidate reads that the line does not hold (its result is uncertain). */
  missing?: string[];
}

export interface ReplayReport {
  candidate: { name: string; revision: string };
  /** Lines read, decisions replayed, other lines (action outcomes, overload answers) skipped. */
  lines: number;
  decisions: number;
  skipped: number;
  /** Lines that could not be read as decisions, with the first few reasons. */
  bad: { count: number; first: { line: number; source: string; why: string }[] };
  /** from → to → count. */
  matrix: Record<Verdict, Record<Verdict, number>>;
  changed: number;
  /** The changed decisions: the first `changedLimit`, or all. */
  changes: ReplayChange[];
  score: { meanShift: number; up: number; down: number };
  /** Per rule: matches recorded (`before`, rules of the logged revision) and replayed (`after`). */
  rules: Record<string, { before: number; after: number }>;
  /** Decisions whose replay is uncertain, by the input they lacked. */
  missingInputs: Record<string, number>;
  /** Decisions made by each recorded policy revision. */
  revisions: Record<string, number>;
  /** With `--labels`: each rule's and verdict's precision and recall against analyst labels. */
  labels?: LabelReport;
  elapsedMs: number;
}

export interface ReplayOptions {
  /** Changed decisions listed in the report. Default 20; Infinity for all. */
  changedLimit?: number;
  /** Analyst labels by decision id (`readLabels`): the report scores the candidate against them. */
  labels?: ReadonlyMap<string, Label>;
  /** Longest line read, bytes. Default MAX_REPLAY_LINE_BYTES (16 MiB). */
  maxLineBytes?: number;
}

const VERDICTS: readonly Verdict[] = ['allow', 'challenge', 'deny'];

function emptyMatrix(): ReplayReport['matrix'] {
  return {
    allow: { allow: 0, challenge: 0, deny: 0 },
    challenge: { allow: 0, challenge: 0, deny: 0 },
    deny: { allow: 0, challenge: 0, deny: 0 },
  };
}

/** What the candidate reads that `d` did not record: signals never fetched, Admin reads not made. */
function missingFor(policy: CompiledPolicy, d: LoggedDecision): string[] | undefined {
  const missing: string[] = [];
  for (const s of policy.requirements.signals) {
    if (d.input.signals[s as PolicySignalName] === undefined) missing.push(`signals.${s}`);
  }
  if (
    policy.requirements.adminUser &&
    d.input.user === undefined &&
    d.input.adminUnavailable?.user === undefined
  ) {
    missing.push('user');
  }
  if (policy.requirements.velocity && d.input.featuresUnavailable?.velocity === undefined) {
    // A counter the line did not record (new in the candidate) reads 0: it had counted nothing then.
    const recorded = d.input.velocity;
    for (const c of policy.velocityCounters ?? []) {
      if (recorded?.[c.name] !== undefined) continue;
      missing.push(`velocity.${c.name}`);
      d.input.velocity = { ...d.input.velocity, [c.name]: 0 };
    }
  }
  if (
    policy.requirements.history &&
    d.input.history === undefined &&
    d.input.featuresUnavailable?.history === undefined
  ) {
    missing.push('history');
  }
  // The decision log keeps no list snapshot: list rules replay as if the lists were unavailable.
  if (policy.requirements.lists === true) missing.push('lists');
  return missing.length === 0 ? undefined : missing;
}

/**
 * Replays every decision line of `sources` (paths, or readable streams such as stdin). Rejects
 * with `RiskgateError` `RG_ERR_INVALID_INPUT` at a line longer than `maxLineBytes`, and with Node's
 * error when a source cannot be read.
 */
export async function replayDecisions(
  policy: CompiledPolicy,
  sources: readonly (string | { name: string; stream: Readable })[],
  options: ReplayOptions = {},
): Promise<ReplayReport> {
  const startedAt = performance.now();
  const changedLimit = options.changedLimit ?? 20;
  const report: ReplayReport = {
    candidate: { name: policy.name, revision: policy.revision },
    lines: 0,
    decisions: 0,
    skipped: 0,
    bad: { count: 0, first: [] },
    matrix: emptyMatrix(),
    changed: 0,
    changes: [],
    score: { meanShift: 0, up: 0, down: 0 },
    rules: {},
    missingInputs: {},
    revisions: {},
    elapsedMs: 0,
  };
  const rule = (id: string) => {
    let r = report.rules[id];
    if (r === undefined) {
      r = { before: 0, after: 0 };
      report.rules[id] = r;
    }
    return r;
  };
  for (const id of policy.ruleIds ?? []) rule(id);
  let shiftSum = 0;
  const tally =
    options.labels === undefined ? undefined : new LabelTally(options.labels, policy.ruleIds ?? []);

  for (const source of sources) {
    const name = typeof source === 'string' ? source : source.name;
    const stream =
      typeof source === 'string' ? createReadStream(source, { highWaterMark: 1 << 20 }) : source.stream;
    for await (const { text, lineNo } of numberedLines(
      stream,
      name,
      options.maxLineBytes ?? MAX_REPLAY_LINE_BYTES,
    )) {
      report.lines++;
      const read = readDecisionLine(text);
      if (read.kind === 'other') {
        report.skipped++;
        continue;
      }
      if (read.kind === 'bad') {
        report.bad.count++;
        if (report.bad.first.length < 5) report.bad.first.push({ line: lineNo, source: name, why: read.why });
        continue;
      }
      const d = read.decision;
      report.decisions++;
      report.revisions[d.recorded.revision] = (report.revisions[d.recorded.revision] ?? 0) + 1;
      // Before evaluating: it fills the counters a line did not record (they read 0).
      const missing = missingFor(policy, d);
      const outcome = policy.evaluate(d.input);
      report.matrix[d.recorded.verdict][outcome.verdict]++;
      for (const id of d.recorded.rules) rule(id).before++;
      for (const m of outcome.matchedRules) rule(m.id).after++;
      tally?.add(d.decisionId, outcome.verdict, outcome.matchedRules);
      const shift = outcome.score - d.recorded.score;
      shiftSum += shift;
      if (shift > 0) report.score.up++;
      else if (shift < 0) report.score.down++;
      if (missing !== undefined)
        for (const m of missing) report.missingInputs[m] = (report.missingInputs[m] ?? 0) + 1;
      if (outcome.verdict !== d.recorded.verdict) {
        report.changed++;
        if (report.changes.length < changedLimit) {
          report.changes.push({
            decisionId: d.decisionId,
            from: d.recorded.verdict,
            to: outcome.verdict,
            scoreFrom: d.recorded.score,
            scoreTo: outcome.score,
            ...(missing !== undefined && { missing }),
          });
        }
      }
    }
  }
  report.score.meanShift =
    report.decisions === 0 ? 0 : Math.round((shiftSum / report.decisions) * 1000) / 1000;
  if (tally !== undefined) report.labels = tally.finish();
  report.elapsedMs = Math.round(performance.now() - startedAt);
  return report;
}

/** The report as text lines for people. */
export function formatReplayReport(r: ReplayReport, stats: boolean): string[] {
  const out: string[] = [];
  out.push(
    `replayed ${r.decisions} decisions with ${r.candidate.name} @ ${r.candidate.revision} in ${(r.elapsedMs / 1000).toFixed(1)} s` +
      ` (${r.skipped} other lines skipped${r.bad.count > 0 ? `, ${r.bad.count} unreadable` : ''})`,
  );
  const revisions = Object.entries(r.revisions).map(([rev, n]) => `${rev || '?'} (${n})`);
  if (revisions.length > 0) out.push(`recorded by revision ${revisions.join(', ')}`);
  out.push(
    `${r.changed} verdicts changed; score shift mean ${r.score.meanShift} (${r.score.up} up, ${r.score.down} down)`,
  );
  out.push('');
  out.push(`from \\ to    ${VERDICTS.map((v) => v.padStart(10)).join('')}`);
  for (const from of VERDICTS) {
    out.push(`${from.padEnd(12)}${VERDICTS.map((to) => String(r.matrix[from][to]).padStart(10)).join('')}`);
  }
  if (r.changes.length > 0) {
    out.push('');
    out.push(`changed (first ${r.changes.length}):`);
    for (const c of r.changes) {
      out.push(
        `  ${c.decisionId}  ${c.from} → ${c.to}  score ${c.scoreFrom} → ${c.scoreTo}${c.missing ? `  (uncertain: ${c.missing.join(', ')} not recorded)` : ''}`,
      );
    }
  }
  const missing = Object.entries(r.missingInputs);
  if (missing.length > 0) {
    out.push('');
    out.push(
      `uncertain: the candidate reads inputs these decisions did not record: ${missing.map(([k, n]) => `${k} (${n})`).join(', ')}`,
    );
  }
  if (stats) {
    out.push('');
    const width = Math.max(4, ...Object.keys(r.rules).map((id) => id.length)) + 2;
    out.push(`${'rule'.padEnd(width)}  before     after   rate after`);
    for (const [id, h] of Object.entries(r.rules).sort((a, b) => b[1].after - a[1].after)) {
      const rate = r.decisions === 0 ? 0 : (h.after / r.decisions) * 100;
      out.push(
        `${id.padEnd(width)}${String(h.before).padStart(8)}${String(h.after).padStart(10)}${rate.toFixed(2).padStart(12)} %`,
      );
    }
  }
  if (r.labels !== undefined) out.push(...formatLabelReport(r.labels));
  for (const b of r.bad.first) out.push(`unreadable: ${b.source}:${b.line}: ${b.why}`);
  return out;
}
