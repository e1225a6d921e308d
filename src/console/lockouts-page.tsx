import type { Hono } from 'hono';
import type { z } from 'zod';
import { ACTIVE_STATUSES, LOCKOUT_STATUSES, type LockoutView } from '../lockouts/lockout-record.ts';
import { lockoutIdOf, lockoutsQuerySchema, unlockRequestSchema } from '../lockouts/lockout-routes.ts';
import { roleAllows } from '../operators/operator.ts';
import { toProblem } from '../problem/problem-details.ts';
import { ConsoleFormCard, Notice, ReasonField, Time, UNLOCK_REASON } from './console-layout.tsx';
import type { ConsoleContext, ConsoleEnv, ConsoleKit } from './console-routes.tsx';

/**
 * The Lock-outs page: every lock-out riskgate drove or withheld (filtered by status and user), one
 * lock-out's record, and (for an admin) its Unlock form. The unlock goes through the same
 * `LockoutOperations` as `POST /lockouts/{id}/unlock` (src/lockouts/lockout-routes.ts): audited
 * first, then an Admin API `status: enabled` through the outbox.
 */

type LockoutQuery = z.output<typeof lockoutsQuerySchema>;

const MAX_FORM_BYTES = 16 * 1024;

function StatusTag(props: { l: LockoutView }) {
  const { status } = props.l;
  const kind =
    status === 'locked' || status === 'queued'
      ? 'tag tag-bad'
      : status === 'unlocked' || status === 'expired'
        ? 'tag tag-good'
        : 'tag';
  return <span class={kind}>{status}</span>;
}

/** Who ended a lock-out, when and why: empty while it holds. */
function Ended(props: { l: LockoutView }) {
  const { l } = props;
  if (l.endedAt === undefined && l.endedBy === undefined) return <>{l.reason ?? '—'}</>;
  return (
    <>
      {l.endedBy === 'schedule' ? 'ran out' : `by ${l.endedBy ?? '?'}`}
      {l.endedAt !== undefined && (
        <>
          , <Time at={l.endedAt} />
        </>
      )}
      {l.reason !== undefined && `: ${l.reason}`}
      {l.unlockStatus !== undefined && <div class="muted">unlock {l.unlockStatus}</div>}
    </>
  );
}

function Filters(props: { q: LockoutQuery }) {
  return (
    <form method="get" action="/console/lockouts" class="filters card" aria-label="Filter the lock-outs">
      <div>
        <label for="lo-status">Status</label>
        <select id="lo-status" name="status">
          <option value="">any</option>
          {LOCKOUT_STATUSES.map((s) => (
            <option value={s} selected={props.q.status === s}>
              {s}
            </option>
          ))}
        </select>
      </div>
      <div>
        <label for="lo-user">User id</label>
        <input type="text" id="lo-user" name="userId" value={props.q.userId ?? ''} />
      </div>
      <div>
        <label for="lo-account">Account</label>
        <input type="text" id="lo-account" name="accountId" value={props.q.accountId ?? ''} />
      </div>
      <div class="actions">
        <button type="submit">Apply filters</button>
      </div>
    </form>
  );
}

export function LockoutsView(props: {
  q: LockoutQuery;
  page: { lockouts: LockoutView[]; nextCursor?: string };
}) {
  const { q, page } = props;
  const more = new URLSearchParams({
    ...(q.status !== undefined && { status: q.status }),
    ...(q.userId !== undefined && { userId: q.userId }),
    ...(q.accountId !== undefined && { accountId: q.accountId }),
    ...(page.nextCursor !== undefined && { cursor: page.nextCursor }),
  });
  return (
    <>
      <h1>Lock-outs</h1>
      <Filters q={q} />
      <table id="lockouts">
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">User</th>
            <th scope="col">Decision</th>
            <th scope="col">Rule</th>
            <th scope="col">Status</th>
            <th scope="col">Until</th>
            <th scope="col">Ended</th>
          </tr>
        </thead>
        <tbody>
          {page.lockouts.map((l) => (
            <tr>
              <td>
                <a
                  href={`/console/lockouts/${encodeURIComponent(l.id)}`}
                  aria-label={`Lock-out of ${l.userId}`}
                >
                  <Time at={l.createdAt} />
                </a>
              </td>
              <td>
                <span class="mono">{l.userId}</span>
                {l.accountId !== undefined && <div class="muted">{l.accountId}</div>}
              </td>
              <td>
                <a class="mono" href={`/console/decisions/${encodeURIComponent(l.decisionId)}`}>
                  {l.decisionId.slice(0, 8)}
                </a>
              </td>
              <td>{l.rule ?? ''}</td>
              <td>
                <StatusTag l={l} />
              </td>
              <td>
                {l.until === undefined ? 'permanent' : <Time at={l.until} />}
                {l.escalated && <div class="muted">escalated</div>}
              </td>
              <td>
                <Ended l={l} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {page.lockouts.length === 0 && <p class="muted">No lock-out matches.</p>}
      {page.nextCursor !== undefined && (
        <nav class="pager" aria-label="Pages">
          <a href={`/console/lockouts?${more}`}>Older lock-outs</a>
        </nav>
      )}
    </>
  );
}

export function LockoutRecordView(props: {
  l: LockoutView;
  csrf: string;
  canUnlock: boolean;
  notice?: string | undefined;
  error?: string | undefined;
}) {
  const { l } = props;
  const active = ACTIVE_STATUSES.includes(l.status);
  return (
    <>
      <p>
        <a href="/console/lockouts">All lock-outs</a>
      </p>
      <h1>
        Lock-out of <span class="mono">{l.userId}</span> <StatusTag l={l} />
      </h1>
      {props.notice !== undefined && <Notice kind="ok">{props.notice}</Notice>}
      {props.error !== undefined && <Notice kind="error">{props.error}</Notice>}
      <section class="card" aria-labelledby="h-record">
        <h2 id="h-record">Record</h2>
        <dl class="facts">
          <dt>user</dt>
          <dd class="mono">{l.userId}</dd>
          {l.accountId !== undefined && (
            <>
              <dt>account</dt>
              <dd>{l.accountId}</dd>
            </>
          )}
          <dt>decision</dt>
          <dd>
            <a class="mono" href={`/console/decisions/${encodeURIComponent(l.decisionId)}`}>
              {l.decisionId}
            </a>
          </dd>
          <dt>rule</dt>
          <dd>{l.rule ?? '—'}</dd>
          <dt>when</dt>
          <dd>
            <Time at={l.createdAt} />
          </dd>
          <dt>status</dt>
          <dd>{l.status}</dd>
          <dt>until</dt>
          <dd>
            {l.until === undefined ? 'permanent' : <Time at={l.until} />}
            {l.escalated ? ' (escalated to permanent)' : ''}
          </dd>
          <dt>ended</dt>
          <dd>
            <Ended l={l} />
          </dd>
        </dl>
      </section>
      {active && props.canUnlock && (
        <ConsoleFormCard
          id="h-unlock"
          title="Unlock"
          action={`/console/lockouts/${encodeURIComponent(l.id)}/unlock`}
          csrf={props.csrf}
          submit={<>Unlock {l.userId}</>}
          danger
        >
          <ReasonField id="u-reason" label={UNLOCK_REASON} />
        </ConsoleFormCard>
      )}
      {active && !props.canUnlock && <p class="muted">Unlocking takes the admin role.</p>}
    </>
  );
}

/** The filters as the query of `GET /lockouts` (an empty field is no filter; nothing else is read). */
/** The query's keys a console form sends (the API's, less `limit`); blank fields left out. */
const FILTERS = new Set(Object.keys(lockoutsQuerySchema.shape).filter((k) => k !== 'limit'));

function lockoutsQueryOf(query: Record<string, string>) {
  const given = Object.entries(query).filter(([k, v]) => v !== '' && FILTERS.has(k));
  return lockoutsQuerySchema.safeParse(Object.fromEntries(given));
}

/** The Lock-outs pages and the unlock (admin), when the lock-out records run in this riskgate. */
export function mountLockouts(ui: Hono<ConsoleEnv>, kit: ConsoleKit): void {
  const lockouts = kit.deps.lockouts;
  const absent = (c: ConsoleContext) =>
    kit.fail(c, 503, 'Lock-outs', 'The lock-out records are not running in this riskgate.');
  const recordPage = async (c: ConsoleContext, id: string, o: { notice?: string; error?: string } = {}) => {
    const l = await lockouts!.get(id);
    const s = c.get('session');
    return kit.page(c, {
      title: `Lock-out of ${l.userId}`,
      current: 'lockouts',
      status: o.error === undefined ? 200 : 400,
      body: (
        <LockoutRecordView
          l={l}
          csrf={s.csrf}
          canUnlock={roleAllows(s.operator.role, 'admin')}
          notice={o.notice}
          error={o.error}
        />
      ),
    });
  };
  ui.get('/lockouts', async (c) => {
    if (lockouts === undefined) return absent(c);
    const q = lockoutsQueryOf(c.req.query());
    if (!q.success) throw kit.edge.inputError(q.error, 'The filters');
    const page = await lockouts.list(q.data);
    return kit.page(c, {
      title: 'Lock-outs',
      current: 'lockouts',
      body: <LockoutsView q={q.data} page={page} />,
    });
  });
  ui.get('/lockouts/:id', async (c) => {
    if (lockouts === undefined) return absent(c);
    const notice =
      c.req.query('unlocked') === undefined
        ? undefined
        : 'Unlocked: the Admin API unlock is queued in the outbox (retried until made; see its status below).';
    return recordPage(c, lockoutIdOf(c, kit.edge), { notice });
  });
  ui.post(
    '/lockouts/:id/unlock',
    kit.edge.limitBody(MAX_FORM_BYTES),
    kit.role('admin', 'Unlocking a user'),
    kit.form,
    async (c) => {
      if (lockouts === undefined) return absent(c);
      const id = lockoutIdOf(c, kit.edge);
      const form = unlockRequestSchema.safeParse({ reason: c.get('form').reason ?? '' });
      if (!form.success) {
        const problem = toProblem(kit.edge.inputError(form.error, 'The form'));
        return recordPage(c, id, { error: problem.detail });
      }
      await lockouts.unlock(c, kit.edge, id, form.data.reason);
      return c.redirect(`/console/lockouts/${encodeURIComponent(id)}?unlocked=1`, 303);
    },
  );
}
