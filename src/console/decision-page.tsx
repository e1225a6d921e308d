import type { StoredDecision } from '../decision-store/decision-query.ts';
import type { OutboxEntryView } from '../outbox/outbox-view.ts';
import { type InputTable, type InputValues, shortText as show } from '../policy/inputs/input-row.ts';
import { INPUT_ROWS } from '../policy/inputs/input-table.ts';
import type { ReviewCaseView } from '../review-queue/review-api.ts';
import { visibleText } from '../text/visible-text.ts';
import { CsrfField, Notice, Time, VerdictBadge } from './console-layout.tsx';
import { SendToReview } from './review-page.tsx';
import { SnoozeForms } from './snoozes-page.tsx';

/**
 * One decision, whole: the verdict and why (every matched, failing, skipped and shadow rule with
 * its contribution), each input as the policy saw it, the shadow's verdict, the timings, the
 * actions with their outbox state, and its labels with a form to add one.
 */

type Line = StoredDecision['line'];

function Facts(props: { rows: [string, string | undefined][] }) {
  const rows = props.rows.filter(([, v]) => v !== undefined && v !== '');
  return (
    <dl class="facts">
      {rows.map(([k, v]) => (
        <>
          <dt>{k}</dt>
          <dd class="mono">
            <bdi>{visibleText(v ?? '')}</bdi>
          </dd>
        </>
      ))}
    </dl>
  );
}

function contribution(r: { score?: number | undefined; verdict?: string | undefined }): string {
  const parts = [];
  if (r.score !== undefined) parts.push(`${r.score >= 0 ? '+' : ''}${r.score}`);
  if (r.verdict !== undefined) parts.push(`verdict ${r.verdict}`);
  return parts.join(', ') || '—';
}

function Rules(props: { line: Line }) {
  const o = props.line.outcome;
  const rows: { id: string; state: string; description: string; effect: string; cls: string }[] = [
    ...o.matchedRules.map((r) => ({
      id: r.id,
      state: r.error !== undefined ? 'failed (counted)' : 'matched',
      description: r.error !== undefined ? `${r.description} (error: ${r.error})` : r.description,
      effect: contribution(r),
      cls: r.error !== undefined ? 'tag tag-bad' : 'tag tag-warn',
    })),
    ...(o.skippedRules ?? []).map((r) => ({
      id: r.id,
      state: 'skipped',
      description: r.reason,
      effect: 'not counted',
      cls: 'tag',
    })),
    ...(o.snoozed ?? []).map((r) => ({
      id: r.id,
      state: 'snoozed',
      description: `snoozed for ${r.entity} ${r.value} until ${r.until} (snooze ${r.snoozeId})`,
      effect: 'not counted',
      cls: 'tag',
    })),
    ...(o.shadowMatches ?? []).map((r) => ({
      id: r.id,
      state: 'shadow rule matched',
      description: r.description,
      effect: `${contribution(r)} (not counted)`,
      cls: 'tag',
    })),
  ];
  return (
    <section class="card" aria-labelledby="h-rules">
      <h2 id="h-rules">Rules</h2>
      {rows.length === 0 ? (
        <p class="muted">No rule matched; the score is the policy's base.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Rule</th>
              <th scope="col">State</th>
              <th scope="col">Description or reason</th>
              <th scope="col">Contribution</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr>
                <td>
                  <a href={`/console/decisions?rule=${encodeURIComponent(r.id)}`}>{r.id}</a>
                </td>
                <td>
                  <span class={r.cls}>{r.state}</span>
                </td>
                <td>{r.description}</td>
                <td>{r.effect}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {o.snoozesUnavailable !== undefined && (
        <p class="muted">
          The rule snoozes could not be read ({o.snoozesUnavailable}): every rule counted as if nothing were
          snoozed.
        </p>
      )}
      {(o.suppressedActions ?? []).length > 0 && (
        <p>
          Actions withheld:{' '}
          {(o.suppressedActions ?? []).map((s) => (
            <span class="tag">
              {s.name} ({s.reason}
              {s.by !== undefined ? ` by ${s.by}` : ''})
            </span>
          ))}
        </p>
      )}
    </section>
  );
}

/** Each input as the policy saw it: a line per row of the input table the decision log kept. */
function Inputs(props: { line: Line; table: InputTable }) {
  const { inputs, outcome } = props.line;
  const values = inputs as InputValues;
  const treatment = (name: string) => outcome.unavailable.find((u) => u.signal === name)?.treatment;
  const rows = props.table.flatMap((row) => {
    const described = row.describe(values);
    return described === undefined ? [] : [{ name: row.name, described }];
  });
  return (
    <section class="card" aria-labelledby="h-signals">
      <h2 id="h-signals">Signals and inputs</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Input</th>
            <th scope="col">Value, or why unavailable</th>
            <th scope="col">Treatment</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(({ name, described: d }) => (
            <tr>
              <td>{d.label}</td>
              <td>
                {'facts' in d ? (
                  <Facts rows={d.facts} />
                ) : 'unavailable' in d ? (
                  <span class="tag tag-warn">unavailable: {d.unavailable}</span>
                ) : (
                  <span class="muted">{d.note}</span>
                )}
              </td>
              <td>{treatment(name) ?? ('facts' in d ? 'read by the rules' : '—')}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** The calls of the decision as horizontal bars (inline SVG: attributes, no style). */
function Timings(props: { line: Line }) {
  const { calls, totalMs, evaluationMs } = props.line.timings;
  const bars = [...calls, { name: 'evaluation', durationMs: evaluationMs, outcome: 'ok' }];
  const scale = Math.max(totalMs, ...bars.map((b) => b.durationMs), 1);
  const width = 420;
  const rowH = 20;
  return (
    <section class="card" aria-labelledby="h-timings">
      <h2 id="h-timings">Timings</h2>
      <p>
        Answered in <strong>{totalMs.toFixed(1)} ms</strong>.
      </p>
      <svg
        class="bars"
        role="img"
        aria-label="Time of each call, milliseconds"
        width={width + 260}
        height={bars.length * rowH + 4}
        viewBox={`0 0 ${width + 260} ${bars.length * rowH + 4}`}
      >
        {bars.map((b, i) => (
          <g>
            <text x="0" y={i * rowH + 14}>
              {b.name}
            </text>
            <rect
              class={b.outcome === 'ok' ? 'ok' : 'fail'}
              x="150"
              y={i * rowH + 4}
              height="12"
              width={Math.max(1, (b.durationMs / scale) * width)}
            />
            <text x={155 + Math.max(1, (b.durationMs / scale) * width)} y={i * rowH + 14}>
              {`${b.durationMs.toFixed(1)} ms${b.outcome === 'ok' ? '' : ` (${b.outcome})`}`}
            </text>
          </g>
        ))}
      </svg>
    </section>
  );
}

function Actions(props: { d: StoredDecision; outbox: readonly OutboxEntryView[] }) {
  const { d } = props;
  return (
    <section class="card" aria-labelledby="h-actions">
      <h2 id="h-actions">Actions</h2>
      {d.line.actions.length === 0 ? (
        <p class="muted">The policy asked for no action.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Action</th>
              <th scope="col">In the answer</th>
              <th scope="col">Outcome</th>
              <th scope="col">Outbox</th>
            </tr>
          </thead>
          <tbody>
            {d.line.actions.map((a) => {
              const outcomes = d.actions.filter((o) => o.type === a.type);
              const entries = props.outbox.filter((e) => e.type === a.type);
              return (
                <tr>
                  <td>
                    {a.type}
                    <div class="muted">from {a.source}</div>
                    {a.type === 'lock_out_user' && (
                      <div>
                        <a href={`/console/lockouts/${encodeURIComponent(d.decisionId)}`}>lock-out record</a>
                      </div>
                    )}
                  </td>
                  <td>
                    {a.status}
                    {a.reason !== undefined ? ` (${a.reason})` : ''}
                  </td>
                  <td>
                    {outcomes.length === 0
                      ? '—'
                      : outcomes.map((o) => (
                          <div>
                            <span class={o.status === 'done' ? 'tag tag-good' : 'tag'}>{o.status}</span>{' '}
                            <Time at={o.at} />
                          </div>
                        ))}
                  </td>
                  <td>
                    {entries.length === 0
                      ? '—'
                      : entries.map((e) => (
                          <div>
                            <a href={`/console/actions?status=${e.status}`}>{e.status}</a>, {e.attempts}{' '}
                            attempt(s)
                            {e.lastError !== undefined ? `, last error ${e.lastError}` : ''}
                          </div>
                        ))}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** What the login backend reported of the login (`POST /decisions/{id}/outcome`), and the label it points to. */
function LoginOutcomes(props: { d: StoredDecision }) {
  const { d } = props;
  return (
    <section class="card" aria-labelledby="h-login-outcomes">
      <h2 id="h-login-outcomes">Outcomes from the login backend</h2>
      {d.outcomes.length === 0 ? (
        <p class="muted">No outcome reported.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">what</th>
              <th scope="col">result</th>
              <th scope="col">at</th>
              <th scope="col">reported by</th>
              <th scope="col">points to</th>
            </tr>
          </thead>
          <tbody>
            {d.outcomes.map((o) => (
              <tr>
                <td>{o.type === 'step_up' ? 'step-up' : 'account event'}</td>
                <td>{o.value.replaceAll('_', ' ')}</td>
                <td>
                  <Time at={o.at} />
                </td>
                <td class="mono">{o.reportedBy}</td>
                <td>{o.label ?? 'no label'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function Labels(props: { d: StoredDecision; csrf: string; canLabel: boolean }) {
  const { d } = props;
  return (
    <section class="card" aria-labelledby="h-labels">
      <h2 id="h-labels">Label</h2>
      {d.labels.length === 0 ? (
        d.outcomeLabel !== undefined ? (
          <p>
            <strong>{d.outcomeLabel}</strong> from the login backend's outcomes (no analyst label: one would
            win).
          </p>
        ) : (
          <p class="muted">Not labelled yet.</p>
        )
      ) : (
        <ul>
          {d.labels.map((l) => (
            <li>
              <strong>{l.label}</strong> by {l.labelledBy}, <Time at={l.at} />
              {l.note !== undefined ? `: ${l.note}` : ''}
            </li>
          ))}
        </ul>
      )}
      {props.canLabel ? (
        <form method="post" action={`/console/decisions/${encodeURIComponent(d.decisionId)}/label`}>
          <CsrfField token={props.csrf} />
          <fieldset>
            <legend>What was this login?</legend>
            <label>
              <input type="radio" name="label" value="fraud" required /> fraud
            </label>
            <label>
              <input type="radio" name="label" value="legit" /> legit
            </label>
          </fieldset>
          <label for="label-note">Note (optional)</label>
          <textarea id="label-note" name="note" rows={2} maxlength={1000} />
          <p>
            <button type="submit">Save label</button>
          </p>
        </form>
      ) : (
        <p class="muted">Labelling takes the analyst role.</p>
      )}
    </section>
  );
}

export function DecisionView(props: {
  d: StoredDecision;
  /** The input table whose rows the page shows (the active policy's). Default: the built-in one. */
  inputs?: InputTable | undefined;
  outbox: readonly OutboxEntryView[];
  csrf: string;
  canLabel: boolean;
  /** Whether the operator may snooze a rule here (an analyst, with the snoozes running). */
  canSnooze?: boolean | undefined;
  /** The decision's review case, if any, and whether the operator may send it to review. */
  review?: { existing: ReviewCaseView | undefined; canSend: boolean } | undefined;
  notice?: string | undefined;
  /** A label form's error (the problem's detail). */
  error?: string | undefined;
}) {
  const { d } = props;
  const o = d.line.outcome;
  const r = d.line.request as Record<string, unknown>;
  return (
    <>
      <h1>
        Decision <VerdictBadge verdict={d.verdict} /> <span class="mono muted">{d.decisionId}</span>
      </h1>
      {props.notice !== undefined && <Notice kind="ok">{props.notice}</Notice>}
      {props.error !== undefined && <Notice kind="error">{props.error}</Notice>}
      <div class="grid-2">
        <section class="card" aria-labelledby="h-outcome">
          <h2 id="h-outcome">Outcome</h2>
          <Facts
            rows={[
              ['verdict', d.verdict],
              ['score', `${o.score} (challenge at ${o.thresholds.challenge}, deny at ${o.thresholds.deny})`],
              ['decided by', o.decidedBy],
              ['degraded', d.degraded ? 'yes' : 'no'],
              ['policy', `${d.policy.name} ${d.policy.revision}`],
              ['at', d.at],
              ['override', o.override !== undefined ? `${o.override.list}: ${o.override.reason}` : undefined],
            ]}
          />
        </section>
        <section class="card" aria-labelledby="h-request">
          <h2 id="h-request">Request</h2>
          <Facts rows={Object.entries(r).map(([k, v]): [string, string] => [k, show(v)])} />
        </section>
      </div>
      {d.line.shadow !== undefined && (
        <section class="card" aria-labelledby="h-shadow">
          <h2 id="h-shadow">Shadow policy</h2>
          <p>
            <VerdictBadge verdict={d.line.shadow.verdict} /> score {d.line.shadow.score}, rules{' '}
            {d.line.shadow.rules.join(', ') || 'none'} ({d.line.shadow.policy.name}{' '}
            {d.line.shadow.policy.revision})
            {d.line.shadow.verdict !== d.verdict ? ' : disagrees with the active policy.' : ': agrees.'}
          </p>
        </section>
      )}
      <Rules line={d.line} />
      <Inputs line={d.line} table={props.inputs ?? INPUT_ROWS} />
      <Timings line={d.line} />
      <Actions d={d} outbox={props.outbox} />
      <LoginOutcomes d={d} />
      <Labels d={d} csrf={props.csrf} canLabel={props.canLabel} />
      {props.canSnooze === true && <SnoozeForms d={d} csrf={props.csrf} />}
      {props.review !== undefined && (props.review.existing !== undefined || props.review.canSend) && (
        <SendToReview decisionId={d.decisionId} existing={props.review.existing} csrf={props.csrf} />
      )}
    </>
  );
}
