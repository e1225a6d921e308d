import type { AuditEntry, AuditTrail } from '../../src/audit/audit-trail.ts';
import type { DecisionLine } from '../../src/decide/decision-line.ts';
import type {
  DecisionFilter,
  DecisionReader,
  DecisionSummary,
  StoredDecision,
  Verdict,
} from '../../src/decision-store/decision-query.ts';
import type { RuleQuality, RuleReport, RuleReportReader } from '../../src/decision-store/rule-report.ts';

/**
 * Small in-memory stand-ins for the decision store, the rule report and the audit trail, read
 * straight from the decision log lines a harness collects: the console's tests run against them
 * until the real ones (src/decision-store/, src/audit/) are built. Test code only.
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

function matches(d: StoredDecision, f: DecisionFilter): boolean {
  const ms = Date.parse(d.at);
  return (
    (f.fromMs === undefined || ms >= f.fromMs) &&
    (f.toMs === undefined || ms < f.toMs) &&
    (f.verdict === undefined || d.verdict === f.verdict) &&
    (f.rule === undefined || d.rules.includes(f.rule)) &&
    (f.accountId === undefined || d.accountId === f.accountId) &&
    (f.userId === undefined || d.userId === f.userId) &&
    (f.ip === undefined || d.ip === f.ip) &&
    (f.unitId === undefined || d.unitId === f.unitId) &&
    (f.degraded === undefined || d.degraded === f.degraded) &&
    (f.label === undefined || (d.label ?? 'none') === f.label) &&
    (f.shadowDisagrees === undefined ||
      (d.shadowVerdict !== undefined && d.shadowVerdict !== d.verdict) === f.shadowDisagrees)
  );
}

function summary(d: StoredDecision): DecisionSummary {
  const { line: _l, labels: _b, actions: _a, ...row } = d;
  return row;
}

/** A decision reader over the lines `logged` gives (read at each call: the decisions logged so far). */
export function memoryDecisionReader(logged: () => readonly Line[]): DecisionReader {
  const lines = {
    get all() {
      return logged();
    },
  };
  return {
    async list(f) {
      const all = stored(lines.all).filter((d) => matches(d, f));
      const start = f.cursor === undefined ? 0 : all.findIndex((d) => d.decisionId === f.cursor) + 1;
      const limit = f.limit ?? 50;
      const page = all.slice(start, start + limit);
      const more = start + limit < all.length;
      return { decisions: page.map(summary), ...(more && { nextCursor: page.at(-1)!.decisionId }) };
    },
    async get(id) {
      return stored(lines.all).find((d) => d.decisionId === id);
    },
    async countByVerdict(f) {
      const all = stored(lines.all).filter((d) => matches(d, { ...f, cursor: undefined }));
      const n = (v: Verdict) => all.filter((d) => d.verdict === v).length;
      return { allow: n('allow'), challenge: n('challenge'), deny: n('deny'), total: all.length };
    },
    status: () => ({
      engine: 'sqlite',
      writing: true,
      pending: 0,
      dropped: 0,
      written: lines.all.length,
      lagMs: 0,
    }),
  };
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
      };
      return report;
    },
  };
}

/** An audit trail in memory (`entries`, oldest first); `failing` makes every record reject. */
export function memoryAuditTrail(): AuditTrail & { entries: AuditEntry[]; failing: boolean } {
  const trail = {
    entries: [] as AuditEntry[],
    failing: false,
    async record(entry: Omit<AuditEntry, 'id' | 'at'>) {
      if (trail.failing) throw new Error('audit store down');
      const full = {
        ...entry,
        id: String(trail.entries.length + 1).padStart(8, '0'),
        at: new Date().toISOString(),
      };
      trail.entries.push(full);
      return full;
    },
    async list(f: { actor?: string; limit?: number }) {
      const entries = [...trail.entries]
        .reverse()
        .filter((e) => f.actor === undefined || e.actor === f.actor);
      return { entries: entries.slice(0, f.limit ?? 50) };
    },
  };
  return trail;
}
