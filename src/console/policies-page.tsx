import type { Hono } from 'hono';
import { z } from 'zod';
import { roleAllows } from '../operators/operator.ts';
import { diffPolicies, parsePolicyDocument } from '../policy-versions/policy-version-diff.ts';
import type { PolicyVersionOperations } from '../policy-versions/policy-version-operations.ts';
import { ROLLOUT_PERCENT } from '../policy-versions/policy-version-rollout-routes.ts';
import { MAX_POLICY_VERSION_BODY_BYTES } from '../policy-versions/policy-version-routes.ts';
import {
  POLICY_VERSION_TRANSITIONS,
  type PolicyVersion,
  type PolicyVersionStep,
  type ServedPolicyVersions,
} from '../policy-versions/policy-version-store.ts';
import { toProblem } from '../problem/problem-details.ts';
import { storableText } from '../text/storable-text.ts';
import { CsrfField, Notice, Time } from './console-layout.tsx';
import type { ConsoleContext, ConsoleEnv, ConsoleKit } from './console-routes.tsx';
import { DiffView, EvidenceView, VersionLink, VersionState } from './policy-version-views.tsx';

/**
 * The Policies pages: the policy versions newest first with a form to upload a draft, and a
 * version's page (its YAML, its diff against the active version by rule, its evidence, and the
 * steps the operator's role allows). Each change goes through the same `PolicyVersionOperations`
 * as `/policy-versions` (src/policy-versions/policy-version-operations.ts): compiled, audited
 * first, then made by the store, which keeps four eyes and the states; a refusal is shown on the
 * page with the store's words and the API's status (so the audit trail records it as refused).
 */

/** Versions a page lists. */
const PAGE_SIZE = 50;
const MAX_FORM_BYTES = 16 * 1024;
/** A form-encoded draft: the YAML up to the API's bound, percent-encoded at worst three bytes a byte. */
const MAX_DRAFT_FORM_BYTES = MAX_POLICY_VERSION_BODY_BYTES * 3 + MAX_FORM_BYTES;

const STEP_LABELS: Record<PolicyVersionStep, string> = {
  propose: 'Propose for review',
  approve: 'Approve',
  reject: 'Reject',
  withdraw: 'Withdraw',
  activate: 'Activate (every replica within 2 s)',
};
const STEPS = Object.keys(STEP_LABELS) as PolicyVersionStep[];

const messageField = storableText()
  .trim()
  .min(1, 'is required: say why (it is shown beside the version)')
  .max(500, 'must be at most 500 characters');

const draftFormSchema = z.object({
  // A browser sends a textarea's lines with CRLF: the policy as a file would hold it has LF.
  yaml: z
    .string()
    .transform((y) => y.replace(/\r\n?/g, '\n'))
    // Kept byte for byte otherwise (never trimmed): the revision is the content's hash.
    .pipe(
      z
        .string()
        .max(MAX_POLICY_VERSION_BODY_BYTES)
        .refine((y) => y.trim() !== '', 'is empty'),
    ),
  message: messageField,
});
const revertFormSchema = z.object({ message: messageField });
/** A share of accounts as typed (`10`, `2.5`); the shadow button sends `shadow=1` instead. */
const stageFormSchema = z
  .object({
    percent: z
      .string()
      .trim()
      .min(1, 'is required: the share of accounts, above 0 and below 100')
      .transform(Number)
      .pipe(ROLLOUT_PERCENT),
  })
  .transform(({ percent }) => ({ stage: 'percent' as const, percent }));
/**
 * A time as a browser's `datetime-local` field sends it (`2026-12-01T09:00`), read as UTC (the
 * page says so), or RFC 3339 with its offset.
 */
const scheduleFormSchema = z.object({
  at: z
    .string()
    .trim()
    .transform((t) =>
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(t) ? `${t.length === 16 ? `${t}:00` : t}Z` : t,
    )
    .pipe(z.iso.datetime({ offset: true, error: 'must be a time, as 2026-12-01T09:00 (UTC) or RFC 3339' })),
});
const SHADOW = { stage: 'shadow' } as const;
const ROLLOUT_CHANGES = ['stage', 'unstage', 'schedule', 'unschedule'] as const;
type RolloutChange = (typeof ROLLOUT_CHANGES)[number];
const listQuerySchema = z.object({ before: z.string().max(64).optional() });
const versionQuerySchema = z.object({
  done: z.enum([...STEPS, ...ROLLOUT_CHANGES, 'create', 'revert']).optional(),
});

const DONE: Record<z.output<typeof versionQuerySchema>['done'] & string, string> = {
  create: 'Draft saved. Propose it when it is ready for review.',
  propose: 'Proposed: another admin can review and approve it.',
  approve: 'Approved: it can be activated.',
  reject: 'Rejected.',
  withdraw: 'Withdrawn.',
  activate: 'Activated: every replica serves it within about 2 s.',
  revert: 'Reverted: this new version carries the earlier one’s policy and is active.',
  stage: 'Staged: every replica serves it to its share of accounts within about 2 s (see its state).',
  unstage: 'Rollout ended: every login is answered by the active version again (it stays approved).',
  schedule: 'Scheduled: the first replica to poll after that time activates it.',
  unschedule: 'Scheduled activation cancelled (it stays approved).',
};

/** A refusal the page shows (the store's or the form's words), with the status the API answers. */
interface Refusal {
  status: 400 | 403 | 404 | 409;
  message: string;
  /** Every issue (a policy that does not compile has one per error). */
  issues: string[];
}

/** The refusal of `error`, or `error` rethrown (a database that does not answer is the 503 page). */
function refusalOf(error: unknown): Refusal {
  const problem = toProblem(error);
  const status = ([400, 403, 404, 409] as const).find((s) => s === problem.status);
  if (status === undefined) throw error;
  return { status, message: problem.detail, issues: (problem.errors ?? []).map((e) => e.message) };
}

function VersionsTable(props: { versions: readonly PolicyVersion[]; served: ServedPolicyVersions }) {
  return (
    <table id="versions">
      <thead>
        <tr>
          <th scope="col">Version</th>
          <th scope="col">State</th>
          <th scope="col">Author</th>
          <th scope="col">Made</th>
          <th scope="col">Message</th>
          <th scope="col">Parent</th>
        </tr>
      </thead>
      <tbody>
        {props.versions.map((v) => (
          <tr>
            <th scope="row">
              <VersionLink id={v.id} />
              <div class="mono muted">{v.revision}</div>
            </th>
            <td>
              <VersionState v={v} served={props.served} />
              {v.restoresId !== null && (
                <div class="muted">
                  restores <VersionLink id={v.restoresId} />
                </div>
              )}
            </td>
            <td>{v.author}</td>
            <td>
              <Time at={new Date(v.createdMs).toISOString()} />
            </td>
            <td>
              <bdi>{v.message}</bdi>
            </td>
            <td>
              <VersionLink id={v.parentId} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function DraftForm(props: { csrf: string; form?: Record<string, string> | undefined }) {
  return (
    <section class="card" aria-labelledby="h-upload">
      <h2 id="h-upload">Upload a draft</h2>
      <p class="muted">
        The policy YAML, as a file holds it. It must compile: if it does not, the errors are shown here and
        nothing is kept. A draft decides no login until another admin approved it and it was activated.
      </p>
      <form method="post" action="/console/policies" aria-label="Upload a draft">
        <CsrfField token={props.csrf} />
        <div>
          <label for="d-yaml">Policy YAML</label>
          <textarea id="d-yaml" name="yaml" rows={18} required spellcheck={false} class="mono">
            {props.form?.yaml ?? ''}
          </textarea>
        </div>
        <div>
          <label for="d-message">Message</label>
          <input
            type="text"
            id="d-message"
            name="message"
            required
            maxlength={500}
            value={props.form?.message}
          />
        </div>
        <div class="actions">
          <button type="submit">Save the draft</button>
        </div>
      </form>
    </section>
  );
}

/** The refusal box: the message, and each issue on its own line. */
function RefusalNotice(props: { refusal: Refusal; title: string }) {
  const { refusal } = props;
  const issues = refusal.issues.length > 1 || refusal.issues[0] !== refusal.message ? refusal.issues : [];
  return (
    <Notice kind="error">
      <strong>{props.title}</strong> {issues.length > 0 ? '' : refusal.message}
      {issues.length > 0 && (
        <ul class="issues">
          {issues.map((i) => (
            <li class="mono">{i}</li>
          ))}
        </ul>
      )}
    </Notice>
  );
}

export function PoliciesView(props: {
  versions: readonly PolicyVersion[];
  served: ServedPolicyVersions;
  csrf: string;
  canChange: boolean;
  older?: string | undefined;
  refusal?: Refusal | undefined;
  form?: Record<string, string> | undefined;
}) {
  const { served } = props;
  return (
    <>
      <h1>Policies</h1>
      <p>
        {served.active === undefined ? (
          'No version was ever activated: every replica serves its policy file.'
        ) : (
          <>
            Active: <VersionLink id={served.active.id} /> <span class="muted">({served.active.message})</span>
          </>
        )}
      </p>
      {props.refusal !== undefined && (
        <RefusalNotice refusal={props.refusal} title="The draft was not saved." />
      )}
      {props.versions.length === 0 ? (
        <p class="muted">No policy version yet.</p>
      ) : (
        <VersionsTable versions={props.versions} served={served} />
      )}
      {props.older !== undefined && (
        <p class="pager">
          <a href={`/console/policies?before=${encodeURIComponent(props.older)}`}>Older versions</a>
        </p>
      )}
      {props.canChange ? (
        <DraftForm csrf={props.csrf} form={props.form} />
      ) : (
        <p class="muted">Uploading a draft takes the admin role.</p>
      )}
    </>
  );
}

/** A form of one button posting to `/console/policies/{id}/{change}`. */
function ButtonForm(props: { id: string; change: string; csrf: string; label: string; danger?: boolean }) {
  return (
    <form method="post" action={`/console/policies/${props.id}/${props.change}`} class="inline-form">
      <CsrfField token={props.csrf} />
      <button type="submit" class={props.danger === true ? 'danger' : undefined}>
        {props.label}
      </button>{' '}
    </form>
  );
}

/**
 * Staged and scheduled activation of an approved version (a share of accounts, shadow, a time),
 * and the undoing of either when it is this version's.
 */
function RolloutForms(props: { v: PolicyVersion; csrf: string; served: ServedPolicyVersions }) {
  const { v, csrf, served } = props;
  const id = encodeURIComponent(v.id);
  const staged = served.staged?.version.id === v.id;
  const scheduled = served.scheduled?.versionId === v.id;
  if (v.state !== 'approved' && !staged && !scheduled) return null;
  return (
    <section aria-labelledby="h-rollout">
      <h3 id="h-rollout">Rollout</h3>
      {v.state === 'approved' && (
        <>
          <form
            method="post"
            action={`/console/policies/${id}/stage`}
            aria-label="Stage to a share of accounts"
          >
            <CsrfField token={csrf} />
            <div>
              <label for="s-percent">Share of accounts (%), above 0 and below 100</label>
              <input
                type="number"
                id="s-percent"
                name="percent"
                required
                min="0.01"
                max="99.99"
                step="0.01"
              />
            </div>
            <p class="muted">
              An account is in or out on every login and every replica; the active version’s verdict is
              recorded beside it. Activate the version to serve it to all.
            </p>
            <div class="actions">
              <button type="submit">Stage</button>
            </div>
          </form>
          <form method="post" action={`/console/policies/${id}/stage`} class="inline-form">
            <CsrfField token={csrf} />
            <button type="submit" name="shadow" value="1">
              Stage in shadow (never served)
            </button>
          </form>
          <form
            method="post"
            action={`/console/policies/${id}/schedule`}
            aria-label="Schedule the activation"
          >
            <CsrfField token={csrf} />
            <div>
              <label for="s-at">Activate at (UTC)</label>
              <input type="datetime-local" id="s-at" name="at" required />
            </div>
            <div class="actions">
              <button type="submit">Schedule</button>
            </div>
          </form>
        </>
      )}
      {staged && <ButtonForm id={id} change="unstage" csrf={csrf} label="End the rollout" danger />}
      {scheduled && (
        <ButtonForm id={id} change="unschedule" csrf={csrf} label="Cancel the scheduled activation" danger />
      )}
    </section>
  );
}

function StepForms(props: {
  v: PolicyVersion;
  csrf: string;
  operator: string;
  served: ServedPolicyVersions;
}) {
  const { v } = props;
  const id = encodeURIComponent(v.id);
  const steps = STEPS.filter((s) =>
    (POLICY_VERSION_TRANSITIONS[s].from as readonly string[]).includes(v.state),
  );
  return (
    <section class="card" aria-labelledby="h-steps">
      <h2 id="h-steps">Steps</h2>
      {steps.length === 0 && v.state !== 'retired' && <p class="muted">No step starts from {v.state}.</p>}
      {steps.includes('approve') && v.author === props.operator && (
        <p class="muted">You wrote this version: an admin other than its author must approve it.</p>
      )}
      {steps.map((step) => (
        <ButtonForm
          id={id}
          change={step}
          csrf={props.csrf}
          label={STEP_LABELS[step]}
          danger={step === 'reject' || step === 'withdraw'}
        />
      ))}
      <RolloutForms v={v} csrf={props.csrf} served={props.served} />
      {v.state === 'retired' && (
        <form method="post" action={`/console/policies/${id}/revert`} aria-label="Revert to this version">
          <CsrfField token={props.csrf} />
          <div>
            <label for="r-message">Why this version comes back</label>
            <input type="text" id="r-message" name="message" required maxlength={500} />
          </div>
          <div class="actions">
            <button type="submit">Revert to this version</button>
          </div>
        </form>
      )}
    </section>
  );
}

/** What a version is compared with: the active one, or for the active one its parent. */
interface DiffBase {
  version: PolicyVersion | undefined;
  label: string;
}

export function VersionView(props: {
  v: PolicyVersion;
  /** The evidence kept for it, if any (shown as it comes). */
  evidence: unknown;
  served: ServedPolicyVersions;
  base: DiffBase;
  csrf: string;
  canChange: boolean;
  operator: string;
  notice?: string | undefined;
  refusal?: Refusal | undefined;
}) {
  const { v, base } = props;
  const after = parsePolicyDocument(v.yaml);
  const before = base.version === undefined ? undefined : parsePolicyDocument(base.version.yaml);
  return (
    <>
      <p>
        <a href="/console/policies">All versions</a>
      </p>
      <h1>
        Policy version <span class="mono">{v.id}</span>
      </h1>
      {props.notice !== undefined && <Notice kind="ok">{props.notice}</Notice>}
      {props.refusal !== undefined && <RefusalNotice refusal={props.refusal} title="Refused." />}
      <dl class="facts">
        <dt>State</dt>
        <dd>
          <VersionState v={v} served={props.served} /> <span class="muted">since</span>{' '}
          <Time at={new Date(v.stateChangedMs).toISOString()} /> <span class="muted">by</span>{' '}
          {v.stateChangedBy}
        </dd>
        <dt>Policy</dt>
        <dd>
          <span class="mono">{v.name}</span> <span class="mono muted">revision {v.revision}</span>
        </dd>
        <dt>Author</dt>
        <dd>{v.author}</dd>
        <dt>Made</dt>
        <dd>
          <Time at={new Date(v.createdMs).toISOString()} />
        </dd>
        <dt>Message</dt>
        <dd>
          <bdi>{v.message}</bdi>
        </dd>
        <dt>Parent</dt>
        <dd>
          <VersionLink id={v.parentId} />
        </dd>
        {v.restoresId !== null && (
          <>
            <dt>Restores</dt>
            <dd>
              <VersionLink id={v.restoresId} />
            </dd>
          </>
        )}
      </dl>
      {props.canChange ? (
        <StepForms v={v} csrf={props.csrf} operator={props.operator} served={props.served} />
      ) : (
        <p class="muted">The steps of a version take the admin role.</p>
      )}
      {after === undefined || (base.version !== undefined && before === undefined) ? (
        <Notice>
          This version’s policy (or {base.label}’s) does not parse, so there is no diff by rule.
        </Notice>
      ) : (
        <DiffView diff={diffPolicies(before, after)} base={base.label} />
      )}
      <EvidenceView evidence={props.evidence ?? undefined} />
      <section class="card" aria-labelledby="h-yaml">
        <h2 id="h-yaml">Policy YAML</h2>
        <pre class="yaml wrap" id="yaml">
          {v.yaml}
        </pre>
      </section>
    </>
  );
}

/** What `v` is compared with: the active version, or for the active one its parent. */
async function baseOf(ops: PolicyVersionOperations, v: PolicyVersion, served: ServedPolicyVersions) {
  const active = served.active;
  if (active === undefined) return { version: undefined, label: 'no version (none was ever activated)' };
  if (active.id !== v.id) return { version: active, label: `the active version ${active.id}` };
  if (v.parentId === null) return { version: undefined, label: 'no version (it has no parent)' };
  return { version: await ops.get(v.parentId), label: `its parent ${v.parentId}` };
}

/** The Policies pages and their changes (admin), when the policy versions run in this riskgate. */
export function mountPolicies(ui: Hono<ConsoleEnv>, kit: ConsoleKit): void {
  const ops = kit.deps.policyVersions;
  const absent = (c: ConsoleContext) =>
    kit.fail(c, 503, 'Policies', 'The policy versions are not running in this riskgate.');
  const canChange = (c: ConsoleContext) => roleAllows(c.get('session').operator.role, 'admin');
  const listPage = async (
    c: ConsoleContext,
    ops: PolicyVersionOperations,
    o: { refusal?: Refusal; form?: Record<string, string> } = {},
  ) => {
    const q = listQuerySchema.safeParse(c.req.query());
    if (!q.success) throw kit.edge.inputError(q.error, 'The query');
    const [versions, served] = await Promise.all([ops.list(PAGE_SIZE, q.data.before), ops.served()]);
    const last = versions.at(-1);
    return kit.page(c, {
      title: 'Policies',
      current: 'policies',
      status: o.refusal?.status ?? 200,
      body: (
        <PoliciesView
          versions={versions}
          served={served}
          csrf={c.get('session').csrf}
          canChange={canChange(c)}
          older={versions.length === PAGE_SIZE ? last?.id : undefined}
          refusal={o.refusal}
          form={o.form}
        />
      ),
    });
  };
  const versionPage = async (
    c: ConsoleContext,
    ops: PolicyVersionOperations,
    o: { notice?: string; refusal?: Refusal } = {},
  ) => {
    const id = c.req.param('id') ?? '';
    const [v, served, evidence] = await Promise.all([ops.get(id), ops.served(), ops.evidence(id)]);
    const s = c.get('session');
    return kit.page(c, {
      title: `Policy version ${v.id}`,
      current: 'policies',
      status: o.refusal?.status ?? 200,
      body: (
        <VersionView
          v={v}
          evidence={evidence ?? (v as PolicyVersion & { evidence?: unknown }).evidence}
          served={served}
          base={await baseOf(ops, v, served)}
          csrf={s.csrf}
          canChange={canChange(c)}
          operator={s.operator.name}
          notice={o.notice}
          refusal={o.refusal}
        />
      ),
    });
  };
  ui.get('/policies', (c) => (ops === undefined ? absent(c) : listPage(c, ops)));
  ui.get('/policies/:id', async (c) => {
    if (ops === undefined) return absent(c);
    const q = versionQuerySchema.safeParse(c.req.query());
    const done = q.success ? q.data.done : undefined;
    try {
      return await versionPage(c, ops, { ...(done !== undefined && { notice: DONE[done] }) });
    } catch (error) {
      const refusal = refusalOf(error);
      return kit.fail(c, refusal.status, 'No such policy version', refusal.message);
    }
  });
  ui.post(
    '/policies',
    kit.edge.limitBody(MAX_DRAFT_FORM_BYTES),
    kit.role('admin', 'Uploading a policy draft'),
    kit.form,
    async (c) => {
      if (ops === undefined) return absent(c);
      const sent = c.get('form');
      try {
        const form = draftFormSchema.safeParse(sent);
        if (!form.success) throw kit.edge.inputError(form.error, 'The draft form');
        const made = await ops.create(c, kit.edge, form.data);
        return c.redirect(`/console/policies/${encodeURIComponent(made.id)}?done=create`, 303);
      } catch (error) {
        const form = { yaml: sent.yaml ?? '', message: sent.message ?? '' };
        return listPage(c, ops, { refusal: refusalOf(error), form });
      }
    },
  );
  mountVersionSteps(ui, kit, versionPage);
}

/** The steps and the revert, each from a version's page and back to the page it leads to. */
function mountVersionSteps(
  ui: Hono<ConsoleEnv>,
  kit: ConsoleKit,
  versionPage: (
    c: ConsoleContext,
    ops: PolicyVersionOperations,
    o: { refusal?: Refusal },
  ) => Promise<Response>,
): void {
  const ops = kit.deps.policyVersions;
  if (ops === undefined) return;
  const refused = async (c: ConsoleContext, error: unknown) => {
    const refusal = refusalOf(error);
    try {
      return await versionPage(c, ops, { refusal });
    } catch {
      return kit.fail(c, refusal.status, 'Refused', refusal.message);
    }
  };
  /** A change from a version's page: to the page of the version it made or moved, or refused there. */
  const change = (
    what: string,
    done: keyof typeof DONE,
    work: (c: ConsoleContext, id: string) => Promise<{ id: string }>,
  ) =>
    ui.post(
      `/policies/:id/${done}`,
      kit.edge.limitBody(MAX_FORM_BYTES),
      kit.role('admin', what),
      kit.form,
      async (c) => {
        try {
          const v = await work(c, c.req.param('id') ?? '');
          return c.redirect(`/console/policies/${encodeURIComponent(v.id)}?done=${done}`, 303);
        } catch (error) {
          return refused(c, error);
        }
      },
    );
  for (const step of STEPS)
    change(`${STEP_LABELS[step].split(' ')[0]} a policy version`, step, (c, id) =>
      ops.step(c, kit.edge, id, step),
    );
  change('Reverting to a policy version', 'revert', (c, id) => {
    const form = revertFormSchema.safeParse(c.get('form'));
    if (!form.success) throw kit.edge.inputError(form.error, 'The revert form');
    return ops.revert(c, kit.edge, id, form.data.message);
  });
  mountRolloutChanges(ops, kit, change);
}

/** Stage, unstage, schedule and unschedule from a version's page, each back to it. */
function mountRolloutChanges(
  ops: PolicyVersionOperations,
  kit: ConsoleKit,
  change: (
    what: string,
    done: RolloutChange,
    work: (c: ConsoleContext, id: string) => Promise<{ id: string }>,
  ) => void,
): void {
  change('Staging a policy version', 'stage', async (c, id) => {
    const sent = c.get('form');
    const form =
      sent.shadow === '1' ? { success: true as const, data: SHADOW } : stageFormSchema.safeParse(sent);
    if (!form.success) throw kit.edge.inputError(form.error, 'The stage form');
    return (await ops.stage(c, kit.edge, id, form.data)).version;
  });
  change('Ending a rollout', 'unstage', async (c, id) => {
    await ops.unstage(c, kit.edge, id);
    return { id };
  });
  change('Scheduling a policy version', 'schedule', async (c, id) => {
    const form = scheduleFormSchema.safeParse(c.get('form'));
    if (!form.success) throw kit.edge.inputError(form.error, 'The schedule form');
    await ops.schedule(c, kit.edge, id, Date.parse(form.data.at));
    return { id };
  });
  change('Cancelling a scheduled activation', 'unschedule', async (c, id) => {
    await ops.unschedule(c, kit.edge, id);
    return { id };
  });
}
