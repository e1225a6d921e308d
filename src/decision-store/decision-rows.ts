import { takeLineJson } from '../decision-log/line-json.ts';
import type { DecisionTables } from './decision-tables.ts';

/**
 * What one decision-log record becomes in the store: a `decision` line a decision row and its rule
 * rows, an `action` line its action's latest outcome, a `feedback` line a label, an `outcome`
 * line the login backend's report of the login. Built off the
 * request path (by the writer, per batch), and plain data: a worker thread can be handed them.
 * The store keeps the decision log's line as redacted (src/decision-log/line-json.ts), and in its
 * columns the raw accountId, userId, IP and unitId, which the filters need; secrets never reach either (one-time codes are redacted in the
 * decision line itself: src/decide/decision-line.ts).
 */

export type DecisionRow = DecisionTables['decision'];
export type RuleRow = DecisionTables['decision_rule'];
export type LabelRow = DecisionTables['decision_label'];
export type ActionRow = DecisionTables['decision_action'];
export type OutcomeRow = DecisionTables['decision_outcome'];

export type StoreOp =
  | { kind: 'decision'; row: DecisionRow; rules: RuleRow[] }
  | { kind: 'action'; row: ActionRow }
  | { kind: 'label'; row: LabelRow }
  | { kind: 'outcome'; row: OutcomeRow };

type Loose = Record<string, unknown>;

const text = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const num = (v: unknown, fallback = 0): number =>
  typeof v === 'number' && Number.isFinite(v) ? v : fallback;
const obj = (v: unknown): Loose => (typeof v === 'object' && v !== null ? (v as Loose) : {});

function timeOf(at: unknown, fallbackMs: number): number {
  const ms = typeof at === 'string' ? Date.parse(at) : Number.NaN;
  return Number.isFinite(ms) ? ms : fallbackMs;
}

/**
 * The store's rows of one decision-log `record`, or undefined for a record it does not keep (a
 * line of another kind, or one without a decision id). Tolerant by design: an overload verdict's
 * line has no request nor timings, and a malformed record must never stop the batch.
 */
export function storeOpOf(
  record: object,
  nowMs: number,
  redact?: (record: object) => object,
): StoreOp | undefined {
  const r = record as Loose;
  const decisionId = text(r.decisionId);
  if (decisionId === null) return undefined;
  switch (r.kind) {
    case 'decision':
      return decisionOp(r, decisionId, nowMs, redact);
    case 'action':
      return actionOp(r, decisionId, nowMs);
    case 'feedback': {
      const label = r.label === 'fraud' || r.label === 'legit' ? r.label : undefined;
      if (label === undefined) return undefined;
      return {
        kind: 'label',
        row: {
          decision_id: decisionId,
          label,
          // The operator's name when a named operator gave it (the console, an operator's key).
          labelled_by: text(r.operator) ?? text(r.labelledBy) ?? 'unknown',
          note: text(r.note),
          at_ms: timeOf(r.at, nowMs),
        },
      };
    }
    case 'outcome':
      return outcomeOp(r, decisionId, nowMs);
    default:
      return undefined;
  }
}

/** An `outcome` line (src/outcomes/outcome-line.ts): the login backend's report of the login. */
function outcomeOp(r: Loose, decisionId: string, nowMs: number): StoreOp | undefined {
  const type = text(r.type);
  const value = text(r.value);
  if (type === null || value === null) return undefined;
  return {
    kind: 'outcome',
    row: {
      decision_id: decisionId,
      type,
      value,
      reported_by: text(r.reportedBy) ?? 'unknown',
      at_ms: timeOf(r.occurredAt ?? r.at, nowMs),
    },
  };
}

function decisionOp(
  r: Loose,
  decisionId: string,
  nowMs: number,
  redact: ((record: object) => object) | undefined,
): StoreOp {
  const outcome = obj(r.outcome);
  const request = obj(r.request);
  const policy = obj(r.policy);
  const shadow = r.shadow === undefined ? undefined : obj(r.shadow);
  const verdict = text(outcome.verdict) ?? 'allow';
  const atMs = timeOf(r.at, nowMs);
  // The decision log's own line, as redacted (serialised once); the columns above are the record's own.
  const line = takeLineJson(r, redact);
  const revision = text(policy.revision) ?? '';
  const rules: RuleRow[] = [];
  const seen = new Set<string>();
  const addRule = (policyOf: 'active' | 'shadow', policyRevision: string, ruleId: unknown) => {
    const id = text(ruleId);
    if (id === null || seen.has(`${policyOf}\0${id}`)) return;
    seen.add(`${policyOf}\0${id}`);
    rules.push({
      decision_id: decisionId,
      policy: policyOf,
      policy_revision: policyRevision,
      rule_id: id,
      at_ms: atMs,
    });
  };
  if (Array.isArray(outcome.matchedRules))
    for (const m of outcome.matchedRules) addRule('active', revision, obj(m).id);
  const shadowVerdict = shadow === undefined ? null : text(shadow.verdict);
  const shadowRevision = shadow === undefined ? null : text(obj(shadow.policy).revision);
  if (shadow !== undefined && Array.isArray(shadow.rules)) {
    for (const id of shadow.rules) addRule('shadow', shadowRevision ?? '', id);
  }
  return {
    kind: 'decision',
    row: {
      decision_id: decisionId,
      at_ms: atMs,
      verdict,
      score: num(outcome.score),
      degraded: r.degraded === true ? 1 : 0,
      policy_name: text(policy.name) ?? '',
      policy_revision: revision,
      account_id: text(request.accountId),
      user_id: text(request.userId),
      ip: text(request.ip),
      unit_id: text(request.unitId),
      shadow_verdict: shadowVerdict,
      shadow_revision: shadowRevision,
      shadow_disagrees: shadowVerdict !== null && shadowVerdict !== verdict ? 1 : 0,
      label: null,
      outcome_label: null,
      total_ms: num(obj(r.timings).totalMs),
      line,
      line_bytes: Buffer.byteLength(line),
    },
    rules,
  };
}

function actionOp(r: Loose, decisionId: string, nowMs: number): StoreOp | undefined {
  const actionId = text(r.key);
  if (actionId === null) return undefined;
  const { kind: _k, schemaVersion: _s, at, key: _key, decisionId: _d, type, target, status, ...detail } = r;
  return {
    kind: 'action',
    row: {
      action_id: actionId,
      decision_id: decisionId,
      type: text(type) ?? '',
      target: text(target) ?? '',
      status: text(status) ?? 'unknown',
      detail: JSON.stringify(detail),
      at_ms: timeOf(at, nowMs),
    },
  };
}
