import type { Verdict } from '../policy/policy-types.ts';
import type { ReplayChange } from './replay-tally.ts';

/**
 * The changed decisions of a replay counted by verdict pair and by rule, with the first few ids of
 * each: what a policy version's backtest shows a reviewer (src/policy-evidence/). Plain data, so a
 * replay thread posts it back; stretches merged in window order keep the samples a single pass would.
 */

/** Sample decision ids kept per verdict pair and per rule. */
export const CHANGE_SAMPLES = 5;

export interface VerdictPairChanges {
  from: Verdict;
  to: Verdict;
  count: number;
  samples: string[];
}

/** Among the changed decisions: matching now where it did not (`fires`), or no longer (`stops`). */
export interface RuleChanges {
  rule: string;
  fires: number;
  stops: number;
  samples: string[];
}

export interface ReplayChanges {
  byPair: VerdictPairChanges[];
  byRule: RuleChanges[];
}

export class ChangeTally {
  readonly #byPair = new Map<string, VerdictPairChanges>();
  readonly #byRule = new Map<string, RuleChanges>();

  add(change: ReplayChange, before: readonly string[], after: readonly string[]): void {
    this.#pair(change.from, change.to, 1, [change.decisionId]);
    // A decision matches a few rules: a scan of the other list is cheaper than a set of it.
    for (const id of after) if (!before.includes(id)) this.#rule(id, 1, 0, [change.decisionId]);
    for (const id of before) if (!after.includes(id)) this.#rule(id, 0, 1, [change.decisionId]);
  }

  /** Another stretch's changes, read after this one's. */
  merge(other: ReplayChanges): void {
    for (const p of other.byPair) this.#pair(p.from, p.to, p.count, p.samples);
    for (const r of other.byRule) this.#rule(r.rule, r.fires, r.stops, r.samples);
  }

  /** Most changes first. */
  get changes(): ReplayChanges {
    return {
      byPair: [...this.#byPair.values()].sort((a, b) => b.count - a.count),
      byRule: [...this.#byRule.values()].sort((a, b) => b.fires + b.stops - (a.fires + a.stops)),
    };
  }

  #pair(from: Verdict, to: Verdict, count: number, samples: readonly string[]): void {
    const key = `${from}>${to}`;
    let pair = this.#byPair.get(key);
    if (pair === undefined) {
      pair = { from, to, count: 0, samples: [] };
      this.#byPair.set(key, pair);
    }
    pair.count += count;
    keepSamples(pair.samples, samples);
  }

  #rule(rule: string, fires: number, stops: number, samples: readonly string[]): void {
    let r = this.#byRule.get(rule);
    if (r === undefined) {
      r = { rule, fires: 0, stops: 0, samples: [] };
      this.#byRule.set(rule, r);
    }
    r.fires += fires;
    r.stops += stops;
    keepSamples(r.samples, samples);
  }
}

function keepSamples(into: string[], more: readonly string[]): void {
  for (const id of more) {
    if (into.length >= CHANGE_SAMPLES) return;
    into.push(id);
  }
}
