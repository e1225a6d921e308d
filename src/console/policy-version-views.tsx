import type { Child } from 'hono/jsx';
import type { PolicyRule } from '../policy/policy-schema.ts';
import type { FieldChange, PolicyDiff } from '../policy-versions/policy-version-diff.ts';
import type { PolicyVersion, ServedPolicyVersions } from '../policy-versions/policy-version-store.ts';
import { Time } from './console-layout.tsx';

/**
 * The parts of the Policies pages: a version's state with what the replicas do with it (active,
 * staged, scheduled), its diff against another version by rule, and the evidence attached to it.
 * Everything a version carries is the author's text: rendered as text (JSX escapes it), never HTML.
 */

const iso = (ms: number) => new Date(ms).toISOString();

/** The tag class of a state: active good, refused ones bad, the rest plain. */
function stateClass(state: string): string {
  if (state === 'active') return 'tag tag-good';
  if (state === 'rejected' || state === 'withdrawn') return 'tag tag-bad';
  if (state === 'proposed' || state === 'approved') return 'tag tag-warn';
  return 'tag';
}

/** A version's state, and what the replicas serve of it (active, staged to a share, scheduled). */
export function VersionState(props: { v: PolicyVersion; served: ServedPolicyVersions | undefined }) {
  const { v, served } = props;
  const staged = served?.staged?.version.id === v.id ? served.staged : undefined;
  const scheduled = served?.scheduled?.versionId === v.id ? served.scheduled : undefined;
  return (
    <span class="version-state">
      <span class={stateClass(v.state)}>{v.state}</span>
      {served?.active?.id === v.id && v.state !== 'active' && <span class="tag tag-good">served</span>}
      {staged !== undefined && (
        <span class="tag tag-warn">
          staged: {staged.stage === 'shadow' ? 'shadow' : `${staged.basisPoints / 100} % of accounts`}
        </span>
      )}
      {scheduled !== undefined && (
        <span class="tag tag-warn">
          scheduled for <Time at={iso(scheduled.atMs)} /> by {scheduled.by}
        </span>
      )}
    </span>
  );
}

/** A version id as a link to its page (the first 12 digits are its time, the rest tell two apart). */
export function VersionLink(props: { id: string | null }) {
  if (props.id === null) return <span class="muted">none</span>;
  return (
    <a href={`/console/policies/${encodeURIComponent(props.id)}`} class="mono">
      {props.id}
    </a>
  );
}

/** A value from a policy: a string as written, anything else as JSON; long lines wrap. */
function Value(props: { value: unknown }) {
  if (props.value === undefined) return <span class="muted">(not set)</span>;
  const text = typeof props.value === 'string' ? props.value : JSON.stringify(props.value, null, 2);
  return <pre class="wrap">{text}</pre>;
}

function ChangesTable(props: { changes: readonly FieldChange[]; label: string }) {
  return (
    <table class="diff" aria-label={props.label}>
      <thead>
        <tr>
          <th scope="col">Field</th>
          <th scope="col">Before</th>
          <th scope="col">After</th>
        </tr>
      </thead>
      <tbody>
        {props.changes.map((ch) => (
          <tr>
            <th scope="row">
              <span class="mono">{ch.field}</span>{' '}
              {ch.kind !== ch.field && <span class="tag">{ch.kind}</span>}
            </th>
            <td class="before">
              <Value value={ch.before} />
            </td>
            <td class="after">
              <Value value={ch.after} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A rule whole (added or removed): each field it sets. */
function RuleFacts(props: { rule: PolicyRule }) {
  const fields = Object.entries(props.rule).filter(([k]) => k !== 'id');
  return (
    <dl class="facts">
      {fields.map(([k, v]) => (
        <>
          <dt class="mono">{k}</dt>
          <dd>
            <Value value={v} />
          </dd>
        </>
      ))}
    </dl>
  );
}

function RuleList(props: { rules: readonly PolicyRule[]; kind: 'added' | 'removed' }) {
  if (props.rules.length === 0) return null;
  return (
    <section aria-labelledby={`h-${props.kind}`}>
      <h3 id={`h-${props.kind}`}>Rules {props.kind}</h3>
      {props.rules.map((r) => (
        <div class={`rule-${props.kind}`}>
          <h4>
            <span class="mono">{r.id}</span> <span class="tag">{props.kind}</span>
          </h4>
          <RuleFacts rule={r} />
        </div>
      ))}
    </section>
  );
}

/** The diff of a version against `base` by rule: added, removed, changed (field by field), sections. */
export function DiffView(props: { diff: PolicyDiff; base: Child }) {
  const { diff } = props;
  const nothing =
    diff.added.length + diff.removed.length + diff.changed.length + diff.sections.length === 0 &&
    !diff.reordered;
  return (
    <section class="card" aria-labelledby="h-diff" id="diff">
      <h2 id="h-diff">Changes against {props.base}</h2>
      <p>
        {diff.added.length} rule(s) added, {diff.removed.length} removed, {diff.changed.length} changed,{' '}
        {diff.unchanged} unchanged.
      </p>
      {nothing && <p class="muted">No change a decision reads (formatting and comments only, or none).</p>}
      {diff.reordered && (
        <p class="notice">The rules both versions have come in another order (what a reader sees first).</p>
      )}
      <RuleList rules={diff.added} kind="added" />
      <RuleList rules={diff.removed} kind="removed" />
      {diff.changed.length > 0 && (
        <section aria-labelledby="h-changed">
          <h3 id="h-changed">Rules changed</h3>
          {diff.changed.map((r) => (
            <div class="rule-changed">
              <h4>
                <span class="mono">{r.id}</span>{' '}
                <span class="muted">{r.changes.map((c) => c.kind).join(', ')}</span>
              </h4>
              <ChangesTable changes={r.changes} label={`Rule ${r.id}: changed fields`} />
            </div>
          ))}
        </section>
      )}
      {diff.sections.length > 0 && (
        <section aria-labelledby="h-sections">
          <h3 id="h-sections">Other parts of the policy</h3>
          <ChangesTable changes={diff.sections} label="Changed sections" />
        </section>
      )}
    </section>
  );
}

/** How deep the evidence is shown as nested facts before the rest is JSON. */
const EVIDENCE_DEPTH = 4;
/** Items of a list shown before "and n more". */
const EVIDENCE_ITEMS = 20;

function EvidenceValue(props: { value: unknown; depth: number }) {
  const { value, depth } = props;
  if (value === null || value === undefined) return <span class="muted">none</span>;
  if (typeof value !== 'object') return <span class="mono">{String(value)}</span>;
  if (depth >= EVIDENCE_DEPTH) return <pre class="wrap">{JSON.stringify(value, null, 2)}</pre>;
  if (Array.isArray(value)) {
    if (value.length === 0) return <span class="muted">none</span>;
    return (
      <ol>
        {value.slice(0, EVIDENCE_ITEMS).map((item) => (
          <li>
            <EvidenceValue value={item} depth={depth + 1} />
          </li>
        ))}
        {value.length > EVIDENCE_ITEMS && <li class="muted">and {value.length - EVIDENCE_ITEMS} more</li>}
      </ol>
    );
  }
  return (
    <dl class="facts">
      {Object.entries(value as Record<string, unknown>).map(([k, v]) => (
        <>
          <dt>{k}</dt>
          <dd>
            <EvidenceValue value={v} depth={depth + 1} />
          </dd>
        </>
      ))}
    </dl>
  );
}

/**
 * The evidence attached on proposal (the check, the policy's suites, the backtest), when the
 * version carries any: shown as it comes, key by key, so a field added to it later shows too.
 */
export function EvidenceView(props: { evidence: unknown }) {
  return (
    <section class="card" aria-labelledby="h-evidence" id="evidence">
      <h2 id="h-evidence">Evidence</h2>
      {props.evidence === undefined ? (
        <p class="muted">No evidence is attached to this version.</p>
      ) : (
        <EvidenceValue value={props.evidence} depth={0} />
      )}
    </section>
  );
}
