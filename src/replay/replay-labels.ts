import { createReadStream } from 'node:fs';
import { numberedLines } from '../logs/ndjson-lines.ts';

/**
 * Analyst labels for replay (`riskgate replay --labels`): `POST /feedback` puts a `feedback` line in
 * the decision log; any JSON lines with `decisionId` and `label` (fraud or legit) will do, so a
 * label export from a case tool works too. A decision labelled twice keeps its last label.
 */

export type Label = 'fraud' | 'legit';

export const LABELS: readonly Label[] = ['fraud', 'legit'];

/**
 * Longest decision log (or label) line replay reads, bytes (16 MiB; riskgate writes lines of a few
 * KiB). A longer line stops the replay with "line N is longer than ..." (exit 3) rather than being
 * held whole: a 1 GB line used to exhaust the heap and crash.
 */
export const MAX_REPLAY_LINE_BYTES = 16 * 1024 * 1024;

/**
 * Reads every label of `paths`; other lines (decisions, actions) are passed over. Rejects as
 * `replayDecisions` does at a line longer than `maxLineBytes` (default MAX_REPLAY_LINE_BYTES).
 */
export async function readLabels(
  paths: readonly string[],
  maxLineBytes = MAX_REPLAY_LINE_BYTES,
): Promise<Map<string, Label>> {
  const labels = new Map<string, Label>();
  for (const path of paths) {
    const stream = createReadStream(path, { highWaterMark: 1 << 20 });
    for await (const { text } of numberedLines(stream, path, maxLineBytes)) {
      // Cheap test first: decision lines are many and large.
      if (!text.includes('"label"')) continue;
      let v: { decisionId?: unknown; label?: unknown; kind?: unknown };
      try {
        v = JSON.parse(text) as typeof v;
      } catch {
        continue;
      }
      if (v.kind !== undefined && v.kind !== 'feedback') continue;
      if (typeof v.decisionId === 'string' && (v.label === 'fraud' || v.label === 'legit'))
        labels.set(v.decisionId, v.label);
    }
  }
  return labels;
}

/** How well something that flags decisions (a rule, a verdict) finds the fraud the labels name. */
export interface LabelScore {
  /** Flagged and labelled fraud (true positives). */
  fraudFlagged: number;
  /** Flagged and labelled legit (false positives). */
  legitFlagged: number;
  /** fraudFlagged / (fraudFlagged + legitFlagged); null when nothing labelled was flagged. */
  precision: number | null;
  /** fraudFlagged / every decision labelled fraud; null without fraud labels. */
  recall: number | null;
}

export interface LabelReport {
  /** Replayed decisions with a label, by label. */
  labelled: { fraud: number; legit: number };
  /** Labels naming no replayed decision (another log, or older than it). */
  unmatched: number;
  /** Per rule of the candidate: its matches against the labels. */
  rules: Record<string, LabelScore>;
  /** The candidate's verdicts: `deny` alone, and `challenge` or `deny` (stepped up at least). */
  verdicts: { deny: LabelScore; challengeOrDeny: LabelScore };
}

/** Accumulates flagged counts while replaying; `finish` computes the ratios. */
export class LabelTally {
  readonly #labels: ReadonlyMap<string, Label>;
  readonly #seen = new Set<string>();
  readonly #rules = new Map<string, { fraud: number; legit: number }>();
  readonly #deny = { fraud: 0, legit: 0 };
  readonly #stepped = { fraud: 0, legit: 0 };
  readonly #labelled = { fraud: 0, legit: 0 };

  constructor(labels: ReadonlyMap<string, Label>, ruleIds: readonly string[]) {
    this.#labels = labels;
    for (const id of ruleIds) this.#rules.set(id, { fraud: 0, legit: 0 });
  }

  /** One replayed decision: its id, the candidate's verdict and matched rules. */
  add(decisionId: string, verdict: string, matched: readonly { id: string }[]): void {
    const label = this.#labels.get(decisionId);
    if (label === undefined || this.#seen.has(decisionId)) return;
    this.#seen.add(decisionId);
    this.#labelled[label]++;
    for (const { id } of matched) {
      let r = this.#rules.get(id);
      if (r === undefined) {
        r = { fraud: 0, legit: 0 };
        this.#rules.set(id, r);
      }
      r[label]++;
    }
    if (verdict === 'deny') this.#deny[label]++;
    if (verdict === 'deny' || verdict === 'challenge') this.#stepped[label]++;
  }

  finish(): LabelReport {
    const score = (c: { fraud: number; legit: number }): LabelScore => ({
      fraudFlagged: c.fraud,
      legitFlagged: c.legit,
      precision: c.fraud + c.legit === 0 ? null : round(c.fraud / (c.fraud + c.legit)),
      recall: this.#labelled.fraud === 0 ? null : round(c.fraud / this.#labelled.fraud),
    });
    const rules: Record<string, LabelScore> = {};
    for (const [id, c] of this.#rules) rules[id] = score(c);
    return {
      labelled: { ...this.#labelled },
      unmatched: this.#labels.size - this.#seen.size,
      rules,
      verdicts: { deny: score(this.#deny), challengeOrDeny: score(this.#stepped) },
    };
  }
}

const round = (x: number) => Math.round(x * 1000) / 1000;

/** The label part of the report as text lines. */
export function formatLabelReport(r: LabelReport): string[] {
  const pct = (x: number | null) => (x === null ? '    -' : `${(x * 100).toFixed(1).padStart(5)}%`);
  const out = [
    '',
    `labels: ${r.labelled.fraud} fraud, ${r.labelled.legit} legit among the replayed decisions` +
      (r.unmatched > 0 ? ` (${r.unmatched} labels name no replayed decision)` : ''),
    `${'rule'.padEnd(36)} precision   recall   fraud  legit`,
  ];
  const line = (name: string, s: LabelScore) =>
    `${name.padEnd(36)} ${pct(s.precision)}   ${pct(s.recall)}  ${String(s.fraudFlagged).padStart(6)} ${String(s.legitFlagged).padStart(6)}`;
  for (const [id, s] of Object.entries(r.rules)) out.push(line(id, s));
  out.push(line('(verdict deny)', r.verdicts.deny));
  out.push(line('(verdict challenge or deny)', r.verdicts.challengeOrDeny));
  return out;
}
