import type { Child } from 'hono/jsx';
import type { Verdict } from '../decision-store/decision-query.ts';
import type {
  RevisionMarker,
  RevisionReport,
  RuleAcrossRevisions,
  RuleHistory,
  RuleQuality,
  RuleReport,
} from '../decision-store/rule-report.ts';
import { Time, VerdictBadge } from './console-layout.tsx';

/**
 * The Rules page: per revision (active, shadow), each rule's fire rate over 1 h / 24 h / 7 d with
 * its last 24 hours as a small bar chart, precision and recall against the labels, the rules that
 * never fired, and the shadow-against-active agreement matrix. Each rule links to its decisions.
 */

const percent = (rate: number) => `${(rate * 100).toFixed(rate > 0 && rate < 0.01 ? 2 : 1)}%`;
const ratio = (value: number | undefined) => (value === undefined ? '—' : value.toFixed(2));
const VERDICTS: readonly Verdict[] = ['allow', 'challenge', 'deny'];

/** A column's heading, and `num` for a column of numbers (right-aligned). */
type Column = readonly [heading: Child, num?: 'num'];

/** A table's head: one row of column headings. */
function Head(props: { columns: readonly Column[] }) {
  return (
    <thead>
      <tr>
        {props.columns.map(([heading, num]) => (
          <th scope="col" class={num}>
            {heading}
          </th>
        ))}
      </tr>
    </thead>
  );
}

/** The columns every table of rules starts with, and the labels' measures they all show. */
const RULE_COLUMN: Column = ['Rule'];
const QUALITY_COLUMNS: readonly Column[] = [
  ['Precision', 'num'],
  ['Recall', 'num'],
];

/** A rule's heading cell: its id (to its decisions of 7 days), then `children` (tags, links). */
function RuleCell(props: { ruleId: string; children?: Child }) {
  return (
    <th scope="row">
      <a href={`/console/decisions?range=7d&rule=${encodeURIComponent(props.ruleId)}`}>{props.ruleId}</a>
      {props.children}
    </th>
  );
}

/** A rule's precision and recall cells. */
function QualityCells(props: { r: { precision?: number | undefined; recall?: number | undefined } }) {
  return (
    <>
      <td class="num">{ratio(props.r.precision)}</td>
      <td class="num">{ratio(props.r.recall)}</td>
    </>
  );
}

/**
 * 24 hourly counts as bars (inline SVG: attributes only, the CSP allows no inline style), with a
 * tick above each hour in which a revision began deciding (`markers`: hour indexes, oldest 0).
 */
export function Sparkline(props: { hourly: readonly number[]; ruleId: string; markers?: readonly number[] }) {
  const max = Math.max(1, ...props.hourly);
  const w = 4;
  const h = 22;
  return (
    <svg
      class="spark"
      role="img"
      aria-label={`${props.ruleId}: matches per hour over the last 24 hours, at most ${max}`}
      width={props.hourly.length * (w + 1)}
      height={h}
      viewBox={`0 0 ${props.hourly.length * (w + 1)} ${h}`}
    >
      {props.hourly.map((n, i) => {
        const bar = n === 0 ? 0 : Math.max(1, Math.round((n / max) * h));
        return <rect x={i * (w + 1)} y={h - bar} width={w} height={bar} />;
      })}
      {(props.markers ?? []).map((i) => (
        <line class="marker" x1={i * (w + 1)} x2={i * (w + 1)} y1={0} y2={h} stroke="currentColor" />
      ))}
    </svg>
  );
}

function RuleRow(props: { r: RuleQuality; policy: 'active' | 'shadow' }) {
  const { r } = props;
  const l = r.labelled;
  return (
    <tr>
      <RuleCell ruleId={r.ruleId}>
        {r.neverFired && <span class="tag tag-warn">never fired</span>}{' '}
        <a href={`/console/rules/${encodeURIComponent(r.ruleId)}`} class="muted">
          snoozes
        </a>
        {r.description !== undefined && <div class="muted">{r.description}</div>}
      </RuleCell>
      <td class="num">
        {r.fires.h1} <span class="muted">({percent(r.fireRate.h1)})</span>
      </td>
      <td class="num">
        {r.fires.h24} <span class="muted">({percent(r.fireRate.h24)})</span>
      </td>
      <td class="num">
        {r.fires.d7} <span class="muted">({percent(r.fireRate.d7)})</span>
      </td>
      <td>
        <Sparkline hourly={r.hourly} ruleId={r.ruleId} />
      </td>
      <QualityCells r={r} />
      <td class="num">
        {l.truePositives} / {l.falsePositives} / {l.falseNegatives}
      </td>
    </tr>
  );
}

const REVISION_COLUMNS: readonly Column[] = [
  RULE_COLUMN,
  ['Fires 1 h', 'num'],
  ['24 h', 'num'],
  ['7 d', 'num'],
  ['Last 24 h'],
  ...QUALITY_COLUMNS,
  [
    <abbr title="fired on fraud / fired on legit / missed fraud (labelled, 7 days)">TP / FP / FN</abbr>,
    'num',
  ],
];

function Revision(props: { rev: RevisionReport }) {
  const { rev } = props;
  const never = rev.rules.filter((r) => r.neverFired);
  return (
    <section class="card" aria-labelledby={`h-${rev.policy}`}>
      <h2 id={`h-${rev.policy}`}>
        {rev.policy === 'active' ? 'Active policy' : 'Shadow policy'}: {rev.name}{' '}
        <span class="mono muted">{rev.revision}</span>
      </h2>
      <p class="muted">
        Decisions: {rev.decisions.h1} in the last hour, {rev.decisions.h24} in 24 h, {rev.decisions.d7} in 7
        days.
      </p>
      <table>
        <Head columns={REVISION_COLUMNS} />
        <tbody>
          {rev.rules.map((r) => (
            <RuleRow r={r} policy={rev.policy} />
          ))}
        </tbody>
      </table>
      <p>
        Never fired:{' '}
        {never.length === 0 ? (
          <span class="muted">none</span>
        ) : (
          never.map((r) => <span class="tag">{r.ruleId}</span>)
        )}
      </p>
    </section>
  );
}

function Agreement(props: { agreement: NonNullable<RuleReport['agreement']> }) {
  return (
    <section class="card" aria-labelledby="h-agreement">
      <h2 id="h-agreement">Shadow against active (7 days)</h2>
      <table>
        <Head columns={[['Active ↓ / Shadow →'], ...VERDICTS.map((v): Column => [v, 'num'])]} />
        <tbody>
          {VERDICTS.map((a) => (
            <tr>
              <th scope="row">
                <VerdictBadge verdict={a} />
              </th>
              {VERDICTS.map((s) => (
                <td class="num">
                  {a === s ? (
                    props.agreement[a][s]
                  ) : (
                    <a href={`/console/decisions?range=7d&verdict=${a}&shadow=disagrees`}>
                      {props.agreement[a][s]}
                    </a>
                  )}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

const HOUR_MS = 3_600_000;
const shortRevision = (revision: string) => revision.slice(0, 12);

/** The hour indexes (0: 24 h ago) of the last 24 h in which a revision of `history` began deciding. */
export function markerHours(history: RuleHistory, generatedAt: string): number[] {
  const end = Date.parse(generatedAt);
  return history.revisions.flatMap((m) => {
    const hoursAgo = Math.floor((end - Date.parse(m.firstDecisionAt)) / HOUR_MS);
    return hoursAgo >= 0 && hoursAgo < 24 ? [23 - hoursAgo] : [];
  });
}

function MarkerRow(props: { m: RevisionMarker }) {
  const { m } = props;
  return (
    <li>
      <a href={`/console/rules?revision=${encodeURIComponent(m.revision)}`} class="mono">
        {shortRevision(m.revision)}
      </a>{' '}
      {m.current && <span class="tag">active</span>} from <Time at={m.firstDecisionAt} /> to{' '}
      <Time at={m.lastDecisionAt} />, {m.decisions.d7} decisions in 7 days
      {m.version !== undefined && (
        <span class="muted">
          {' '}
          (version {m.version.id} by {m.version.author}: {m.version.message})
        </span>
      )}
    </li>
  );
}

function HistoryRow(props: { r: RuleAcrossRevisions; markers: readonly number[] }) {
  const { r } = props;
  return (
    <tr>
      <RuleCell ruleId={r.ruleId}>
        {r.status === 'removed' && <span class="tag tag-warn">removed</span>}
      </RuleCell>
      <td class="num">{r.fires.d7}</td>
      <td>
        <Sparkline hourly={r.hourly} ruleId={r.ruleId} markers={props.markers} />
      </td>
      <QualityCells r={r} />
      <td class="muted">
        {r.byRevision.map((b) => (
          <span class="mono">
            {shortRevision(b.revision)}: {b.fires} fires, precision {ratio(b.precision)}{' '}
          </span>
        ))}
      </td>
    </tr>
  );
}

const HISTORY_COLUMNS: readonly Column[] = [
  RULE_COLUMN,
  ['Fires 7 d', 'num'],
  ['Last 24 h (| a revision began)'],
  ...QUALITY_COLUMNS,
  ['By revision'],
];

/** Each rule by id across the active policy's revisions, with the revisions as markers. */
function History(props: { history: RuleHistory; generatedAt: string }) {
  const { history } = props;
  const markers = markerHours(history, props.generatedAt);
  return (
    <section class="card" aria-labelledby="h-history">
      <h2 id="h-history">
        Across revisions: {history.name}
        {history.scope === 'revision' && (
          <>
            {' '}
            (one revision; <a href="/console/rules">all revisions</a>)
          </>
        )}
      </h2>
      <p class="muted">
        A rule id is one series over the revisions below: labels given under an earlier revision count for it.
        {history.omittedRevisions > 0 && ` ${history.omittedRevisions} older revisions left out.`}
      </p>
      <ol>
        {history.revisions.map((m) => (
          <MarkerRow m={m} />
        ))}
      </ol>
      <table>
        <Head columns={HISTORY_COLUMNS} />
        <tbody>
          {history.rules.map((r) => (
            <HistoryRow r={r} markers={markers} />
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** How old the kept report is, in words: it is computed at most once per `maxAgeMs`. */
export function reportAge(generatedAt: string, nowMs: number, maxAgeMs: number): string {
  const seconds = Math.max(0, Math.round((nowMs - Date.parse(generatedAt)) / 1000));
  return `Computed ${seconds} s ago (kept for up to ${Math.round(maxAgeMs / 1000)} s, then recomputed).`;
}

export function RulesView(props: { report: RuleReport; nowMs: number; maxAgeMs: number }) {
  const { report } = props;
  return (
    <>
      <h1>Rules</h1>
      <p class="muted">
        As of <Time at={report.generatedAt} />. {reportAge(report.generatedAt, props.nowMs, props.maxAgeMs)}{' '}
        Precision and recall count labelled decisions of the last 7 days.
      </p>
      <History history={report.history} generatedAt={report.generatedAt} />
      <Revision rev={report.active} />
      {report.shadow !== undefined && <Revision rev={report.shadow} />}
      {report.agreement !== undefined && <Agreement agreement={report.agreement} />}
    </>
  );
}
