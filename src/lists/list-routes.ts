import type { Context } from 'hono';
import type { z } from 'zod';
import { z as zod } from 'zod';
import { operatorNameOf } from '../edge/caller-auth.ts';
import {
  AUDITED_CHANGE,
  type CodeNotes,
  declareRoute,
  notFoundNote,
  QUERY_RULE_NOTE,
} from '../edge/route-declaration.ts';
import { ErrorCode, InputError, RiskgateError } from '../errors/riskgate-error.ts';
import { emitCommitted } from '../events/emit-committed.ts';
import { type EventSink, eventIdPart, type RiskgateEventType } from '../events/riskgate-event.ts';
import type { LifecycleLog, RouteEdge, RouteMount } from '../lifecycle/component.ts';
import type { AuditAction } from '../operators/audit-trail.ts';
import type { DeclaredList } from '../policy/policy-types.ts';
import { storeAnswer } from '../store/store-unavailable.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import {
  type AddEntry,
  addEntrySchema,
  importBodySchema,
  importQuerySchema,
  type ListEntryView,
  type listPageSchema,
  type listsSchema,
  MAX_ENTRY_BODY_BYTES,
  MAX_IMPORT_BODY_BYTES,
  MAX_IMPORT_ENTRIES,
  pageQuerySchema,
  reasonQuerySchema,
  removeBodySchema,
} from './list-api.ts';
import type { ListEntry, ListStore } from './list-store.ts';
import type { ListSync } from './list-sync.ts';
import { normaliseListValue } from './list-values.ts';

/**
 * The operator endpoints of the runtime lists: `GET /lists`, `GET /lists/{name}`,
 * `POST /lists/{name}/entries`, `DELETE /lists/{name}/entries/{value}`, `POST /lists/{name}/import`.
 * Reads take any operator; changes an admin. A change is written to the audit trail first
 * (`edge.recordChange`: refused, 503, when it cannot be, and nothing changes), then to the
 * database, then told as an event; every replica's snapshot has it within 2 s, this one's before
 * the answer.
 */

export interface ListRoutesDeps {
  store: ListStore;
  sync: ListSync;
  /** The lists the active policy declares. */
  declared: () => readonly DeclaredList[];
  events: EventSink;
  log: LifecycleLog;
  /** Entries are dated and expire on its wall time. Default {@link systemClock}. */
  clock?: Clock | undefined;
}

/** `work`, its failure the 503 `RG_ERR_DATABASE_UNAVAILABLE` (src/store/store-unavailable.ts). */
const fromListStore = <T>(work: Promise<T>) =>
  storeAnswer(work, ErrorCode.DATABASE_UNAVAILABLE, 'The lists database');

export function entryView(e: ListEntry): ListEntryView {
  return {
    list: e.list,
    value: e.value,
    kind: e.kind as ListEntryView['kind'],
    author: e.author,
    reason: e.reason,
    createdAt: new Date(e.createdMs).toISOString(),
    expiresAt: e.expiresMs === null ? null : new Date(e.expiresMs).toISOString(),
  };
}

/** The lists and their changes, as the endpoints and the console's Lists page share them. */
export interface ListOperations {
  /** The active policy's list `name` (404 problem when it declares none). */
  list(name: string): DeclaredList;
  /** The declared lists with their unexpired entry counts, and this process's snapshot's age. */
  overview(): Promise<z.output<typeof listsSchema>>;
  /** One declared list and a page of its entries, by value (404 when the policy declares none). */
  page(name: string, query: z.output<typeof pageQuerySchema>): Promise<z.output<typeof listPageSchema>>;
  /**
   * Adds (or replaces) an entry of `name` as the operator of `c`: checked (400 naming `value`),
   * audited first (503, nothing changed, when the trail cannot take it), written, told.
   */
  add(c: Context, edge: RouteEdge, name: string, input: AddEntry): Promise<ListEntryView>;
  /** Removes an entry of `name` as the operator of `c`, audited first; 404 when there is none. */
  remove(c: Context, edge: RouteEdge, name: string, value: string, reason: string): Promise<ListEntryView>;
}

/** The lists' reads and changes over `deps` (the endpoints below and the console use these). */
export function listOperations(deps: ListRoutesDeps): ListOperations {
  const clock = deps.clock ?? systemClock;
  const now = () => clock.nowMs();
  const declaredList = (name: string): DeclaredList => {
    const list = deps.declared().find((l) => l.name === name);
    if (list === undefined) {
      throw new RiskgateError(
        ErrorCode.NOT_FOUND,
        `No list named ${JSON.stringify(name.slice(0, 64))} in the active policy (its \`lists\`).`,
      );
    }
    return list;
  };
  const summary = (l: DeclaredList, entries: number) => ({
    name: l.name,
    key: l.key,
    ttlSeconds: l.ttlMs === undefined ? null : Math.round(l.ttlMs / 1000),
    ...(l.description !== undefined && { description: l.description }),
    entries,
  });
  return {
    list: declaredList,
    async overview() {
      const counts = await fromListStore(deps.store.counts(now()));
      const ageMs = deps.sync.ageMs();
      return {
        lists: deps.declared().map((l) => summary(l, counts.get(l.name) ?? 0)),
        snapshot: { ageMs: Number.isFinite(ageMs) ? ageMs : -1, stale: !deps.sync.read(now()).ok },
      };
    },
    async page(name, { limit, cursor }) {
      const list = declaredList(name);
      const nowMs = now();
      const [page, counts] = await fromListStore(
        Promise.all([deps.store.page(list.name, nowMs, limit + 1, cursor), deps.store.counts(nowMs)]),
      );
      const items = page.slice(0, limit).map(entryView);
      return {
        ...summary(list, counts.get(list.name) ?? 0),
        items,
        ...(page.length > limit && { nextCursor: items[items.length - 1]!.value }),
      };
    },
    async add(c, edge, name, input) {
      const list = declaredList(name);
      const change = changeSteps(deps, edge, now);
      const entry = change.entryOf(c, list, input, 'value');
      await change.audit(c, 'list.add', `${list.name}:${entry.value}`, {
        reason: entry.reason,
        expiresAt: entryView(entry).expiresAt,
      });
      await fromListStore(deps.store.add([entry]));
      await change.after('list.entry_added', [entry]);
      return entryView(entry);
    },
    remove(c, edge, name, value, reason) {
      return removeEntry(c, declaredList(name), value, reason, deps, changeSteps(deps, edge, now));
    },
  };
}

const LIST_ROUTE: CodeNotes = {
  [ErrorCode.NOT_FOUND]: notFoundNote('No list of this name in the active policy (its `lists`).'),
  [ErrorCode.DATABASE_UNAVAILABLE]:
    'The lists database (RISKGATE_DATABASE) did not answer: down, refused or too slow.',
};
const LIST_CHANGE: CodeNotes = {
  ...LIST_ROUTE,
  ...AUDITED_CHANGE,
  [ErrorCode.INVALID_INPUT]:
    'A value not of the list’s kind (an `ip` list takes an address or CIDR), a missing reason, a ttl out of range; `field` names it.',
  [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'A body that is not JSON.',
};
const listName = zod.string().describe('A list the active policy declares (`lists.<name>`).');
const LIST_CHANGE_NOTE =
  'An admin’s. Written to the audit trail before it is made (refused, 503, when it cannot be), then to the database, then told as an event; every replica’s decisions see it within 2 s.';

export const LISTS_ROUTE = declareRoute({
  method: 'get',
  path: '/lists',
  surface: 'operator',
  operationId: 'listLists',
  summary: 'The runtime lists the active policy declares, with their counts',
  responses: {
    200: {
      description: 'Each list and its unexpired entries; how current this process’s snapshot is.',
      schema: 'Lists',
    },
  },
  problems: { [ErrorCode.DATABASE_UNAVAILABLE]: LIST_ROUTE[ErrorCode.DATABASE_UNAVAILABLE]! },
});

export const LIST_ROUTE_GET = declareRoute({
  method: 'get',
  path: '/lists/{name}',
  surface: 'operator',
  operationId: 'listEntries',
  summary: 'One list’s unexpired entries, by value, a page at a time',
  params: zod.object({ name: listName }),
  query: pageQuerySchema,
  responses: { 200: { description: 'The list and a page of its entries.', schema: 'ListPage' } },
  problems: { ...LIST_ROUTE, [ErrorCode.INVALID_INPUT]: QUERY_RULE_NOTE },
});

export const ADD_LIST_ENTRY_ROUTE = declareRoute({
  method: 'post',
  path: '/lists/{name}/entries',
  surface: 'operator',
  operationId: 'addListEntry',
  summary: 'Add an entry (or replace one: its author, reason and expiry)',
  description: LIST_CHANGE_NOTE,
  params: zod.object({ name: listName }),
  body: {
    schema: { component: 'AddListEntry', schema: addEntrySchema },
    maxBytes: MAX_ENTRY_BODY_BYTES,
  },
  responses: {
    201: { description: 'The entry as kept (an `ip` entry as its network).', schema: 'ListEntry' },
  },
  problems: { ...LIST_CHANGE, [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_ENTRY_BODY_BYTES} bytes.` },
});

export const REMOVE_LIST_ENTRY_ROUTE = declareRoute({
  method: 'delete',
  path: '/lists/{name}/entries/{value}',
  surface: 'operator',
  operationId: 'removeListEntry',
  summary: 'Remove an entry, with a reason',
  description: `${LIST_CHANGE_NOTE} The reason comes as the \`reason\` query parameter or a JSON body.`,
  params: zod.object({
    name: listName,
    value: zod.string().describe('The entry (a CIDR’s `/` URL-encoded as `%2F`).'),
  }),
  query: reasonQuerySchema,
  body: {
    schema: { component: 'RemoveListEntry', schema: removeBodySchema },
    required: false,
    maxBytes: MAX_ENTRY_BODY_BYTES,
  },
  responses: { 200: { description: 'The entry removed.', schema: 'ListEntry' } },
  problems: {
    ...LIST_CHANGE,
    [ErrorCode.NOT_FOUND]: notFoundNote('No such list, or no unexpired entry of this value in it.'),
    [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_ENTRY_BODY_BYTES} bytes.`,
  },
});

export const IMPORT_LIST_ROUTE = declareRoute({
  method: 'post',
  path: '/lists/{name}/import',
  surface: 'operator',
  operationId: 'importListEntries',
  summary: 'Add many entries at once',
  description: `${LIST_CHANGE_NOTE} One audit entry for the import, one event per entry. A JSON array, or JSON lines (\`application/x-ndjson\`), of at most ${MAX_IMPORT_ENTRIES} entries; an entry without a reason or ttl takes the query's.`,
  params: zod.object({ name: listName }),
  query: importQuerySchema,
  body: {
    schema: { component: 'ListImport', schema: importBodySchema },
    maxBytes: MAX_IMPORT_BODY_BYTES,
    description: `At most ${MAX_IMPORT_BODY_BYTES} bytes.`,
    alsoAccepts: {
      'application/x-ndjson': { schema: { type: 'string', description: 'One entry object per line.' } },
    },
  },
  responses: { 201: { description: 'How many entries were added.', schema: 'ListImportResult' } },
  problems: { ...LIST_CHANGE, [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_IMPORT_BODY_BYTES} bytes.` },
});

export function listRoutes(deps: ListRoutesDeps, operations = listOperations(deps)): RouteMount {
  const clock = deps.clock ?? systemClock;
  const now = () => clock.nowMs();
  return {
    surface: 'operator',
    routes: [LISTS_ROUTE, LIST_ROUTE_GET, ADD_LIST_ENTRY_ROUTE, REMOVE_LIST_ENTRY_ROUTE, IMPORT_LIST_ROUTE],
    mount(app, edge) {
      const change = changeSteps(deps, edge, now);
      const admin = edge.requireRole('admin');
      const viewer = edge.requireRole('viewer');
      LISTS_ROUTE.mount(app, edge.operatorAuth, viewer, async (c) => c.json(await operations.overview()));
      LIST_ROUTE_GET.mount(app, edge.operatorAuth, viewer, async (c) => {
        const list = operations.list(LIST_ROUTE_GET.pathOf(c).name);
        return c.json(await operations.page(list.name, LIST_ROUTE_GET.queryOf(c)));
      });
      ADD_LIST_ENTRY_ROUTE.mount(app, edge.operatorAuth, admin, async (c) => {
        const list = operations.list(ADD_LIST_ENTRY_ROUTE.pathOf(c).name);
        const body = await ADD_LIST_ENTRY_ROUTE.bodyOf(c);
        return c.json(await operations.add(c, edge, list.name, body), 201);
      });
      REMOVE_LIST_ENTRY_ROUTE.mount(app, edge.operatorAuth, admin, async (c) => {
        const { name, value } = REMOVE_LIST_ENTRY_ROUTE.pathOf(c);
        const list = operations.list(name);
        const reason = await removeReason(c);
        return c.json(await operations.remove(c, edge, list.name, value, reason));
      });
      IMPORT_LIST_ROUTE.mount(app, edge.operatorAuth, admin, async (c) => {
        const list = operations.list(IMPORT_LIST_ROUTE.pathOf(c).name);
        const entries = await importEntries(c, edge, list, change);
        await change.audit(c, 'list.add', `${list.name}:import`, {
          entries: entries.length,
          // Every value (an import is at most MAX_IMPORT_ENTRIES): the trail says what was added.
          values: entries.map((e) => e.value),
          reasons: [...new Set(entries.map((e) => e.reason))].slice(0, 10),
        });
        await fromListStore(deps.store.add(entries));
        await change.after('list.entry_added', entries);
        return c.json({ list: list.name, added: entries.length }, 201);
      });
    },
  };
}

type ChangeSteps = ReturnType<typeof changeSteps>;

/** The steps every change shares: the entry it makes, its audit entry, what follows the write. */
function changeSteps(deps: ListRoutesDeps, edge: RouteEdge, now: () => number) {
  return {
    /** A checked entry of `list` from what an operator sent (`field`: where its value was). */
    entryOf(
      c: Context,
      list: DeclaredList,
      input: { value: string; reason: string; ttlSeconds?: number | undefined },
      field: string,
    ): ListEntry {
      const checked = normaliseListValue(list.key, input.value);
      if (!checked.ok) {
        throw new InputError(`${field} ${checked.message}`, [{ field, message: checked.message }]);
      }
      const createdMs = now();
      const ttlMs = input.ttlSeconds === undefined ? list.ttlMs : input.ttlSeconds * 1000;
      return {
        list: list.name,
        value: checked.value,
        kind: list.key,
        author: operatorNameOf(c),
        reason: input.reason,
        createdMs,
        expiresMs: ttlMs === undefined ? null : createdMs + ttlMs,
      };
    },
    /** Writes the change's audit entry; it rejects (503) when the trail cannot take it. */
    async audit(c: Context, action: AuditAction, target: string, detail: Record<string, unknown>) {
      await edge.recordChange(c, { action, target, detail });
    },
    /** This replica's snapshot brought current, and each change told as an event. */
    async after(type: RiskgateEventType, entries: readonly ListEntry[]) {
      await deps.sync.refresh().catch(() => {}); // the poll catches up; the change is committed
      const at = new Date(now()).toISOString();
      for (const e of entries) {
        const view = entryView(e);
        // Its id names the entry (one add and one removal each): a retried emit is one event. The
        // value is hashed: an id is a header, and a value may hold what no header can carry.
        const event = {
          id: `${type}:${e.list}:${eventIdPart(e.value)}:${e.createdMs}`,
          type,
          at,
          data: { list: e.list, value: e.value, kind: e.kind, author: e.author, expiresAt: view.expiresAt },
        };
        if (!(await emitCommitted(deps.events, event))) {
          deps.log({
            level: 'error',
            msg: 'list change event lost: not queued after retries',
            type,
            list: e.list,
          });
        }
      }
    },
  };
}

/** A removal's reason: the `reason` query parameter or a JSON body's (400 when neither has one). */
async function removeReason(c: Context): Promise<string> {
  const query = REMOVE_LIST_ENTRY_ROUTE.queryOf(c);
  const hasBody =
    (c.req.header('content-length') ?? '0') !== '0' || c.req.header('transfer-encoding') !== undefined;
  const reason = hasBody ? (await REMOVE_LIST_ENTRY_ROUTE.bodyOf(c)).reason : query.reason;
  if (reason === undefined) {
    throw new InputError('reason is required (the `reason` query parameter or a JSON body)', [
      { field: 'reason', message: 'is required' },
    ]);
  }
  return reason;
}

async function removeEntry(
  c: Context,
  list: DeclaredList,
  value: string,
  reason: string,
  deps: ListRoutesDeps,
  change: ChangeSteps,
): Promise<ListEntryView> {
  const checked = normaliseListValue(list.key, value);
  if (!checked.ok)
    throw new InputError(`value ${checked.message}`, [{ field: 'value', message: checked.message }]);
  const nowMs = (deps.clock ?? systemClock).nowMs();
  const existing = await fromListStore(deps.store.get(list.name, checked.value, nowMs));
  if (existing === undefined) {
    throw new RiskgateError(
      ErrorCode.NOT_FOUND,
      `No entry ${JSON.stringify(checked.value)} in list ${list.name}.`,
    );
  }
  await change.audit(c, 'list.remove', `${list.name}:${checked.value}`, { reason });
  const removed = await fromListStore(deps.store.remove(list.name, checked.value));
  if (removed === undefined) {
    throw new RiskgateError(
      ErrorCode.NOT_FOUND,
      `No entry ${JSON.stringify(checked.value)} in list ${list.name}.`,
    );
  }
  await change.after('list.entry_removed', [removed]);
  return entryView(removed);
}

/** An import's entries: a JSON array, or JSON lines (`application/x-ndjson`), each checked. */
async function importEntries(
  c: Context,
  edge: RouteEdge,
  list: DeclaredList,
  change: ChangeSteps,
): Promise<ListEntry[]> {
  const query = { data: IMPORT_LIST_ROUTE.queryOf(c) };
  let given: z.output<typeof importBodySchema>;
  if (/^application\/x-ndjson\b/i.test(c.req.header('content-type') ?? '')) {
    const lines = (await c.req.text()).split('\n').filter((l) => l.trim() !== '');
    const raw = lines.map((line, i) => {
      try {
        return JSON.parse(line) as unknown;
      } catch {
        throw new InputError(`line ${i + 1} is not JSON`, [{ field: String(i), message: 'is not JSON' }]);
      }
    });
    const parsed = importBodySchema.safeParse(raw);
    if (!parsed.success) throw edge.inputError(parsed.error, 'The entries');
    given = parsed.data;
  } else given = await IMPORT_LIST_ROUTE.bodyOf(c);
  if (given.length === 0) {
    throw new InputError('there are no entries to import', [{ field: '', message: 'is empty' }]);
  }
  const seen = new Map<string, ListEntry>();
  given.forEach((e, i) => {
    const reason = e.reason ?? query.data.reason;
    if (reason === undefined) {
      throw new InputError(`${i}.reason is required (on the entry or as the \`reason\` query parameter)`, [
        { field: `${i}.reason`, message: 'is required' },
      ]);
    }
    const entry = change.entryOf(
      c,
      list,
      { value: e.value, reason, ttlSeconds: e.ttlSeconds ?? query.data.ttlSeconds },
      `${i}.value`,
    );
    seen.set(entry.value, entry); // the last of a repeated value wins, as a later add would
  });
  if (seen.size > MAX_IMPORT_ENTRIES) throw new InputError(`at most ${MAX_IMPORT_ENTRIES} entries`);
  return [...seen.values()];
}
