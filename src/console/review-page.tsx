import type { Hono } from 'hono';
import { z } from 'zod';
import type { LockoutView } from '../lockouts/lockout-record.ts';
import { unlockRequestSchema } from '../lockouts/lockout-routes.ts';
import { type OperatorRole, roleAllows } from '../operators/operator.ts';
import { toProblem } from '../problem/problem-details.ts';
import {
  assignSchema,
  dispositionSchema,
  lockOutSchema,
  noteSchema,
  REVIEW_VIEWS,
  type ReviewCaseDetail,
  type ReviewCaseView,
  type ReviewList,
  type ReviewView,
} from '../review-queue/review-api.ts';
import type { ReviewOperations } from '../review-queue/review-operations.ts';
import { DISPOSITIONS } from '../review-queue/review-store.ts';
import {
  ConsoleCard,
  ConsoleForm,
  ConsoleFormCard,
  CsrfField,
  Notice,
  ReasonField,
  Time,
  UNLOCK_REASON,
  VerdictBadge,
} from './console-layout.tsx';
import type { ConsoleContext, ConsoleEnv, ConsoleKit } from './console-routes.tsx';

/**
 * The Review page (`/console/review`): the queue by view (open, claimed, mine, overdue, closed),
 * a claim-next button, and each case's page with its decision, notes, a disposition form (fraud
 * and legit become the decision's label), release and hand-over of the claim, and the case's
 * lock-out: an admin locks the user out when there is none, or unlocks the one in force. The
 * decision page's "Send to review" opens a case by hand. Every change goes through the same
 * `ReviewOperations` as `/review` (src/review-queue/review-operations.ts): audited first, then made.
 */

const MAX_FORM_BYTES = 16 * 1024;

const VIEW_LABEL: Record<ReviewView, string> = {
  open: 'Open',
  claimed: 'Claimed',
  mine: 'Mine',
  overdue: 'Overdue',
  closed: 'Closed',
};

const pageQuery = z.object({
  view: z.enum(REVIEW_VIEWS).default('open'),
  empty: z.literal('1').optional(),
});

function CaseRow(props: { r: ReviewCaseView }) {
  const { r } = props;
  return (
    <tr>
      <td>
        <a href={`/console/review/${r.id}`} class="mono">
          {r.id.slice(0, 8)}
        </a>
      </td>
      <td>
        <a href={`/console/decisions/${r.decisionId}`} class="mono">
          {r.decisionId.slice(0, 8)}
        </a>{' '}
        <VerdictBadge verdict={r.verdict} />
      </td>
      <td>
        {r.reason}: <bdi>{r.detail}</bdi>
      </td>
      <td>{r.status}</td>
      <td>
        <bdi>{r.assignee ?? '—'}</bdi>
      </td>
      <td>
        <Time at={r.dueAt} /> {r.overdue && <strong>overdue</strong>}
      </td>
    </tr>
  );
}

export function ReviewQueueView(props: {
  view: ReviewView;
  list: ReviewList;
  csrf: string;
  canClaim: boolean;
  notice?: string | undefined;
}) {
  const { list } = props;
  const q = list.queue;
  return (
    <>
      <h1>Review</h1>
      {props.notice !== undefined && <Notice kind="ok">{props.notice}</Notice>}
      <p>
        {q.open} open, {q.claimed} claimed, {q.overdue} overdue
        {q.oldestOpenAgeSeconds > 0 &&
          `; the oldest opened ${Math.round(q.oldestOpenAgeSeconds / 60)} min ago`}
        .
      </p>
      {props.canClaim && (
        <form method="post" action="/console/review/claim-next">
          <CsrfField token={props.csrf} />
          <button type="submit">Claim next case</button>
        </form>
      )}
      <nav aria-label="Review views">
        <ul class="counts">
          {REVIEW_VIEWS.map((v) => (
            <li>
              <a href={`/console/review?view=${v}`} aria-current={v === props.view ? 'page' : undefined}>
                {VIEW_LABEL[v]}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <section class="card">
        {list.items.length === 0 ? (
          <p class="muted">No {VIEW_LABEL[props.view].toLowerCase()} cases.</p>
        ) : (
          <div>
            <table>
              <thead>
                <tr>
                  <th>Case</th>
                  <th>Decision</th>
                  <th>Why</th>
                  <th>Status</th>
                  <th>Assignee</th>
                  <th>Due</th>
                </tr>
              </thead>
              <tbody>
                {list.items.map((r) => (
                  <CaseRow r={r} />
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </>
  );
}

function DispositionForm(props: { r: ReviewCaseDetail; csrf: string }) {
  return (
    <ConsoleFormCard
      id="h-disposition"
      title="Disposition"
      intro={
        <p class="muted">
          Fraud and legit become the decision's label (the Rules page counts it); unsure closes the case
          without one.
        </p>
      }
      action={`/console/review/${props.r.id}/disposition`}
      csrf={props.csrf}
      submit="Close the case"
    >
      <fieldset>
        <legend>The login was</legend>
        {DISPOSITIONS.map((d, i) => (
          <label>
            <input type="radio" name="disposition" value={d} required={i === 0} /> {d}
          </label>
        ))}
      </fieldset>
      <label for="d-note">Note (optional)</label>
      <textarea id="d-note" name="note" rows={2} maxlength={2000} />
    </ConsoleFormCard>
  );
}

/**
 * The case's lock-out: the one its decision drove or an operator made (status and record), an
 * admin's unlock while it is in force, an admin's lock-out when there is none.
 */
function LockoutCard(props: {
  r: ReviewCaseDetail;
  lockout: LockoutView | undefined;
  isAdmin: boolean;
  csrf: string;
}) {
  const { r, lockout } = props;
  const inForce = lockout !== undefined && (lockout.status === 'queued' || lockout.status === 'locked');
  if (lockout === undefined && (!props.isAdmin || r.userId === null || r.status === 'closed')) return null;
  return (
    <ConsoleCard id="h-case-lockout" title="Lock-out">
      {lockout === undefined ? (
        <ConsoleForm
          action={`/console/review/${r.id}/lockout`}
          csrf={props.csrf}
          submit="Lock the user out"
          danger
        >
          <p>
            Lock out <bdi>{r.userId}</bdi> (Admin API, through the outbox; permanent until unlocked).
          </p>
          <ReasonField id="c-lock-reason" label="Why lock out (kept on the record and in the audit trail)" />
        </ConsoleForm>
      ) : (
        <p>
          <bdi>{lockout.userId}</bdi>: lock-out{' '}
          <strong data-lockout-status={lockout.status}>{lockout.status}</strong> (
          <a href={`/console/lockouts/${encodeURIComponent(lockout.id)}`}>lock-out record</a>
          {lockout.rule !== undefined && (
            <>
              , by <bdi>{lockout.rule}</bdi>
            </>
          )}
          ).
        </p>
      )}
      {inForce && props.isAdmin && (
        <ConsoleForm
          action={`/console/review/${r.id}/unlock`}
          csrf={props.csrf}
          submit="Unlock the user"
          danger
        >
          <ReasonField id="c-reason" label={UNLOCK_REASON} />
        </ConsoleForm>
      )}
    </ConsoleCard>
  );
}

/** Release (its assignee, or an admin) and hand-over of a case not closed. */
function ClaimForms(props: { r: ReviewCaseDetail; mayRelease: boolean; csrf: string }) {
  const { r } = props;
  return (
    <ConsoleCard id="h-claim" title="Assignment">
      {props.mayRelease && (
        <form method="post" action={`/console/review/${r.id}/release`}>
          <CsrfField token={props.csrf} />
          <button type="submit">Release to the queue</button>
        </form>
      )}
      <ConsoleForm action={`/console/review/${r.id}/assign`} csrf={props.csrf} submit="Hand over">
        <label for="a-assignee">Hand to analyst (operator name)</label>
        <input type="text" id="a-assignee" name="assignee" required maxlength={64} />
      </ConsoleForm>
    </ConsoleCard>
  );
}

export function ReviewCasePage(props: {
  r: ReviewCaseDetail;
  csrf: string;
  canChange: boolean;
  /** The operator: their own claim they may release or hand over; an admin, anyone's. */
  operator: { name: string; isAdmin: boolean };
  /** The lock-outs run here: the case's lock-out (undefined: none yet) is shown. */
  lockouts: boolean;
  lockout?: LockoutView | undefined;
  notice?: string | undefined;
  error?: string | undefined;
}) {
  const { r } = props;
  return (
    <>
      <h1>
        Review case <span class="mono muted">{r.id}</span>
      </h1>
      {props.notice !== undefined && <Notice kind="ok">{props.notice}</Notice>}
      {props.error !== undefined && <Notice kind="error">{props.error}</Notice>}
      <section class="card" aria-labelledby="h-case">
        <h2 id="h-case">Case</h2>
        <dl class="facts">
          <dt>decision</dt>
          <dd>
            <a href={`/console/decisions/${r.decisionId}`} class="mono">
              {r.decisionId}
            </a>{' '}
            <VerdictBadge verdict={r.verdict} />
          </dd>
          <dt>why</dt>
          <dd>
            {r.reason}: <bdi>{r.detail}</bdi> (opened by <bdi>{r.openedBy}</bdi>, <Time at={r.openedAt} />)
          </dd>
          <dt>status</dt>
          <dd>
            {r.status}
            {r.disposition !== null && `: ${r.disposition}`}
            {r.closedBy !== null && (
              <>
                {' '}
                by <bdi>{r.closedBy}</bdi>
              </>
            )}
          </dd>
          <dt>assignee</dt>
          <dd>
            <bdi>{r.assignee ?? 'nobody yet'}</bdi>
          </dd>
          <dt>due</dt>
          <dd>
            <Time at={r.dueAt} /> {r.overdue && <strong>overdue</strong>}
          </dd>
        </dl>
      </section>
      {props.canChange && r.status !== 'closed' && <DispositionForm r={r} csrf={props.csrf} />}
      {props.canChange &&
        r.status !== 'closed' &&
        (r.assignee === null || r.assignee === props.operator.name || props.operator.isAdmin) && (
          <ClaimForms r={r} mayRelease={r.status === 'claimed'} csrf={props.csrf} />
        )}
      {props.lockouts && (
        <LockoutCard r={r} lockout={props.lockout} isAdmin={props.operator.isAdmin} csrf={props.csrf} />
      )}
      <ConsoleCard id="h-notes" title="Notes">
        {r.notes.length === 0 ? (
          <p class="muted">No notes yet.</p>
        ) : (
          <ul>
            {r.notes.map((n) => (
              <li>
                <bdi>{n.author}</bdi>, <Time at={n.at} />: <bdi class="wrap">{n.text}</bdi>
              </li>
            ))}
          </ul>
        )}
        {props.canChange && (
          <ConsoleForm action={`/console/review/${r.id}/notes`} csrf={props.csrf} submit="Add note">
            <label for="n-text">Add a note</label>
            <textarea id="n-text" name="text" rows={2} maxlength={2000} required />
          </ConsoleForm>
        )}
      </ConsoleCard>
    </>
  );
}

/** The decision page's "Send to review": the case it has, or a button to open one. */
export function SendToReview(props: {
  decisionId: string;
  existing?: ReviewCaseView | undefined;
  csrf: string;
}) {
  return (
    <section class="card" aria-labelledby="h-review">
      <h2 id="h-review">Review</h2>
      {props.existing !== undefined ? (
        <p>
          In review: <a href={`/console/review/${props.existing.id}`}>case {props.existing.id.slice(0, 8)}</a>{' '}
          ({props.existing.status}).
        </p>
      ) : (
        <form method="post" action={`/console/decisions/${props.decisionId}/review`}>
          <CsrfField token={props.csrf} />
          <button type="submit">Send to review</button>
        </form>
      )}
    </section>
  );
}

const caseIdSchema = z.uuid();
/** A form as its schema read it (`safeParse`). */
type CheckedForm<T> = { success: true; data: T } | { success: false; error: z.ZodError };
/** What a change without fields (a release) reads of its form. */
const NO_FORM: CheckedForm<undefined> = { success: true, data: undefined };
const DONE: Record<string, string> = {
  claimed: 'Claimed: this case is yours.',
  opened: 'Sent to review.',
  noted: 'Note added.',
  closed: 'Closed; a fraud or legit disposition is now the decision’s label.',
  unlocked: 'Unlocked: the Admin API unlock is queued in the outbox.',
  locked: 'Locked out: the Admin API lock-out is queued in the outbox.',
  released: 'Released: the case is back in the queue.',
  assigned: 'Handed over.',
};

/** The Review pages and their changes, when the review queue runs in this riskgate. */
export function mountReview(ui: Hono<ConsoleEnv>, kit: ConsoleKit): void {
  const review = kit.deps.review;
  const absent = (c: ConsoleContext) =>
    kit.fail(c, 503, 'Review', 'The review queue is not running in this riskgate.');
  const casePage = async (c: ConsoleContext, o: { notice?: string; error?: string } = {}) => {
    const id = caseIdSchema.safeParse(c.req.param('id'));
    if (!id.success) return kit.fail(c, 404, 'No such case', 'A review case id is a UUID.');
    const r = await review!.get(id.data);
    const s = c.get('session');
    // Read after the change this page follows (a redirect): a lock-out just made shows at once.
    const lockout =
      kit.deps.lockouts === undefined
        ? undefined
        : await kit.deps.lockouts.get(r.decisionId).catch(() => undefined);
    return kit.page(c, {
      title: `Review case ${r.id.slice(0, 8)}`,
      current: 'review',
      status: o.error === undefined ? 200 : 400,
      body: (
        <ReviewCasePage
          r={r}
          csrf={s.csrf}
          canChange={roleAllows(s.operator.role, 'analyst')}
          operator={{ name: s.operator.name, isAdmin: roleAllows(s.operator.role, 'admin') }}
          lockouts={kit.deps.lockouts !== undefined}
          lockout={lockout}
          notice={o.notice}
          error={o.error}
        />
      ),
    });
  };
  const formError = (c: ConsoleContext, error: z.ZodError) =>
    casePage(c, { error: toProblem(kit.edge.inputError(error, 'The form')).detail });
  ui.get('/review', async (c) => {
    if (review === undefined) return absent(c);
    const q = pageQuery.safeParse(c.req.query());
    if (!q.success) throw kit.edge.inputError(q.error, 'The query');
    const s = c.get('session');
    const list = await review.list(c, q.data.view, 200);
    return kit.page(c, {
      title: 'Review',
      current: 'review',
      body: (
        <ReviewQueueView
          view={q.data.view}
          list={list}
          csrf={s.csrf}
          canClaim={roleAllows(s.operator.role, 'analyst')}
          notice={q.data.empty === undefined ? undefined : 'No open case to claim.'}
        />
      ),
    });
  });
  const change = kit.edge.limitBody(MAX_FORM_BYTES);
  ui.post('/review/claim-next', change, kit.role('analyst', 'Claiming a case'), kit.form, async (c) => {
    if (review === undefined) return absent(c);
    const claimed = await review.claimNext(c, kit.edge);
    return c.redirect(
      claimed === null ? '/console/review?empty=1' : `/console/review/${claimed.id}?done=claimed`,
      303,
    );
  });
  ui.get('/review/:id', async (c) => {
    if (review === undefined) return absent(c);
    return casePage(c, { notice: DONE[c.req.query('done') ?? ''] });
  });
  /**
   * A change to case `:id` from its page's form: `read` checks the form (the case page again, 400,
   * saying why, otherwise), `make` makes it, then the case page with the `done` notice.
   */
  const caseChange = <T,>(
    step: string,
    [role, what]: [OperatorRole, string],
    done: keyof typeof DONE,
    read: (form: Record<string, string>) => CheckedForm<T>,
    make: (c: ConsoleContext, review: ReviewOperations, id: string, input: T) => Promise<unknown>,
  ) =>
    ui.post(`/review/:id/${step}`, change, kit.role(role, what), kit.form, async (c) => {
      if (review === undefined) return absent(c);
      const id = caseIdSchema.parse(c.req.param('id'));
      const form = read(c.get('form'));
      if (!form.success) return formError(c, form.error);
      await make(c, review, id, form.data);
      return c.redirect(`/console/review/${id}?done=${done}`, 303);
    });
  const edge = kit.edge;
  caseChange(
    'disposition',
    ['analyst', 'Closing a case'],
    'closed',
    (f) =>
      dispositionSchema.safeParse({
        disposition: f.disposition ?? '',
        ...(f.note !== undefined && f.note.trim() !== '' && { note: f.note }),
      }),
    (c, r, id, input) => r.dispose(c, edge, id, input),
  );
  caseChange(
    'notes',
    ['analyst', 'Adding a note'],
    'noted',
    (f) => noteSchema.safeParse({ text: f.text ?? '' }),
    (c, r, id, { text }) => r.note(c, edge, id, text),
  );
  caseChange(
    'unlock',
    ['admin', 'Unlocking a user'],
    'unlocked',
    (f) => unlockRequestSchema.safeParse({ reason: f.reason ?? '' }),
    (c, r, id, { reason }) => r.unlock(c, edge, id, reason),
  );
  caseChange(
    'lockout',
    ['admin', 'Locking a user out'],
    'locked',
    (f) => lockOutSchema.safeParse({ reason: f.reason ?? '' }),
    (c, r, id, { reason }) => r.lockOut(c, edge, id, reason),
  );
  caseChange(
    'release',
    ['analyst', 'Releasing a case'],
    'released',
    () => NO_FORM,
    (c, r, id) => r.release(c, edge, id),
  );
  caseChange(
    'assign',
    ['analyst', 'Handing a case over'],
    'assigned',
    (f) => assignSchema.safeParse({ assignee: f.assignee?.trim() ?? '' }),
    (c, r, id, { assignee }) => r.assign(c, edge, id, assignee),
  );
  ui.post(
    '/decisions/:id/review',
    change,
    kit.role('analyst', 'Sending a decision to review'),
    kit.form,
    async (c) => {
      if (review === undefined) return absent(c);
      const id = z.uuid().safeParse(c.req.param('id'));
      if (!id.success) return kit.fail(c, 404, 'No such decision', 'A decision id is a UUID.');
      const { reviewCase } = await review.open(c, kit.edge, { decisionId: id.data });
      return c.redirect(`/console/review/${reviewCase.id}?done=opened`, 303);
    },
  );
}
