import { CompiledQuery, type Kysely, type Selectable, type SqlBool, sql } from 'kysely';
import type { DatabaseEngine } from '../database/database.ts';
import { queryTemplate, queryTemplates } from '../database/query-template.ts';
import { type DeliveredCheck, WEBHOOK_ACTION_TYPE } from './outbox-store.ts';
import type { OutboxTables } from './outbox-tables.ts';

/**
 * The outbox's hot statements (an append's insert, the claim, a completion, a confirmation of
 * outcome lines), each built by kysely once per shape and filled per call
 * (src/database/query-template.ts says why): the same SQL text kysely would compile each time.
 */

export type OutboxRow = Selectable<OutboxTables['outbox_entry']>;

/** An entry as an append inserts it. */
export interface InsertedRow {
  id: string;
  ordering_key: string;
  action_type: string;
  spec: string;
  created_at: number;
  horizon_start: number;
  next_attempt_at: number;
  updated_at: number;
}

/** The inserted columns, in the order an insert template takes their values. */
const INSERTED: ReadonlyArray<keyof InsertedRow> = [
  'id',
  'ordering_key',
  'action_type',
  'spec',
  'created_at',
  'horizon_start',
  'next_attempt_at',
  'updated_at',
];

export interface ClaimArgs {
  owner: string;
  /** Lease end, whole milliseconds. */
  until: number;
  nowMs: number;
  limit: number;
}

export interface OutboxStatements {
  /** `rows` as one insert (an id already there is not added), returning the ids it added. */
  insert(rows: readonly InsertedRow[]): CompiledQuery<{ id: string }>;
  /** The claim (`DatabaseOutboxStore.claim` says what it takes), passing over webhooks when `skipWebhooks`. */
  claim(args: ClaimArgs, skipWebhooks: boolean): CompiledQuery<OutboxRow>;
  /** `ids` held by `owner` delivered at `nowMs`, their outcome lines due; returning the ids it completed. */
  complete(ids: readonly string[], owner: string, nowMs: number): CompiledQuery<{ id: string }>;
  /** The outcome lines of `ids` confirmed written. */
  markLogged(ids: readonly string[]): CompiledQuery;
  /**
   * Whether an entry is delivered, as a condition of a companion's statement (`DeliveryCompanion`)
   * run after `complete` in its transaction: on SQLite a statement after it in the script; on
   * PostgreSQL a part of the same statement (`completeWith`), which sees what `complete` returned.
   */
  delivered: DeliveredCheck;
  /**
   * PostgreSQL: `complete` and the companions' statements as one statement (data-modifying `WITH`
   * parts, one round trip and one commit), returning what `complete` returns.
   */
  completeWith(
    complete: CompiledQuery<{ id: string }>,
    records: readonly CompiledQuery[],
  ): CompiledQuery<{ id: string }>;
}

/**
 * `complete` and `records` as one PostgreSQL statement: `WITH completed AS (complete), r0 AS
 * (record 0), … SELECT id FROM completed`. The parts see one snapshot, so a record's condition
 * reads `completed` (what the completion returned), never the table. Each part's `$n` are
 * renumbered after the parts before it: these statements have no `$` but their parameters.
 */
function completeWith(
  complete: CompiledQuery<{ id: string }>,
  records: readonly CompiledQuery[],
): CompiledQuery<{ id: string }> {
  const parameters: unknown[] = [];
  const part = (q: CompiledQuery) => {
    const offset = parameters.length;
    parameters.push(...q.parameters);
    return q.sql.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + offset}`);
  };
  const parts = [`completed AS (${part(complete)})`, ...records.map((r, i) => `r${i} AS (${part(r)})`)];
  const text = `WITH ${parts.join(', ')} SELECT id FROM completed`;
  return CompiledQuery.raw(text, parameters) as CompiledQuery<{ id: string }>;
}

export function outboxStatements(db: Kysely<OutboxTables>, engine: DatabaseEngine): OutboxStatements {
  const insert = queryTemplates<{ values: unknown[] }, { id: string }>((h, count) => {
    const values = h.list('values', count * INSERTED.length);
    const rows = Array.from(
      { length: count },
      (_, r) =>
        Object.fromEntries(
          INSERTED.map((column, c) => [column, values[r * INSERTED.length + c]]),
        ) as unknown as InsertedRow,
    );
    return db
      .insertInto('outbox_entry')
      .values(rows)
      .onConflict((oc) => oc.column('id').doNothing())
      .returning('id');
  });
  // PostgreSQL: rows another replica is claiming are skipped, not waited for, and this statement's
  // locks keep them from the others until the lease is written. SQLite: its one writer makes the
  // statement atomic against every other process.
  const lock = engine === 'postgres' ? sql`FOR UPDATE OF o SKIP LOCKED` : sql``;
  const claim = (skipWebhooks: boolean) =>
    queryTemplate<ClaimArgs, OutboxRow>((h) => {
      const skip = skipWebhooks ? sql`AND o.action_type <> ${WEBHOOK_ACTION_TYPE}` : sql``;
      const now = h.value('nowMs');
      const query = sql<OutboxRow>`UPDATE outbox_entry SET lease_owner = ${h.value('owner')},
          lease_until = ${h.value('until')}, attempts = attempts + 1, updated_at = ${now}
        WHERE seq IN (SELECT o.seq FROM outbox_entry o
          WHERE o.status = 'pending' AND o.next_attempt_at <= ${now} AND o.lease_until <= ${now} ${skip}
            AND NOT EXISTS (SELECT 1 FROM outbox_entry e WHERE e.ordering_key = o.ordering_key
                            AND e.status = 'pending' AND (e.seq < o.seq OR e.lease_until > ${now}))
          ORDER BY o.seq LIMIT ${h.value('limit')} ${lock})
        RETURNING *`;
      return { compile: () => query.compile(db) };
    });
  const claims = [claim(false), claim(true)] as const;
  const complete = queryTemplates<{ ids: readonly string[]; owner: string; nowMs: number }, { id: string }>(
    (h, count) =>
      db
        .updateTable('outbox_entry')
        .set({ status: 'delivered', lease_until: 0, logged: 0, updated_at: h.value('nowMs') })
        .where('id', 'in', h.list('ids', count))
        .where('lease_owner', '=', h.value('owner'))
        .where('status', '=', 'pending')
        .returning('id'),
  );
  const markLogged = queryTemplates<{ ids: readonly string[] }, unknown>((h, count) =>
    db.updateTable('outbox_entry').set({ logged: 1 }).where('id', 'in', h.list('ids', count)),
  );
  return {
    insert: (rows) =>
      insert({ values: rows.flatMap((row) => INSERTED.map((column) => row[column])) }, rows.length),
    claim: (args, skipWebhooks) => claims[skipWebhooks ? 1 : 0](args),
    complete: (ids, owner, nowMs) => complete({ ids, owner, nowMs }, ids.length),
    markLogged: (ids) => markLogged({ ids }, ids.length),
    delivered:
      engine === 'postgres'
        ? (id) => sql<SqlBool>`EXISTS (SELECT 1 FROM completed d WHERE d.id = ${id})`
        : (id) =>
            sql<SqlBool>`EXISTS (SELECT 1 FROM outbox_entry d WHERE d.id = ${id} AND d.status = 'delivered')`,
    completeWith,
  };
}
