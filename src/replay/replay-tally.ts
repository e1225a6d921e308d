import type { CompiledPolicy, EvaluateOptions, PolicySignalName, Verdict } from '../policy/policy-types.ts';
import {
  type LineNeeds,
  type LoggedDecision,
  lineNeeds,
  type ReadLine,
  readDecisionBytes,
  readDecisionLine,
} from './replay-record.ts';

/**
 * What one stretch of a decision log replays to: counts that add up, and the first changes and
 * unreadable lines in the order read. Plain data (a worker thread posts it back), merged in log
 * order by `replayDecisions` into one report, so a log replayed in parallel reports exactly what
 * it would read front to back.
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

export interface ReplayPartial {
  lines: number;
  decisions: number;
  skipped: number;
  badCount: number;
  /** The first few unreadable lines, numbered from this stretch's first line (1). */
  badFirst: { line: number; why: string }[];
  /** from → to → count. */
  matrix: Record<Verdict, Record<Verdict, number>>;
  changed: number;
  changes: ReplayChange[];
  shiftSum: number;
  up: number;
  down: number;
  rules: Record<string, { before: number; after: number }>;
  missingInputs: Record<string, number>;
  revisions: Record<string, number>;
  /** Replayed decisions whose id is labelled, in log order: [decisionId, verdict, matched rule ids]. */
  labelled: [string, Verdict, string[]][];
}

/** Unreadable lines a report lists (it counts them all). */
export const BAD_LINES_LISTED = 5;

/**
 * A replay evaluates without the live budget: it has no deadline, and a thread descheduled or
 * paused by a collection inside one evaluation must not get the degraded verdict a quiet machine
 * would not (what the candidate costs per decision is the benches' to measure).
 */
const NO_BUDGET: EvaluateOptions = { budgetMs: Number.POSITIVE_INFINITY };

export function emptyMatrix(): ReplayPartial['matrix'] {
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
    let filled: Record<string, number> | undefined;
    for (const c of policy.velocityCounters ?? []) {
      if (recorded?.[c.name] !== undefined) continue;
      missing.push(`velocity.${c.name}`);
      filled ??= { ...recorded };
      filled[c.name] = 0;
    }
    if (filled !== undefined) d.input.velocity = filled;
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
 * A changed decision with the rules it matched as recorded and as replayed: what a policy version's
 * evidence tallies by rule (src/policy-versions/policy-version-evidence.ts).
 */
export type ReplayChangeListener = (
  change: ReplayChange,
  rulesBefore: string[],
  rulesAfter: string[],
) => void;

/** Replays lines one at a time into a `ReplayPartial`. */
export class ReplayTally {
  readonly #policy: CompiledPolicy;
  readonly #changedLimit: number;
  readonly #labelIds: ReadonlySet<string> | undefined;
  readonly #onChange: ReplayChangeListener | undefined;
  /** What the candidate reads of a line's inputs: the rest is never parsed. */
  readonly #needs: LineNeeds;
  readonly partial: ReplayPartial;

  /**
   * @param changedLimit changes listed (all are counted).
   * @param labelIds decisions whose replayed verdict the labels report needs.
   * @param onChange told of every changed decision, listed or not.
   */
  constructor(
    policy: CompiledPolicy,
    changedLimit: number,
    labelIds?: ReadonlySet<string>,
    onChange?: ReplayChangeListener,
  ) {
    this.#policy = policy;
    this.#changedLimit = changedLimit;
    this.#labelIds = labelIds;
    this.#onChange = onChange;
    this.#needs = lineNeeds(policy);
    this.partial = {
      lines: 0,
      decisions: 0,
      skipped: 0,
      badCount: 0,
      badFirst: [],
      matrix: emptyMatrix(),
      changed: 0,
      changes: [],
      shiftSum: 0,
      up: 0,
      down: 0,
      rules: {},
      missingInputs: {},
      revisions: {},
      labelled: [],
    };
    for (const id of policy.ruleIds ?? []) this.#rule(id);
  }

  #rule(id: string): { before: number; after: number } {
    let r = this.partial.rules[id];
    if (r === undefined) {
      r = { before: 0, after: 0 };
      this.partial.rules[id] = r;
    }
    return r;
  }

  /** One line of the log, `lineNo` counted from this stretch's first line. */
  add(text: string, lineNo: number): void {
    this.#tally(readDecisionLine(text, this.#needs), lineNo);
  }

  /** One line of the log as bytes, `buf[start, end)`: decoded only as far as it is read. */
  addBytes(buf: Buffer, start: number, end: number, lineNo: number): void {
    this.#tally(readDecisionBytes(buf, start, end, this.#needs), lineNo);
  }

  #tally(read: ReadLine, lineNo: number): void {
    const p = this.partial;
    p.lines++;
    if (read.kind === 'other') {
      p.skipped++;
      return;
    }
    if (read.kind === 'bad') {
      p.badCount++;
      if (p.badFirst.length < BAD_LINES_LISTED) p.badFirst.push({ line: lineNo, why: read.why });
      return;
    }
    const d = read.decision;
    p.decisions++;
    p.revisions[d.recorded.revision] = (p.revisions[d.recorded.revision] ?? 0) + 1;
    // Before evaluating: it fills the counters a line did not record (they read 0).
    const missing = missingFor(this.#policy, d);
    const outcome = this.#policy.evaluate(d.input, NO_BUDGET);
    p.matrix[d.recorded.verdict][outcome.verdict]++;
    for (const id of d.recorded.rules) this.#rule(id).before++;
    for (const m of outcome.matchedRules) this.#rule(m.id).after++;
    if (this.#labelIds?.has(d.decisionId)) {
      p.labelled.push([d.decisionId, outcome.verdict, outcome.matchedRules.map((m) => m.id)]);
    }
    const shift = outcome.score - d.recorded.score;
    p.shiftSum += shift;
    if (shift > 0) p.up++;
    else if (shift < 0) p.down++;
    if (missing !== undefined) for (const m of missing) p.missingInputs[m] = (p.missingInputs[m] ?? 0) + 1;
    if (outcome.verdict === d.recorded.verdict) return;
    p.changed++;
    const change: ReplayChange = {
      decisionId: d.decisionId,
      from: d.recorded.verdict,
      to: outcome.verdict,
      scoreFrom: d.recorded.score,
      scoreTo: outcome.score,
      ...(missing !== undefined && { missing }),
    };
    if (p.changes.length < this.#changedLimit) p.changes.push(change);
    this.#onChange?.(
      change,
      d.recorded.rules,
      outcome.matchedRules.map((m) => m.id),
    );
  }
}
