import type { Kysely } from 'kysely';
import type { FeatureMigrations, RiskgateDatabase } from '../database/database.ts';
import type { SnoozeEntity } from '../policy-input/rule-snooze.ts';
import type { SnoozeRow } from './snooze-snapshot.ts';

/**
 * The rule snoozes' tables, the same on SQLite and PostgreSQL (control state: the system of
 * record, src/database/database.ts):
 *
 * - `rule_snooze`: one row per snooze, never rewritten but to end it early (`ended_ms`,
 *   `ended_by`, `end_reason`): what was snoozed, by whom and why stays readable after it ends.
 *   Times are epoch milliseconds.
 * - `rule_snooze_version`: one row whose `version` every change bumps in the change's
 *   transaction: the marker each replica polls (src/lists/list-sync.ts, `PolledSnapshot`).
 */

// Types, not interfaces: kysely's withTables wants an index signature.
export type SnoozeTables = {
  rule_snooze: {
    id: string;
    rule_id: string;
    entity: string;
    value: string;
    author: string;
    reason: string;
    created_ms: number;
    until_ms: number;
    ended_ms: number | null;
    ended_by: string | null;
    end_reason: string | null;
  };
  rule_snooze_version: { id: number; version: number };
};

export const snoozeMigrations: FeatureMigrations = {
  'snoozes-001-tables': {
    async up(db) {
      await db.schema
        .createTable('rule_snooze')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('rule_id', 'text', (c) => c.notNull())
        .addColumn('entity', 'text', (c) => c.notNull())
        .addColumn('value', 'text', (c) => c.notNull())
        .addColumn('author', 'text', (c) => c.notNull())
        .addColumn('reason', 'text', (c) => c.notNull())
        .addColumn('created_ms', 'bigint', (c) => c.notNull())
        .addColumn('until_ms', 'bigint', (c) => c.notNull())
        .addColumn('ended_ms', 'bigint')
        .addColumn('ended_by', 'text')
        .addColumn('end_reason', 'text')
        .execute();
      await db.schema
        .createIndex('rule_snooze_rule')
        .ifNotExists()
        .on('rule_snooze')
        .columns(['rule_id', 'until_ms'])
        .execute();
      await db.schema
        .createTable('rule_snooze_version')
        .ifNotExists()
        .addColumn('id', 'integer', (c) => c.primaryKey())
        .addColumn('version', 'bigint', (c) => c.notNull())
        .execute();
      await db
        .insertInto('rule_snooze_version' as never)
        .values({ id: 1, version: 0 } as never)
        .execute();
    },
  },
};

/** One snooze as the API shows it (times epoch ms here; the view makes them RFC 3339). */
export interface Snooze {
  id: string;
  ruleId: string;
  entity: SnoozeEntity;
  value: string;
  author: string;
  reason: string;
  createdMs: number;
  untilMs: number;
  endedMs: number | null;
  endedBy: string | null;
  endReason: string | null;
}

/** Which snoozes a listing wants: active ones at `nowMs`, of a rule and/or an entity's value. */
export interface SnoozeFilter {
  nowMs: number;
  ruleId?: string | undefined;
  entity?: SnoozeEntity | undefined;
  value?: string | undefined;
  limit: number;
}

/** The snoozes' queries, written once for both engines. */
export class SnoozeStore {
  readonly #db: Kysely<SnoozeTables>;

  constructor(database: RiskgateDatabase) {
    this.#db = database.db.withTables<SnoozeTables>();
  }

  /** The change marker: bumped by every change. */
  async version(): Promise<number> {
    const row = await this.marker().executeTakeFirst();
    return Number(row?.version ?? 0);
  }

  /** The change marker's query (src/database/marker-poll.ts reads it with the others). */
  marker() {
    return this.#db.selectFrom('rule_snooze_version').select('version').where('id', '=', 1);
  }

  /** Every snooze active at `nowMs`, and the version they are as of (read in one transaction). */
  async loadActive(nowMs: number): Promise<{ version: number; entries: SnoozeRow[] }> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('rule_snooze_version')
        .select('version')
        .where('id', '=', 1)
        .executeTakeFirst();
      const rows = await trx
        .selectFrom('rule_snooze')
        .select(['id', 'rule_id', 'entity', 'value', 'until_ms'])
        .where('ended_ms', 'is', null)
        .where('until_ms', '>', nowMs)
        .execute();
      return {
        version: Number(row?.version ?? 0),
        entries: rows.map((r) => ({
          id: r.id,
          ruleId: r.rule_id,
          entity: r.entity as SnoozeEntity,
          value: r.value,
          untilMs: Number(r.until_ms),
        })),
      };
    });
  }

  /** Adds a snooze and bumps the version, in one transaction. */
  async add(s: Snooze): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      await trx
        .insertInto('rule_snooze')
        .values({
          id: s.id,
          rule_id: s.ruleId,
          entity: s.entity,
          value: s.value,
          author: s.author,
          reason: s.reason,
          created_ms: s.createdMs,
          until_ms: s.untilMs,
          ended_ms: null,
          ended_by: null,
          end_reason: null,
        })
        .execute();
      await bump(trx);
    });
  }

  /**
   * Ends an active snooze early (it stays, ended, for the record); undefined when there is no
   * active snooze `id` at `nowMs`. Bumps the version when it ended one.
   */
  async end(id: string, nowMs: number, by: string, reason: string): Promise<Snooze | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable('rule_snooze')
        .set({ ended_ms: nowMs, ended_by: by, end_reason: reason })
        .where('id', '=', id)
        .where('ended_ms', 'is', null)
        .where('until_ms', '>', nowMs)
        .returningAll()
        .executeTakeFirst();
      if (row === undefined) return undefined;
      await bump(trx);
      return snoozeOf(row);
    });
  }

  /** One snooze, active or not. */
  async get(id: string): Promise<Snooze | undefined> {
    const row = await this.#db.selectFrom('rule_snooze').selectAll().where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : snoozeOf(row);
  }

  /** Active snoozes matching `f`, the ones ending soonest first. */
  async active(f: SnoozeFilter): Promise<Snooze[]> {
    let q = this.#db
      .selectFrom('rule_snooze')
      .selectAll()
      .where('ended_ms', 'is', null)
      .where('until_ms', '>', f.nowMs);
    if (f.ruleId !== undefined) q = q.where('rule_id', '=', f.ruleId);
    if (f.entity !== undefined) q = q.where('entity', '=', f.entity);
    if (f.value !== undefined) q = q.where('value', '=', f.value);
    const rows = await q.orderBy('until_ms').orderBy('id').limit(f.limit).execute();
    return rows.map(snoozeOf);
  }
}

async function bump(trx: Kysely<SnoozeTables>): Promise<void> {
  await trx
    .updateTable('rule_snooze_version')
    .set((eb) => ({ version: eb('version', '+', 1) }))
    .where('id', '=', 1)
    .execute();
}

function snoozeOf(r: SnoozeTables['rule_snooze']): Snooze {
  return {
    id: r.id,
    ruleId: r.rule_id,
    entity: r.entity as SnoozeEntity,
    value: r.value,
    author: r.author,
    reason: r.reason,
    createdMs: Number(r.created_ms),
    untilMs: Number(r.until_ms),
    endedMs: r.ended_ms === null ? null : Number(r.ended_ms),
    endedBy: r.ended_by,
    endReason: r.end_reason,
  };
}
