import type { DecisionLine } from '../../src/decide/decision-line.ts';
import type { StoredDecision, Verdict } from '../../src/decision-store/decision-query.ts';
import type { RuleQuality, RuleReport, RuleReportReader } from '../../src/decision-store/rule-report.ts';

/**
 * A small in-memory stand-in for the rule report, read straight from the decision log lines a
 * harness collects: the console's tests run against it until the real one (src/decision-store/
 * rule-report.ts) is built. Test code only.
 */

type Line = Record<string, unknown>;

function stored(lines: readonly Line[]): StoredDecision[] {
  const byId = new Map<string, StoredDecision>();
  for (const raw of lines) {
    if (raw.kind === 'decision') {
      const line = raw as unknown as DecisionLine;
      const r = line.request as Record<string, unknown>;
      byId.set(line.decisionId, {
        decisionId: line.decisionId,
        at: line.at,
        verdict: line.outcome.verdict,
        score: line.outcome.score,
        degraded: line.degraded,
        rules: line.outcome.matchedRules.map((m) => m.id),
        ...(typeof r.accountId === 'string' && { accountId: r.accountId }),
        ...(typeof r.userId === 'string' && { userId: r.userId }),
        ...(typeof r.ip === 'string' && { ip: r.ip }),
        ...(typeof r.unitId === 'string' && { unitId: r.unitId }),
        policy: line.policy,
        ...(line.shadow !== undefined && { shadowVerdict: line.shadow.verdict as Verdict }),
        totalMs: line.timings.totalMs,
        line,
        labels: [],
        outcomes: [],
        actions: [],
      });
    } else if (raw.kind === 'feedback') {
      const d = byId.get(raw.decisionId as string);
      if (d === undefined) continue;
      d.labels.push({
        label: raw.label as 'fraud' | 'legit',
        labelledBy: (raw.operator ?? raw.labelledBy) as string,
        at: raw.at as string,
        ...(typeof raw.note === 'string' && { note: raw.note }),
      });
      d.label = raw.label as 'fraud' | 'legit';
    } else if (raw.kind === 'action') {
      const d = byId.get(raw.decisionId as string);
      if (d === undefined) continue;
      const { key, type, target, status, at, ...detail } = raw;
      d.actions.push({
        actionId: key as string,
        type: type as string,
        target: target as string,
        status: status as string,
        at: at as string,
        detail,
      });
    }
  }
  return [...byId.values()].sort(
    (a, b) => b.at.localeCompare(a.at) || b.decisionId.localeCompare(a.decisionId),
  );
}

/** A rule report over the lines `logged` gives: the active policy's rules as the decisions matched them, with labels. */
export function memoryRuleReport(
  logged: () => readonly Line[],
  ruleIds: () => readonly string[],
): RuleReportReader {
  return {
    async report(nowMs = Date.now()) {
      const all = stored(logged());
      const within = (d: StoredDecision, ms: number) => nowMs - Date.parse(d.at) < ms;
      const count = (pred: (d: StoredDecision) => boolean) => ({
        h1: all.filter((d) => within(d, 3_600_000) && pred(d)).length,
        h24: all.filter((d) => within(d, 86_400_000) && pred(d)).length,
        d7: all.filter((d) => within(d, 7 * 86_400_000) && pred(d)).length,
      });
      const total = count(() => true);
      const rules: RuleQuality[] = ruleIds().map((ruleId) => {
        const fires = count((d) => d.rules.includes(ruleId));
        const tp = all.filter((d) => d.rules.includes(ruleId) && d.label === 'fraud').length;
        const fp = all.filter((d) => d.rules.includes(ruleId) && d.label === 'legit').length;
        const fn = all.filter((d) => !d.rules.includes(ruleId) && d.label === 'fraud').length;
        const rate = (k: 'h1' | 'h24' | 'd7') => (total[k] === 0 ? 0 : fires[k] / total[k]);
        return {
          ruleId,
          fires,
          fireRate: { h1: rate('h1'), h24: rate('h24'), d7: rate('d7') },
          hourly: Array.from(
            { length: 24 },
            (_, i) =>
              all.filter(
                (d) =>
                  d.rules.includes(ruleId) && Math.floor((nowMs - Date.parse(d.at)) / 3_600_000) === 23 - i,
              ).length,
          ),
          labelled: { truePositives: tp, falsePositives: fp, falseNegatives: fn },
          ...(tp + fp > 0 && { precision: tp / (tp + fp) }),
          ...(tp + fn > 0 && { recall: tp / (tp + fn) }),
          neverFired: fires.d7 === 0,
        };
      });
      const policy = all[0]?.policy ?? { name: 'none', revision: 'none' };
      const report: RuleReport = {
        generatedAt: new Date(nowMs).toISOString(),
        active: { policy: 'active', ...policy, decisions: total, rules },
        // One revision here: the history is the active revision's rules, each its one series.
        history: {
          name: policy.name,
          scope: 'all',
          revisions: [],
          omittedRevisions: 0,
          rules: rules.map((r) => ({ ...r, status: 'current' as const, byRevision: [] })),
        },
      };
      return report;
    },
  };
}
