import type { Verdict } from '../decision-store/decision-query.ts';
import type { RevisionReport, RuleQuality, RuleReport } from '../decision-store/rule-report.ts';
import { Time, VerdictBadge } from './console-layout.tsx';

/**
 * The Rules page: per revision (active, shadow), each rule's fire rate over 1 h / 24 h / 7 d with
 * its last 24 hours as a small bar chart, precision and recall against the labels, the rules that
 * never fired, and the shadow-against-active agreement matrix. Each rule links to its decisions.
 */

const percent = (rate: number) => `${(rate * 100).toFixed(rate > 0 && rate < 0.01 ? 2 : 1)}%`;
const ratio = (value: number | undefined) => (value === undefined ? '—' : value.toFixed(2));
const VERDICTS: readonly Verdict[] = ['allow', 'challenge', 'deny'];

/** 24 hourly counts as bars (inline SVG: attributes only, the CSP allows no inline style). */
export function Sparkline(props: { hourly: readonly number[]; ruleId: string }) {
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
    </svg>
  );
}

function RuleRow(props: { r: RuleQuality; policy: 'active' | 'shadow' }) {
  const { r } = props;
  const l = r.labelled;
  return (
    <tr>
      <th scope="row">
        <a href={`/console/decisions?range=7d&rule=${encodeURIComponent(r.ruleId)}`}>{r.ruleId}</a>
        {r.neverFired && <span class="tag tag-warn">never fired</span>}{' '}
        <a href={`/console/rules/${encodeURIComponent(r.ruleId)}`} class="muted">
          snoozes
        </a>
        {r.description !== undefined && <div class="muted">{r.description}</div>}
      </th>
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
      <td class="num">{ratio(r.precision)}</td>
      <td class="num">{ratio(r.recall)}</td>
      <td class="num">
        {l.truePositives} / {l.falsePositives} / {l.falseNegatives}
      </td>
    </tr>
  );
}

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
        <thead>
          <tr>
            <th scope="col">Rule</th>
            <th scope="col" class="num">
              Fires 1 h
            </th>
            <th scope="col" class="num">
              24 h
            </th>
            <th scope="col" class="num">
              7 d
            </th>
            <th scope="col">Last 24 h</th>
            <th scope="col" class="num">
              Precision
            </th>
            <th scope="col" class="num">
              Recall
            </th>
            <th scope="col" class="num">
              <abbr title="fired on fraud / fired on legit / missed fraud (labelled, 7 days)">
                TP / FP / FN
              </abbr>
            </th>
          </tr>
        </thead>
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
        <thead>
          <tr>
            <th scope="col">Active ↓ / Shadow →</th>
            {VERDICTS.map((v) => (
              <th scope="col" class="num">
                {v}
              </th>
            ))}
          </tr>
        </thead>
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

export function RulesView(props: { report: RuleReport }) {
  const { report } = props;
  return (
    <>
      <h1>Rules</h1>
      <p class="muted">
        As of <Time at={report.generatedAt} />. Precision and recall count labelled decisions of the last 7
        days.
      </p>
      <Revision rev={report.active} />
      {report.shadow !== undefined && <Revision rev={report.shadow} />}
      {report.agreement !== undefined && <Agreement agreement={report.agreement} />}
    </>
  );
}
