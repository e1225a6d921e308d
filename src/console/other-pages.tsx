import type { DecisionStoreStatus } from '../decision-store/decision-query.ts';
import type { AuditEntry } from '../operators/audit-trail.ts';
import type { OutboxStats } from '../outbox/outbox-store.ts';
import type { OutboxEntryView } from '../outbox/outbox-view.ts';
import { leafFacts, shortText } from '../policy/inputs/input-row.ts';
import { CsrfField, Notice, Time } from './console-layout.tsx';
import type { MetricsSummary } from './console-metrics.ts';

/** The Actions, Health, Audit and sign-in pages (small ones, side by side). */

export const ACTION_TABS = ['pending', 'dead', 'delivered', 'dropped'] as const;

function ActionButtons(props: { e: OutboxEntryView; csrf: string }) {
  const { e, csrf } = props;
  const canRetry = e.status === 'dead' || e.status === 'dropped';
  const canDrop = e.status === 'pending' || e.status === 'dead';
  return (
    <>
      {canRetry && (
        <form method="post" action="/console/actions/retry" class="inline-form">
          <CsrfField token={csrf} />
          <input type="hidden" name="id" value={e.id} />
          <button type="submit" aria-label={`Retry ${e.id}`}>
            Retry
          </button>
        </form>
      )}{' '}
      {canDrop && (
        <form method="post" action="/console/actions/drop" class="inline-form">
          <CsrfField token={csrf} />
          <input type="hidden" name="id" value={e.id} />
          <button type="submit" class="danger" aria-label={`Drop ${e.id}`}>
            Drop
          </button>
        </form>
      )}
    </>
  );
}

export function ActionsView(props: {
  status: (typeof ACTION_TABS)[number] | undefined;
  entries: readonly OutboxEntryView[];
  stats: OutboxStats;
  csrf: string;
  canChange: boolean;
  notice?: string | undefined;
}) {
  const { stats } = props;
  return (
    <>
      <h1>Actions</h1>
      {props.notice !== undefined && <Notice kind="ok">{props.notice}</Notice>}
      <section class="counts" aria-label="The outbox">
        <div class="count">
          <strong>{stats.pending}</strong>pending
        </div>
        <div class="count">
          <strong>{stats.dead}</strong>dead-lettered
        </div>
        <div class="count">
          <strong>{(stats.oldestPendingAgeMs / 1000).toFixed(0)} s</strong>oldest pending
        </div>
      </section>
      <nav aria-label="By state">
        <ul class="counts">
          <li>
            <a href="/console/actions" aria-current={props.status === undefined ? 'page' : undefined}>
              All
            </a>
          </li>
          {ACTION_TABS.map((s) => (
            <li>
              <a href={`/console/actions?status=${s}`} aria-current={props.status === s ? 'page' : undefined}>
                {s}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      {!props.canChange && <p class="muted">Retrying and dropping take the admin role.</p>}
      <table>
        <thead>
          <tr>
            <th scope="col">Action</th>
            <th scope="col">Decision</th>
            <th scope="col">State</th>
            <th scope="col" class="num">
              Attempts
            </th>
            <th scope="col">Created</th>
            <th scope="col">Last error or reason</th>
            {props.canChange && <th scope="col">Change</th>}
          </tr>
        </thead>
        <tbody>
          {props.entries.map((e) => (
            <tr>
              <td>
                {e.type} <span class="mono muted">{e.target}</span>
              </td>
              <td>
                <a class="mono" href={`/console/decisions/${encodeURIComponent(e.decisionId)}`}>
                  {e.decisionId.slice(0, 8)}
                </a>
              </td>
              <td>
                <span
                  class={
                    e.status === 'dead' ? 'tag tag-bad' : e.status === 'delivered' ? 'tag tag-good' : 'tag'
                  }
                >
                  {e.status === 'pending' && e.attempts > 0 ? 'retrying' : e.status}
                </span>
                {e.nextAttemptAt !== undefined && (
                  <div class="muted">
                    next <Time at={e.nextAttemptAt} />
                  </div>
                )}
              </td>
              <td class="num">{e.attempts}</td>
              <td>
                <Time at={e.createdAt} />
              </td>
              <td>{[e.lastError, e.reason].filter((x) => x !== undefined).join('; ')}</td>
              {props.canChange && (
                <td>
                  <ActionButtons e={e} csrf={props.csrf} />
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {props.entries.length === 0 && <p class="muted">No action in this state.</p>}
    </>
  );
}

/** A value's leaves as a definition list (`path`, value): a token's state, a breaker. */
function LeafFacts(props: { value: unknown }) {
  const rows = typeof props.value === 'object' && props.value !== null ? leafFacts(props.value, '', 40) : [];
  if (rows.length === 0) return <p class="mono">{shortText(props.value)}</p>;
  return (
    <dl class="facts">
      {rows.map(([k, v]) => (
        <>
          <dt>{k}</dt>
          <dd class="mono">{v}</dd>
        </>
      ))}
    </dl>
  );
}

/**
 * Each component's health (the outbox, the lists, the decision store, ...) as rows of one table:
 * its name once, then each fact it reports, nested ones by their path.
 */
function ComponentsTable(props: { components: Record<string, unknown> }) {
  const entries = Object.entries(props.components).filter(([k]) => k !== 'alarms');
  return (
    <table id="components">
      <thead>
        <tr>
          <th scope="col">Component</th>
          <th scope="col">Fact</th>
          <th scope="col">Value</th>
        </tr>
      </thead>
      <tbody>
        {entries.flatMap(([name, value]) => {
          const facts: [string, string][] =
            typeof value === 'object' && value !== null ? leafFacts(value, '', 40) : [['', shortText(value)]];
          const rows = facts.length === 0 ? ([['', '—']] as [string, string][]) : facts;
          return rows.map(([fact, v], i) => (
            <tr>
              {i === 0 && (
                <th scope="rowgroup" rowspan={rows.length}>
                  {name}
                </th>
              )}
              <td class="mono">{fact}</td>
              <td class="mono">{v}</td>
            </tr>
          ));
        })}
      </tbody>
    </table>
  );
}

/** The outbox's counts, or that its database cannot be read. */
function OutboxCard(props: { outbox: OutboxStats | undefined }) {
  const { outbox } = props;
  return (
    <section class="card" aria-labelledby="h-outbox">
      <h2 id="h-outbox">Outbox</h2>
      {outbox === undefined ? (
        <Notice kind="error">The outbox cannot be read: its database does not answer.</Notice>
      ) : (
        <table id="outbox">
          <tbody>
            <tr>
              <th scope="row">Pending</th>
              <td class="num">{outbox.pending}</td>
            </tr>
            <tr>
              <th scope="row">Oldest pending</th>
              <td class="num">{(outbox.oldestPendingAgeMs / 1000).toFixed(1)} s</td>
            </tr>
            <tr>
              <th scope="row">Dead (given up, see Actions)</th>
              <td class="num">
                <a href="/console/actions?status=dead">{outbox.dead}</a>
              </td>
            </tr>
          </tbody>
        </table>
      )}
    </section>
  );
}

export function HealthView(props: {
  readiness: { ready: boolean; checks: Record<string, boolean> };
  health: Record<string, unknown>;
  store: DecisionStoreStatus | undefined;
  /** The outbox's counts; undefined when its database cannot be read. */
  outbox: OutboxStats | undefined;
  metrics: MetricsSummary | undefined;
}) {
  const { readiness, health, store, outbox, metrics } = props;
  const vendor = (health.vendor ?? {}) as { token?: unknown; circuits?: unknown[] };
  const { vendor: _v, ...rest } = health;
  const total = metrics === undefined ? 0 : metrics.decisions + metrics.shed;
  const alarms = Array.isArray(health.alarms) ? (health.alarms as string[]) : [];
  return (
    <>
      <h1>Health</h1>
      {alarms.map((a) => (
        <Notice kind="error">{a}</Notice>
      ))}
      <div class="grid-2">
        <section class="card" aria-labelledby="h-ready">
          <h2 id="h-ready">Readiness: {readiness.ready ? 'ready' : 'not ready'}</h2>
          <ul>
            {Object.entries(readiness.checks).map(([k, ok]) => (
              <li>
                <span class={ok ? 'tag tag-good' : 'tag tag-bad'}>{ok ? 'ok' : 'failing'}</span> {k}
              </li>
            ))}
          </ul>
        </section>
        <section class="card" aria-labelledby="h-store">
          <h2 id="h-store">Decision store</h2>
          {store === undefined ? (
            <p class="muted">Not running in this riskgate.</p>
          ) : (
            <>
              {!store.writing && <Notice kind="error">The store is behind: writes are failing.</Notice>}
              <dl class="facts">
                <dt>engine</dt>
                <dd>{store.engine}</dd>
                <dt>writing</dt>
                <dd>{store.writing ? 'yes' : 'no'}</dd>
                <dt>lag</dt>
                <dd>{store.lagMs} ms</dd>
                <dt>pending</dt>
                <dd>{store.pending}</dd>
                <dt>written</dt>
                <dd>{store.written}</dd>
                <dt>dropped</dt>
                <dd>{store.dropped}</dd>
                <dt>set aside</dt>
                <dd>
                  {store.rejected}
                  {store.rejected > 0 && ' (refused by the database; kept in the decision_reject table)'}
                </dd>
                {store.lastError !== undefined && (
                  <>
                    <dt>last error</dt>
                    <dd>{store.lastError}</dd>
                  </>
                )}
              </dl>
            </>
          )}
        </section>
      </div>
      <OutboxCard outbox={outbox} />
      <section class="card" aria-labelledby="h-vendor">
        <h2 id="h-vendor">Vendor</h2>
        <p>
          Circuit breakers not closed:{' '}
          {(vendor.circuits ?? []).length === 0 ? (
            'none (every route closed)'
          ) : (
            <LeafFacts value={vendor.circuits} />
          )}
        </p>
        <h3>Token</h3>
        <LeafFacts value={vendor.token ?? 'not configured'} />
        {metrics !== undefined && (
          <table>
            <caption class="muted">Calls since this process started</caption>
            <thead>
              <tr>
                <th scope="col">Upstream</th>
                <th scope="col">Operation</th>
                <th scope="col" class="num">
                  Calls
                </th>
                <th scope="col" class="num">
                  Mean latency
                </th>
                <th scope="col" class="num">
                  Errors
                </th>
              </tr>
            </thead>
            <tbody>
              {metrics.vendor.map((r) => (
                <tr>
                  <td>{r.upstream}</td>
                  <td>{r.operation}</td>
                  <td class="num">{r.calls}</td>
                  <td class="num">{r.meanMs.toFixed(1)} ms</td>
                  <td class="num">
                    {r.errors} ({r.calls === 0 ? '0' : ((r.errors / r.calls) * 100).toFixed(1)}%)
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      {metrics !== undefined && (
        <section class="card" aria-labelledby="h-shed">
          <h2 id="h-shed">Overload</h2>
          <p>
            {metrics.shed} of {total} decisions shed since start (
            {total === 0 ? '0' : ((metrics.shed / total) * 100).toFixed(2)}%).
          </p>
        </section>
      )}
      <section class="card" aria-labelledby="h-components">
        <h2 id="h-components">Components</h2>
        <ComponentsTable components={rest} />
      </section>
    </>
  );
}

/**
 * What became of an audited change: done, failed or refused with its code, or "no outcome
 * recorded" (the intent alone: in progress, or the process stopped before it could say).
 */
function AuditOutcomeCell(props: { outcome: AuditEntry['outcome'] }) {
  const o = props.outcome;
  if (o === undefined || o.status === 'unknown') {
    return <span class="tag outcome-unknown">no outcome recorded</span>;
  }
  return (
    <>
      <span class={`tag outcome-${o.status}`}>{o.status}</span>
      {o.code !== undefined && <span class="mono"> {o.code}</span>}
    </>
  );
}

/**
 * The console page of what an audit entry changed: the decision labelled or whose action was
 * retried (an action id starts with its decision's id), the list, the lock-out, the review case
 * (or the queue). Sign-ins and policy reloads have no page.
 */
export function auditTargetHref(action: string, target: string): string | undefined {
  const [thing] = action.split('.');
  const head = target.split(':')[0] ?? target;
  switch (thing) {
    case 'decision':
    case 'action':
      return `/console/decisions/${encodeURIComponent(head)}`;
    case 'list':
      return `/console/lists/${encodeURIComponent(head)}`;
    case 'lockout':
      return `/console/lockouts/${encodeURIComponent(target)}`;
    case 'review':
      // A case opened by hand names its decision; a claim-next the queue; the rest their case.
      if (action === 'review.open') return `/console/decisions/${encodeURIComponent(head)}`;
      return target === 'review-queue' ? '/console/review' : `/console/review/${encodeURIComponent(target)}`;
    default:
      return undefined;
  }
}

function AuditTarget(props: { action: string; target: string }) {
  const href = auditTargetHref(props.action, props.target);
  return href === undefined ? props.target : <a href={href}>{props.target}</a>;
}

export function AuditView(props: {
  entries: readonly AuditEntry[];
  nextCursor?: string | undefined;
  actor?: string;
}) {
  return (
    <>
      <h1>Audit trail</h1>
      <form method="get" action="/console/audit" class="filters card" aria-label="Filter the audit trail">
        <div>
          <label for="a-actor">Operator</label>
          <input type="text" id="a-actor" name="actor" value={props.actor ?? ''} />
        </div>
        <div class="actions">
          <button type="submit">Filter</button>
        </div>
      </form>
      <table>
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Who</th>
            <th scope="col">What</th>
            <th scope="col">Target</th>
            <th scope="col">Outcome</th>
            <th scope="col">From</th>
            <th scope="col">Details</th>
          </tr>
        </thead>
        <tbody>
          {props.entries.map((e) => (
            <tr>
              <td>
                <Time at={e.at} />
              </td>
              <td>
                {e.actor} <span class="tag">{e.role}</span>
              </td>
              <td>{e.action}</td>
              <td class="mono">
                <AuditTarget action={e.action} target={e.target} />
              </td>
              <td>
                <AuditOutcomeCell outcome={e.outcome} />
              </td>
              <td class="mono">{e.from}</td>
              <td class="mono">{e.detail === undefined ? '' : JSON.stringify(e.detail)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.entries.length === 0 && (
        <p class="muted">
          {props.actor !== undefined ? `No entry by operator “${props.actor}”.` : 'Nothing recorded yet.'}
        </p>
      )}
      {props.nextCursor !== undefined && (
        <nav class="pager" aria-label="Pages">
          <a
            href={`/console/audit?${new URLSearchParams({ ...(props.actor ? { actor: props.actor } : {}), cursor: props.nextCursor })}`}
          >
            Older entries
          </a>
        </nav>
      )}
    </>
  );
}

export function SignInView(props: {
  csrf: string;
  next: string;
  error?: string | undefined;
  noKeys: boolean;
}) {
  return (
    <section class="sign-in card" aria-labelledby="h-sign-in">
      <h1 id="h-sign-in">Sign in</h1>
      {props.noKeys && (
        <Notice kind="error">No operator key is configured: set RISKGATE_OPS_KEYS to use the console.</Notice>
      )}
      {props.error !== undefined && <Notice kind="error">{props.error}</Notice>}
      <form method="post" action="/console/sign-in">
        <CsrfField token={props.csrf} />
        <input type="hidden" name="next" value={props.next} />
        <label for="operator-key">Operator key</label>
        <input
          type="password"
          id="operator-key"
          name="key"
          autocomplete="current-password"
          required
          autofocus
          aria-describedby="key-hint"
        />
        <p id="key-hint" class="muted">
          One of RISKGATE_OPS_KEYS (with <code>npm start</code>: the development operator key the banner
          prints). It is checked once; the session cookie never holds it.
        </p>
        <button type="submit">Sign in</button>
      </form>
    </section>
  );
}

export function ErrorView(props: { title: string; detail: string; status: number }) {
  return (
    <>
      <h1>{props.title}</h1>
      <Notice kind="error">{props.detail}</Notice>
      <p class="muted">HTTP {props.status}.</p>
      <p>
        <a href="/console/decisions">Back to the decisions</a>
      </p>
    </>
  );
}
