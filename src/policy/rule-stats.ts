import type { MatchedRule } from './policy-types.ts';

/**
 * Rule hit counts since start, per policy (active, shadow) and revision, for `GET /policies/stats`:
 * what each rule does on live traffic, beside `riskgate_rule_hits_total` for dashboards. The last
 * few revisions of each are kept (a reload starts a new count).
 */

export interface RevisionStats {
  policy: 'active' | 'shadow';
  name: string;
  revision: string;
  /** When this revision's first decision was counted. */
  since: string;
  decisions: number;
  /** Per rule: matches and the share of this revision's decisions they are. */
  rules: Record<string, { hits: number; rate: number }>;
}

interface Counts {
  policy: 'active' | 'shadow';
  name: string;
  revision: string;
  since: Date;
  decisions: number;
  hits: Map<string, number>;
}

const KEPT_REVISIONS = 5;

export class RuleStats {
  readonly #counts = new Map<string, Counts>();

  /** Counts one decision of `policy`'s `revision` and the rules it matched. */
  record(
    policy: 'active' | 'shadow',
    ref: { name: string; revision: string },
    ruleIds: readonly string[],
    matched: readonly MatchedRule[],
  ): void {
    const key = `${policy}:${ref.revision}`;
    let c = this.#counts.get(key);
    if (c === undefined) {
      c = {
        policy,
        name: ref.name,
        revision: ref.revision,
        since: new Date(),
        decisions: 0,
        hits: new Map(),
      };
      for (const id of ruleIds) c.hits.set(id, 0);
      this.#counts.set(key, c);
      this.#trim(policy);
    }
    c.decisions++;
    for (const m of matched) c.hits.set(m.id, (c.hits.get(m.id) ?? 0) + 1);
  }

  #trim(policy: 'active' | 'shadow'): void {
    const mine = [...this.#counts.entries()].filter(([, c]) => c.policy === policy);
    for (const [key] of mine.slice(0, Math.max(0, mine.length - KEPT_REVISIONS))) this.#counts.delete(key);
  }

  /** Newest revision last, per policy. */
  snapshot(): RevisionStats[] {
    return [...this.#counts.values()].map((c) => ({
      policy: c.policy,
      name: c.name,
      revision: c.revision,
      since: c.since.toISOString(),
      decisions: c.decisions,
      rules: Object.fromEntries(
        [...c.hits].map(([id, hits]) => [
          id,
          { hits, rate: c.decisions === 0 ? 0 : Math.round((hits / c.decisions) * 10_000) / 10_000 },
        ]),
      ),
    }));
  }
}
