import type { Hono } from 'hono';
import { z } from 'zod';
import { MAX_REASON_LENGTH } from '../audit/change-reason.ts';
import { MAX_TTL_SECONDS, pageQuerySchema } from '../lists/list-api.ts';
import type { ListOperations } from '../lists/list-routes.ts';
import { MAX_LIST_VALUE_LENGTH } from '../lists/list-values.ts';
import { roleAllows } from '../operators/operator.ts';
import { parseTtl } from '../policy/policy-schema.ts';
import { toProblem } from '../problem/problem-details.ts';
import { storableLine, storableText } from '../text/storable-text.ts';
import { CsrfField, Notice, Time } from './console-layout.tsx';
import type { ConsoleContext, ConsoleEnv, ConsoleKit } from './console-routes.tsx';

/**
 * The Lists page: the runtime lists the policy declares with their counts, one list's entries by
 * page, and (for an admin) forms to add and remove an entry. Each change goes through the same
 * `ListOperations` as `/lists` (src/lists/list-routes.ts): checked, audited first, then made.
 */

type Overview = Awaited<ReturnType<ListOperations['overview']>>;
type ListPage = Awaited<ReturnType<ListOperations['page']>>;

const MAX_FORM_BYTES = 16 * 1024;

/** A time-to-live in seconds as the policy writes one (`24h`), or `none`. */
export function ttlText(seconds: number | null): string {
  if (seconds === null) return 'none';
  for (const [unit, s] of [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
  ] as const) {
    // Days from two on: a day's TTL reads as the policy usually writes it, `24h`.
    if (seconds % s === 0 && (unit !== 'd' || seconds >= 2 * s)) return `${seconds / s}${unit}`;
  }
  return `${seconds}s`;
}

const reasonField = storableText()
  .trim()
  .min(1, 'is required: say why (it is kept with the change in the audit trail)')
  .max(MAX_REASON_LENGTH, `must be at most ${MAX_REASON_LENGTH} characters`);

/** The add form: the TTL as the policy writes one (`30m`, `24h`, `7d`), empty for the list's own. */
export const addEntryFormSchema = z.object({
  value: storableLine().max(MAX_LIST_VALUE_LENGTH, `must be at most ${MAX_LIST_VALUE_LENGTH} characters`),
  reason: reasonField,
  ttl: z
    .string()
    .trim()
    .optional()
    .transform((t, ctx) => {
      if (t === undefined || t === '') return undefined;
      const ms = parseTtl(t);
      if (ms === undefined || ms < 1000 || ms > MAX_TTL_SECONDS * 1000) {
        ctx.addIssue({ code: 'custom', message: 'must be a duration like 30m, 24h or 7d (up to 3650d)' });
        return z.NEVER;
      }
      return ms / 1000;
    }),
});

export const removeEntryFormSchema = z.object({
  value: storableLine().min(1).max(MAX_LIST_VALUE_LENGTH),
  reason: reasonField,
});

function ListsTable(props: { overview: Overview }) {
  return (
    <table>
      <thead>
        <tr>
          <th scope="col">List</th>
          <th scope="col">Key</th>
          <th scope="col">Default TTL</th>
          <th scope="col">Description</th>
          <th scope="col" class="num">
            Entries
          </th>
        </tr>
      </thead>
      <tbody>
        {props.overview.lists.map((l) => (
          <tr>
            <td>
              <a href={`/console/lists/${encodeURIComponent(l.name)}`}>{l.name}</a>
            </td>
            <td>{l.key}</td>
            <td>{ttlText(l.ttlSeconds)}</td>
            <td>{l.description ?? ''}</td>
            <td class="num">{l.entries}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function ListsView(props: { overview: Overview }) {
  const { overview } = props;
  return (
    <>
      <h1>Lists</h1>
      {overview.snapshot.stale && (
        <Notice kind="error">
          This riskgate's copy of the lists is stale (the database has not answered lately): rules reading
          lists see them unavailable.
        </Notice>
      )}
      {overview.lists.length === 0 ? (
        <p class="muted">
          The active policy declares no list (its <code>lists:</code>; see policies/README.md).
        </p>
      ) : (
        <ListsTable overview={overview} />
      )}
    </>
  );
}

function AddForm(props: { page: ListPage; csrf: string; form?: Record<string, string> | undefined }) {
  const { page } = props;
  const example = page.key === 'ip' ? '203.0.113.0/24' : `a ${page.key}`;
  return (
    <form
      method="post"
      action={`/console/lists/${encodeURIComponent(page.name)}/entries`}
      class="filters card"
      aria-label={`Add an entry to ${page.name}`}
    >
      <CsrfField token={props.csrf} />
      <div>
        <label for="l-value">Value ({page.key === 'ip' ? 'address or CIDR' : page.key})</label>
        <input
          type="text"
          id="l-value"
          name="value"
          required
          maxlength={MAX_LIST_VALUE_LENGTH}
          placeholder={example}
          value={props.form?.value ?? ''}
        />
      </div>
      <div>
        <label for="l-reason">Reason</label>
        <input
          type="text"
          id="l-reason"
          name="reason"
          required
          maxlength={MAX_REASON_LENGTH}
          value={props.form?.reason ?? ''}
        />
      </div>
      <div>
        <label for="l-ttl">TTL (default {ttlText(page.ttlSeconds)})</label>
        <input type="text" id="l-ttl" name="ttl" placeholder="24h" value={props.form?.ttl ?? ''} />
      </div>
      <div class="actions">
        <button type="submit">Add entry</button>
      </div>
    </form>
  );
}

function RemoveForm(props: { list: string; value: string; csrf: string }) {
  const id = `r-${props.value.replace(/[^A-Za-z0-9]/g, '-')}`;
  return (
    <form
      method="post"
      action={`/console/lists/${encodeURIComponent(props.list)}/remove`}
      class="inline-form"
    >
      <CsrfField token={props.csrf} />
      <input type="hidden" name="value" value={props.value} />
      <label for={id} class="visually-hidden">
        Reason to remove {props.value}
      </label>
      <input type="text" id={id} name="reason" required maxlength={MAX_REASON_LENGTH} placeholder="reason" />{' '}
      <button type="submit" class="danger" aria-label={`Remove ${props.value}`}>
        Remove
      </button>
    </form>
  );
}

export function ListView(props: {
  page: ListPage;
  csrf: string;
  canChange: boolean;
  notice?: string | undefined;
  error?: string | undefined;
  form?: Record<string, string> | undefined;
}) {
  const { page } = props;
  return (
    <>
      <p>
        <a href="/console/lists">All lists</a>
      </p>
      <h1>
        List <span class="mono">{page.name}</span>
      </h1>
      <p>
        {page.key} entries, default TTL {ttlText(page.ttlSeconds)}, {page.entries} unexpired
        {page.description !== undefined ? `: ${page.description}` : '.'}
      </p>
      {props.notice !== undefined && <Notice kind="ok">{props.notice}</Notice>}
      {props.error !== undefined && <Notice kind="error">{props.error}</Notice>}
      {props.canChange ? (
        <AddForm page={page} csrf={props.csrf} form={props.form} />
      ) : (
        <p class="muted">Adding and removing entries takes the admin role.</p>
      )}
      <table id="entries">
        <thead>
          <tr>
            <th scope="col">Value</th>
            <th scope="col">Author</th>
            <th scope="col">Reason</th>
            <th scope="col">Created</th>
            <th scope="col">Expires</th>
            {props.canChange && <th scope="col">Remove</th>}
          </tr>
        </thead>
        <tbody>
          {page.items.map((e) => (
            <tr>
              <td class="mono">{e.value}</td>
              <td>{e.author}</td>
              <td>{e.reason}</td>
              <td>
                <Time at={e.createdAt} />
              </td>
              <td>{e.expiresAt === null ? 'never' : <Time at={e.expiresAt} />}</td>
              {props.canChange && (
                <td>
                  <RemoveForm list={page.name} value={e.value} csrf={props.csrf} />
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {page.items.length === 0 && <p class="muted">No unexpired entry.</p>}
      {page.nextCursor !== undefined && (
        <nav class="pager" aria-label="Pages">
          <a
            href={`/console/lists/${encodeURIComponent(page.name)}?${new URLSearchParams({ cursor: page.nextCursor })}`}
          >
            Next entries
          </a>
        </nav>
      )}
    </>
  );
}

/** The 400 or 404 of a change as a message for the page (the problem's detail); anything else is thrown on. */
export function pageError(error: unknown): { status: 400 | 404; message: string } {
  const problem = toProblem(error);
  if (problem.status !== 400 && problem.status !== 404) throw error;
  return { status: problem.status, message: problem.detail };
}

const listQuerySchema = pageQuerySchema.extend({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  added: z.string().max(MAX_LIST_VALUE_LENGTH).optional(),
  removed: z.string().max(MAX_LIST_VALUE_LENGTH).optional(),
});

/** The Lists pages and their changes (admin), when the lists run in this riskgate. */
export function mountLists(ui: Hono<ConsoleEnv>, kit: ConsoleKit): void {
  const lists = kit.deps.lists;
  const absent = (c: ConsoleContext) =>
    kit.fail(c, 503, 'Lists', 'The runtime lists are not running in this riskgate.');
  const listPage = async (
    c: ConsoleContext,
    name: string,
    o: {
      notice?: string;
      error?: { status: 400 | 404; message: string };
      /** The add form as sent, shown again with its error. */
      form?: Record<string, string>;
      cursor?: string;
      limit?: number;
    },
  ) => {
    const page = await lists!.page(name, { limit: o.limit ?? 50, cursor: o.cursor });
    const s = c.get('session');
    return kit.page(c, {
      title: `List ${page.name}`,
      current: 'lists',
      status: o.error?.status ?? 200,
      body: (
        <ListView
          page={page}
          csrf={s.csrf}
          canChange={roleAllows(s.operator.role, 'admin')}
          notice={o.notice}
          error={o.error?.message}
          form={o.form}
        />
      ),
    });
  };
  ui.get('/lists', async (c) => {
    if (lists === undefined) return absent(c);
    const overview = await lists.overview();
    return kit.page(c, { title: 'Lists', current: 'lists', body: <ListsView overview={overview} /> });
  });
  ui.get('/lists/:name', async (c) => {
    if (lists === undefined) return absent(c);
    const q = listQuerySchema.safeParse(c.req.query());
    if (!q.success) throw kit.edge.inputError(q.error, 'The query');
    const { added, removed, cursor, limit } = q.data;
    const notice =
      added !== undefined ? `Added ${added}.` : removed !== undefined ? `Removed ${removed}.` : undefined;
    return listPage(c, c.req.param('name'), { notice, cursor, limit });
  });
  const change = (
    path: string,
    what: string,
    make: (c: ConsoleContext, name: string) => Promise<string>,
    keepForm = false,
  ) =>
    ui.post(path, kit.edge.limitBody(MAX_FORM_BYTES), kit.role('admin', what), kit.form, async (c) => {
      if (lists === undefined) return absent(c);
      const name = lists.list(c.req.param('name') ?? '').name;
      try {
        return c.redirect(await make(c, name), 303);
      } catch (error) {
        return listPage(c, name, { error: pageError(error), ...(keepForm && { form: c.get('form') }) });
      }
    });
  change(
    '/lists/:name/entries',
    'Adding a list entry',
    async (c, name) => {
      const form = addEntryFormSchema.safeParse(c.get('form'));
      if (!form.success) throw kit.edge.inputError(form.error, 'The form');
      const { value, reason, ttl } = form.data;
      const entry = await lists!.add(c, kit.edge, name, { value, reason, ttlSeconds: ttl });
      return `/console/lists/${encodeURIComponent(name)}?${new URLSearchParams({ added: entry.value })}`;
    },
    true,
  );
  change('/lists/:name/remove', 'Removing a list entry', async (c, name) => {
    const form = removeEntryFormSchema.safeParse(c.get('form'));
    if (!form.success) throw kit.edge.inputError(form.error, 'The form');
    const removed = await lists!.remove(c, kit.edge, name, form.data.value, form.data.reason);
    return `/console/lists/${encodeURIComponent(name)}?${new URLSearchParams({ removed: removed.value })}`;
  });
}
