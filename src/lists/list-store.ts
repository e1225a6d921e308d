import type { Kysely } from 'kysely';
import type { FeatureMigrations, RiskgateDatabase } from '../database/database.ts';
import type { SnapshotEntry } from './list-snapshot.ts';

/**
 * The runtime lists' tables, the same on SQLite and PostgreSQL (src/database/database.ts):
 *
 * - `list_entry`: one row per entry, keyed by list and canonical value (adding it again replaces
 *   its author, reason and expiry). Times are epoch milliseconds; `expires_ms` null never expires.
 * - `list_version`: one row whose `version` every change bumps in the change's transaction: the
 *   cheap marker each replica polls to know its snapshot is current (src/lists/list-sync.ts).
 */

// Types, not interfaces: kysely's withTables wants an index signature.
export type ListTables = {
  list_entry: {
    list: string;
    value: string;
    kind: string;
    author: string;
    reason: string;
    created_ms: number;
    expires_ms: number | null;
  };
  list_version: { id: number; version: number };
};

export const listMigrations: FeatureMigrations = {
  'lists-001-tables': {
    async up(db) {
      await db.schema
        .createTable('list_entry')
        .ifNotExists()
        .addColumn('list', 'text', (c) => c.notNull())
        .addColumn('value', 'text', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('author', 'text', (c) => c.notNull())
        .addColumn('reason', 'text', (c) => c.notNull())
        .addColumn('created_ms', 'bigint', (c) => c.notNull())
        .addColumn('expires_ms', 'bigint')
        .addPrimaryKeyConstraint('list_entry_pk', ['list', 'value'])
        .execute();
      await db.schema
        .createTable('list_version')
        .ifNotExists()
        .addColumn('id', 'integer', (c) => c.primaryKey())
        .addColumn('version', 'bigint', (c) => c.notNull())
        .execute();
      await db
        .insertInto('list_version' as never)
        .values({ id: 1, version: 0 } as never)
        .execute();
    },
  },
};

/** One entry as the API shows it. */
export interface ListEntry {
  list: string;
  value: string;
  kind: string;
  author: string;
  reason: string;
  createdMs: number;
  expiresMs: number | null;
}

/** Rows per insert statement of an import (7 parameters each, far below either engine's limit). */
const INSERT_CHUNK = 500;

/** The lists' queries, written once for both engines. */
export class ListStore {
  readonly #db: Kysely<ListTables>;

  constructor(database: RiskgateDatabase) {
    this.#db = database.db.withTables<ListTables>();
  }

  /** The change marker's query (src/database/marker-poll.ts reads it with the others). */
  marker() {
    return this.#db.selectFrom('list_version').select('version').where('id', '=', 1);
  }

  /** The change marker: bumped by every change. */
  async version(): Promise<number> {
    const row = await this.marker().executeTakeFirst();
    return Number(row?.version ?? 0);
  }

  /** Every entry not expired at `nowMs`, and the version they are as of (read in one transaction). */
  async loadActive(nowMs: number): Promise<{ version: number; entries: SnapshotEntry[] }> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('list_version')
        .select('version')
        .where('id', '=', 1)
        .executeTakeFirst();
      const rows = await trx
        .selectFrom('list_entry')
        .select(['list', 'value', 'kind', 'expires_ms'])
        .where((eb) => eb.or([eb('expires_ms', 'is', null), eb('expires_ms', '>', nowMs)]))
        .execute();
      return {
        version: Number(row?.version ?? 0),
        entries: rows.map((r) => ({
          list: r.list,
          value: r.value,
          kind: r.kind,
          expiresMs: r.expires_ms === null ? null : Number(r.expires_ms),
        })),
      };
    });
  }

  /** Adds (or replaces) `entries` and bumps the version, in one transaction. */
  async add(entries: readonly ListEntry[]): Promise<void> {
    if (entries.length === 0) return;
    await this.#db.transaction().execute(async (trx) => {
      for (let i = 0; i < entries.length; i += INSERT_CHUNK) {
        const rows = entries.slice(i, i + INSERT_CHUNK).map((e) => ({
          list: e.list,
          value: e.value,
          kind: e.kind,
          author: e.author,
          reason: e.reason,
          created_ms: e.createdMs,
          expires_ms: e.expiresMs,
        }));
        await trx
          .insertInto('list_entry')
          .values(rows)
          .onConflict((oc) =>
            oc.columns(['list', 'value']).doUpdateSet((eb) => ({
              kind: eb.ref('excluded.kind'),
              author: eb.ref('excluded.author'),
              reason: eb.ref('excluded.reason'),
              created_ms: eb.ref('excluded.created_ms'),
              expires_ms: eb.ref('excluded.expires_ms'),
            })),
          )
          .execute();
      }
      await trx
        .updateTable('list_version')
        .set((eb) => ({ version: eb('version', '+', 1) }))
        .where('id', '=', 1)
        .execute();
    });
  }

  /** Removes an entry; false when there was none. Bumps the version when it removed one. */
  async remove(list: string, value: string): Promise<ListEntry | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .deleteFrom('list_entry')
        .where('list', '=', list)
        .where('value', '=', value)
        .returningAll()
        .executeTakeFirst();
      if (row === undefined) return undefined;
      await trx
        .updateTable('list_version')
        .set((eb) => ({ version: eb('version', '+', 1) }))
        .where('id', '=', 1)
        .execute();
      return entryOf(row);
    });
  }

  /** One page of `list`'s unexpired entries, by value, after `after`. */
  async page(list: string, nowMs: number, limit: number, after?: string): Promise<ListEntry[]> {
    let q = this.#db
      .selectFrom('list_entry')
      .selectAll()
      .where('list', '=', list)
      .where((eb) => eb.or([eb('expires_ms', 'is', null), eb('expires_ms', '>', nowMs)]));
    if (after !== undefined) q = q.where('value', '>', after);
    const rows = await q.orderBy('value').limit(limit).execute();
    return rows.map(entryOf);
  }

  /** One unexpired entry. */
  async get(list: string, value: string, nowMs: number): Promise<ListEntry | undefined> {
    const row = await this.#db
      .selectFrom('list_entry')
      .selectAll()
      .where('list', '=', list)
      .where('value', '=', value)
      .where((eb) => eb.or([eb('expires_ms', 'is', null), eb('expires_ms', '>', nowMs)]))
      .executeTakeFirst();
    return row === undefined ? undefined : entryOf(row);
  }

  /** Unexpired entries per list. */
  async counts(nowMs: number): Promise<Map<string, number>> {
    const rows = await this.#db
      .selectFrom('list_entry')
      .select((eb) => ['list', eb.fn.countAll<number>().as('n')])
      .where((eb) => eb.or([eb('expires_ms', 'is', null), eb('expires_ms', '>', nowMs)]))
      .groupBy('list')
      .execute();
    return new Map(rows.map((r) => [r.list, Number(r.n)]));
  }

  /** Deletes entries that expired before `beforeMs` (no version bump: they match nothing already). */
  async purgeExpired(beforeMs: number): Promise<number> {
    const result = await this.#db
      .deleteFrom('list_entry')
      .where('expires_ms', '<', beforeMs)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

function entryOf(r: ListTables['list_entry']): ListEntry {
  return {
    list: r.list,
    value: r.value,
    kind: r.kind,
    author: r.author,
    reason: r.reason,
    createdMs: Number(r.created_ms),
    expiresMs: r.expires_ms === null ? null : Number(r.expires_ms),
  };
}
