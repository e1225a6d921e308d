import { z } from 'zod';
import type {
  DecisionFilter,
  DecisionPage,
  DecisionSummary,
  TimeSlice,
  VerdictCounts,
} from '../decision-store/decision-query.ts';
import { storableLine } from '../text/storable-text.ts';
import { Time, VerdictBadge } from './console-layout.tsx';

/** The Decisions page: filters (a GET form, so every view is a link), counts, rows, paging, live tail. */

const RANGES = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000, all: 0 };

/** Most slices the decisions-over-time chart draws. */
const MAX_SLICES = 60;
const MINUTE_MS = 60_000;
/** Slice widths the chart picks from: the smallest that fits the range in {@link MAX_SLICES}. */
const SLICE_STEPS_MS = [5, 15, 60, 180, 360, 720, 1440].map((m) => m * MINUTE_MS);

/** The chart's slices over `fromMs`..`toMs` (the range of the page's filter). */
export function chartFrame(fromMs: number | undefined, toMs: number): { fromMs: number; bucketMs: number } {
  const start = fromMs ?? toMs - 30 * 86_400_000;
  const span = Math.max(MINUTE_MS, toMs - start);
  const bucketMs = SLICE_STEPS_MS.find((step) => span / step <= MAX_SLICES) ?? 1440 * MINUTE_MS;
  // Whole slices: the first starts on a multiple of its width, as the database groups them.
  const first = Math.floor(Math.max(start, toMs - bucketMs * MAX_SLICES) / bucketMs) * bucketMs;
  return { fromMs: first, bucketMs };
}

/**
 * Decisions over time as stacked bars (allow, challenge, deny), drawn on the server: no script, no
 * library. Each bar says its slice and counts on hover (`<title>`), and the whole has a summary
 * for a screen reader.
 */
export function DecisionsOverTime(props: {
  slices: readonly TimeSlice[];
  fromMs: number;
  toMs: number;
  bucketMs: number;
}) {
  const { slices, fromMs, toMs, bucketMs } = props;
  const count = Math.max(1, Math.ceil((toMs - fromMs) / bucketMs));
  const bySlice = new Map(slices.map((s) => [s.atMs, s]));
  const most = Math.max(1, ...slices.map((s) => s.total));
  const [width, height, gap] = [720, 96, 1];
  const barW = width / count;
  const total = slices.reduce((n, s) => n + s.total, 0);
  const bars = Array.from({ length: count }, (_, i) => {
    const atMs = fromMs + i * bucketMs;
    const s = bySlice.get(atMs);
    if (s === undefined) return null;
    let y = height;
    const parts = (['allow', 'challenge', 'deny'] as const).map((v) => {
      const h = (s[v] / most) * height;
      y -= h;
      return h > 0 ? <rect class={v} x={i * barW} y={y} width={Math.max(1, barW - gap)} height={h} /> : null;
    });
    return (
      <g>
        <title>{`${new Date(atMs).toISOString().slice(0, 16).replace('T', ' ')} UTC: ${s.allow} allow, ${s.challenge} challenge, ${s.deny} deny`}</title>
        {parts}
      </g>
    );
  });
  return (
    <svg
      class="timeline"
      role="img"
      aria-label={`${total} decisions over the range, in slices of ${bucketMs / MINUTE_MS} minutes; the busiest slice had ${most === 1 && total === 0 ? 0 : most}`}
      viewBox={`0 0 ${width} ${height}`}
      width={width}
      height={height}
    >
      {bars}
    </svg>
  );
}

/** A text filter: blank means none (it goes to the database: what it cannot hold is refused). */
const text = storableLine()
  .trim()
  .max(200, 'must be at most 200 characters')
  .optional()
  .transform((v) => (v === '' ? undefined : v));
const choice = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.union([z.literal('').transform(() => undefined), z.enum(values)]).optional();
/** A `datetime-local` value, read as UTC. */
const utcTime = text.refine((v) => v === undefined || Number.isFinite(Date.parse(`${v}Z`)), {
  message: 'must be a date and time (YYYY-MM-DDTHH:MM, UTC)',
});

export const decisionsQuerySchema = z.strictObject({
  range: z.enum(['1h', '24h', '7d', '30d', 'all']).default('24h'),
  from: utcTime,
  to: utcTime,
  verdict: choice(['allow', 'challenge', 'deny']),
  rule: text,
  accountId: text,
  userId: text,
  ip: text,
  unitId: text,
  degraded: choice(['yes', 'no']),
  label: choice(['fraud', 'legit', 'none']),
  shadow: choice(['disagrees', 'agrees']),
  cursor: text,
  limit: z.coerce.number().int().min(1).max(200).default(50),
  /** The live tail's: only decisions at or after (epoch milliseconds). */
  sinceMs: z.coerce.number().int().min(0).optional(),
});
export type DecisionsQuery = z.output<typeof decisionsQuerySchema>;

/** The store's filter of a page query at `nowMs`. */
export function decisionFilterOf(q: DecisionsQuery, nowMs: number): DecisionFilter {
  const rangeMs = RANGES[q.range];
  const fromMs = q.from !== undefined ? Date.parse(`${q.from}Z`) : rangeMs > 0 ? nowMs - rangeMs : undefined;
  const since = q.sinceMs !== undefined ? Math.max(q.sinceMs, fromMs ?? 0) : fromMs;
  return {
    ...(since !== undefined && { fromMs: since }),
    ...(q.to !== undefined && { toMs: Date.parse(`${q.to}Z`) }),
    ...(q.verdict !== undefined && { verdict: q.verdict }),
    ...(q.rule !== undefined && { rule: q.rule }),
    ...(q.accountId !== undefined && { accountId: q.accountId }),
    ...(q.userId !== undefined && { userId: q.userId }),
    ...(q.ip !== undefined && { ip: q.ip }),
    ...(q.unitId !== undefined && { unitId: q.unitId }),
    ...(q.degraded !== undefined && { degraded: q.degraded === 'yes' }),
    ...(q.label !== undefined && { label: q.label }),
    ...(q.shadow !== undefined && { shadowDisagrees: q.shadow === 'disagrees' }),
    ...(q.cursor !== undefined && { cursor: q.cursor }),
    limit: q.limit,
  };
}

/** The query string of `q` with `change` applied (blank values left out). */
export function decisionsLink(
  q: Partial<DecisionsQuery>,
  change: Partial<Record<string, string>> = {},
): string {
  const params = new URLSearchParams();
  const merged: Record<string, unknown> = { ...q, ...change };
  for (const [k, v] of Object.entries(merged)) {
    if (v === undefined || v === '' || k === 'sinceMs') continue;
    if (k === 'limit' && v === 50) continue;
    params.set(k, String(v));
  }
  const s = params.toString();
  return s === '' ? '/console/decisions' : `/console/decisions?${s}`;
}

/** The export of the page's filter (every page of it, not the cursor's one). */
function exportLink(q: DecisionsQuery, format: 'csv' | 'ndjson'): string {
  return decisionsLink(q, { cursor: '', limit: '' }).replace(
    '/console/decisions',
    `/console/decisions.${format}`,
  );
}

function Field(props: {
  name: keyof DecisionsQuery;
  label: string;
  value: string | undefined;
  hint?: string;
}) {
  const id = `f-${props.name}`;
  return (
    <div>
      <label for={id}>{props.label}</label>
      <input type="text" id={id} name={props.name} value={props.value ?? ''} placeholder={props.hint} />
    </div>
  );
}

function Select(props: {
  name: keyof DecisionsQuery;
  label: string;
  value: string | undefined;
  options: readonly (readonly [string, string])[];
}) {
  const id = `f-${props.name}`;
  return (
    <div>
      <label for={id}>{props.label}</label>
      <select id={id} name={props.name}>
        {props.options.map(([value, text]) => (
          <option value={value} selected={(props.value ?? '') === value}>
            {text}
          </option>
        ))}
      </select>
    </div>
  );
}

function Filters(props: { q: DecisionsQuery }) {
  const q = props.q;
  const any = [['', 'Any']] as const;
  return (
    <form class="filters card" method="get" action="/console/decisions" aria-label="Filter decisions">
      <Select
        name="range"
        label="Time range"
        value={q.range}
        options={[
          ['1h', 'Last hour'],
          ['24h', 'Last 24 hours'],
          ['7d', 'Last 7 days'],
          ['30d', 'Last 30 days'],
          ['all', 'All time'],
        ]}
      />
      <div>
        <label for="f-from">From (UTC)</label>
        <input type="datetime-local" id="f-from" name="from" value={q.from ?? ''} />
      </div>
      <div>
        <label for="f-to">Until (UTC)</label>
        <input type="datetime-local" id="f-to" name="to" value={q.to ?? ''} />
      </div>
      <Select
        name="verdict"
        label="Verdict"
        value={q.verdict}
        options={[...any, ['allow', 'allow'], ['challenge', 'challenge'], ['deny', 'deny']]}
      />
      <Field name="rule" label="Rule matched" value={q.rule} hint="rule id" />
      <Field name="accountId" label="Account" value={q.accountId} />
      <Field name="userId" label="User id" value={q.userId} />
      <Field name="ip" label="IP address" value={q.ip} />
      <Field name="unitId" label="Unit" value={q.unitId} />
      <Select
        name="degraded"
        label="Degraded"
        value={q.degraded}
        options={[...any, ['yes', 'Degraded'], ['no', 'Not degraded']]}
      />
      <Select
        name="label"
        label="Label"
        value={q.label}
        options={[...any, ['fraud', 'fraud'], ['legit', 'legit'], ['none', 'Unlabelled']]}
      />
      <Select
        name="shadow"
        label="Shadow policy"
        value={q.shadow}
        options={[...any, ['disagrees', 'Disagrees'], ['agrees', 'Agrees']]}
      />
      <div class="actions">
        <button type="submit">Apply filters</button>
        <a class="button secondary" href="/console/decisions">
          Reset
        </a>
      </div>
    </form>
  );
}

function Counts(props: { counts: VerdictCounts }) {
  const c = props.counts;
  return (
    <section class="counts" aria-label="Decisions by verdict over the range">
      {(['allow', 'challenge', 'deny'] as const).map((v) => (
        <div class="count">
          <strong>{c[v]}</strong>
          <VerdictBadge verdict={v} />
        </div>
      ))}
      <div class="count">
        <strong>{c.total}</strong>
        <span class="muted">in all</span>
      </div>
    </section>
  );
}

/** One decision's row (console.js builds the same cells for the live tail). */
export function DecisionRow(props: { d: DecisionSummary }) {
  const d = props.d;
  return (
    <tr data-at={d.at} data-id={d.decisionId}>
      <td>
        <a href={`/console/decisions/${encodeURIComponent(d.decisionId)}`}>
          <Time at={d.at} />
        </a>
      </td>
      <td>
        <VerdictBadge verdict={d.verdict} />
      </td>
      <td class="num">{d.score}</td>
      <td>{d.accountId ?? ''}</td>
      <td class="mono">{d.userId ?? ''}</td>
      <td class="mono">{d.ip ?? ''}</td>
      <td>{d.rules.join(', ')}</td>
      <td>{d.label ?? ''}</td>
      <td>{d.shadowVerdict ?? ''}</td>
      <td>{d.degraded ? 'degraded' : ''}</td>
    </tr>
  );
}

/** The filters a query sets, as a reader names them ("verdict deny, rule geo_far"), range aside. */
export function filtersNamed(q: DecisionsQuery): string[] {
  const named: string[] = [];
  for (const key of FILTER_KEYS) {
    const value = q[key];
    if (value !== undefined) named.push(`${key} ${String(value)}`);
  }
  return named;
}
const FILTER_KEYS = [
  'from',
  'to',
  'verdict',
  'rule',
  'accountId',
  'userId',
  'ip',
  'unitId',
  'degraded',
  'label',
  'shadow',
] as const satisfies readonly (keyof DecisionsQuery)[];

/**
 * What an empty page says: which filters matched nothing, over which range, and a rule filter
 * that names no rule of the active policy (a typo, or a rule an earlier version had).
 */
function NothingMatched(props: { q: DecisionsQuery; ruleIds: readonly string[] | undefined }) {
  const { q, ruleIds } = props;
  const named = filtersNamed(q);
  const unknownRule = q.rule !== undefined && ruleIds !== undefined && !ruleIds.includes(q.rule);
  return (
    <div class="notice" role="status">
      <p>
        No decision in {q.range === 'all' ? 'all time' : `the last ${q.range}`}
        {named.length > 0 ? ` matches ${named.join(', ')}.` : '.'}
      </p>
      {unknownRule && (
        <p>
          The active policy has no rule <code>{q.rule}</code>
          {ruleIds.length > 0 ? `; its rules are ${ruleIds.join(', ')}.` : '.'} A rule of an earlier version
          still matches its old decisions.
        </p>
      )}
    </div>
  );
}

export function DecisionsView(props: {
  q: DecisionsQuery;
  page: DecisionPage;
  counts: VerdictCounts;
  /** The decisions-over-time chart's slices and frame. */
  chart?: { slices: readonly TimeSlice[]; fromMs: number; toMs: number; bucketMs: number } | undefined;
  /** The active policy's rule ids, for the hint on an unknown rule filter. */
  ruleIds?: readonly string[] | undefined;
}) {
  const { q, page } = props;
  return (
    <>
      <h1>Decisions</h1>
      <Filters q={q} />
      <Counts counts={props.counts} />
      {props.chart !== undefined && <DecisionsOverTime {...props.chart} />}
      <p class="export">
        Export these decisions:{' '}
        <a href={exportLink(q, 'csv')} download>
          CSV
        </a>{' '}
        ·{' '}
        <a href={exportLink(q, 'ndjson')} download>
          NDJSON
        </a>
      </p>
      <div class="live">
        <button type="button" id="live-toggle" class="secondary" aria-pressed="false" hidden>
          Follow new decisions
        </button>
        <span id="live-status" class="muted" aria-live="polite" />
      </div>
      <table
        id="decisions"
        data-tail-url={decisionsLink(q, { cursor: '' }).replace(
          '/console/decisions',
          '/console/decisions.json',
        )}
      >
        <caption class="muted">Newest first{q.cursor !== undefined ? ' (an older page)' : ''}</caption>
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Verdict</th>
            <th scope="col" class="num">
              Score
            </th>
            <th scope="col">Account</th>
            <th scope="col">User</th>
            <th scope="col">IP</th>
            <th scope="col">Rules matched</th>
            <th scope="col">Label</th>
            <th scope="col">Shadow</th>
            <th scope="col">Degraded</th>
          </tr>
        </thead>
        <tbody>
          {page.decisions.map((d) => (
            <DecisionRow d={d} />
          ))}
        </tbody>
      </table>
      {page.decisions.length === 0 && <NothingMatched q={q} ruleIds={props.ruleIds} />}
      <nav class="pager" aria-label="Pages">
        {q.cursor !== undefined && <a href={decisionsLink(q, { cursor: '' })}>Newest</a>}
        {page.nextCursor !== undefined && (
          <a href={decisionsLink(q, { cursor: page.nextCursor })}>Older decisions</a>
        )}
      </nav>
    </>
  );
}
