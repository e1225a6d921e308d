import { isDeepStrictEqual } from 'node:util';
import { type PolicyFile, type PolicyRule, policyFileSchema } from '../policy/policy-schema.ts';
import { parseYamlSource } from '../policy/yaml-source.ts';

/**
 * What a policy version changes against another (the active one), by rule id and by section, as a
 * reviewer reads it: rules added and removed, and for each rule kept, which of its fields changed
 * with the old and new values. Computed on the parsed documents (the policy schema's types), never
 * on text lines: a comment, a reindent or a moved key is no change; a rule moved in the file is
 * reported once as a change of order.
 */

/** A rule field as a reviewer names it: the fields the flow's evidence is read by first, then the rest. */
export type RuleFieldKind = 'condition' | 'score' | 'verdict' | 'actions' | 'other';

/** One changed field of a rule or one changed section of the policy; absent on a side: not set there. */
export interface FieldChange {
  /** The YAML key (`when`, `score`, `thresholds`). */
  field: string;
  kind: RuleFieldKind;
  before?: unknown;
  after?: unknown;
}

export interface RuleChange {
  id: string;
  changes: FieldChange[];
}

export interface PolicyDiff {
  /** Rules only the new version has, in its order. */
  added: PolicyRule[];
  /** Rules only the old version has, in its order. */
  removed: PolicyRule[];
  /** Rules in both whose content differs, in the new version's order. */
  changed: RuleChange[];
  /** Rules in both, unchanged. */
  unchanged: number;
  /** Whether the rules both versions have come in another order. */
  reordered: boolean;
  /** Top-level sections other than `rules` that differ (`thresholds`, `actions`, `lists`...). */
  sections: FieldChange[];
}

/** A policy YAML as the schema reads it; undefined when it does not parse (a draft always does). */
export function parsePolicyDocument(yaml: string): PolicyFile | undefined {
  const { source, issues } = parseYamlSource('policy-version', yaml);
  if (issues.some((i) => i.severity === 'error')) return undefined;
  const parsed = policyFileSchema.safeParse(source.doc.toJS());
  return parsed.success ? parsed.data : undefined;
}

const RULE_FIELD_KINDS: Partial<Record<keyof PolicyRule, RuleFieldKind>> = {
  when: 'condition',
  score: 'score',
  verdict: 'verdict',
  actions: 'actions',
  suppressActions: 'actions',
};

/** The sections compared on their own; `rules` has the diff by rule, the envelope is not policy. */
const SKIPPED_SECTIONS = new Set(['rules', 'apiVersion', 'kind']);

const KIND_ORDER: readonly RuleFieldKind[] = ['condition', 'score', 'verdict', 'actions', 'other'];

/** The fields of two records that differ, each with its old and new value. */
function changedFields(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  kindOf: (field: string) => RuleFieldKind,
  skip: ReadonlySet<string> = new Set(),
): FieldChange[] {
  const fields = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((f) => !skip.has(f));
  const out: FieldChange[] = [];
  for (const field of fields) {
    if (isDeepStrictEqual(before[field], after[field])) continue;
    out.push({
      field,
      kind: kindOf(field),
      ...(before[field] !== undefined && { before: before[field] }),
      ...(after[field] !== undefined && { after: after[field] }),
    });
  }
  return out.sort((a, b) => KIND_ORDER.indexOf(a.kind) - KIND_ORDER.indexOf(b.kind));
}

/**
 * `after` against `before` (undefined: nothing was active, so every rule is added). Thresholds
 * are a section (`thresholds`), kind `score`: they decide what a rule's score does.
 */
export function diffPolicies(before: PolicyFile | undefined, after: PolicyFile): PolicyDiff {
  const oldRules = new Map((before?.rules ?? []).map((r) => [r.id, r]));
  const newIds = new Set(after.rules.map((r) => r.id));
  const diff: PolicyDiff = {
    added: after.rules.filter((r) => !oldRules.has(r.id)),
    removed: (before?.rules ?? []).filter((r) => !newIds.has(r.id)),
    changed: [],
    unchanged: 0,
    reordered: false,
    sections: [],
  };
  for (const rule of after.rules) {
    const old = oldRules.get(rule.id);
    if (old === undefined) continue;
    const changes = changedFields(old, rule, (f) => RULE_FIELD_KINDS[f as keyof PolicyRule] ?? 'other');
    if (changes.length === 0) diff.unchanged += 1;
    else diff.changed.push({ id: rule.id, changes });
  }
  const kept = (rules: readonly PolicyRule[], other: ReadonlySet<string>) =>
    rules.filter((r) => other.has(r.id)).map((r) => r.id);
  diff.reordered = !isDeepStrictEqual(
    kept(before?.rules ?? [], newIds),
    kept(after.rules, new Set(oldRules.keys())),
  );
  if (before !== undefined)
    diff.sections = changedFields(
      before,
      after,
      (f) => (f === 'thresholds' ? 'score' : f === 'actions' || f === 'verdictActions' ? 'actions' : 'other'),
      SKIPPED_SECTIONS,
    );
  return diff;
}

/** Whether `diff` changes nothing a decision reads. */
export function isEmptyDiff(diff: PolicyDiff): boolean {
  return (
    diff.added.length === 0 &&
    diff.removed.length === 0 &&
    diff.changed.length === 0 &&
    diff.sections.length === 0 &&
    !diff.reordered
  );
}
