import type { Kysely } from 'kysely';
import type { FeatureMigrations } from '../database/database.ts';

/**
 * Records the database refused (a poison row: a U+0000 in a text on PostgreSQL, a value past a
 * limit), set aside by the writer (src/decision-store/decision-store-writer.ts) so the rest of its
 * batch is written: `decision_reject` keeps each one's raw record (JSON, where a U+0000 is the
 * escape `\u0000`, which every engine stores) and the database's error, for a look
 * (docs/operations.md, "State files"). Bounded: past `MAX_REJECTS` the oldest go.
 */

export type RejectTables = {
  decision_reject: {
    id: string;
    at_ms: number;
    decision_id: string | null;
    error: string;
    record: string;
  };
};

/** Most rejects kept. */
export const MAX_REJECTS = 1000;

export const rejectMigrations: FeatureMigrations = {
  'decisions-004-rejects': {
    async up(db) {
      await db.schema
        .createTable('decision_reject')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('at_ms', 'bigint', (c) => c.notNull())
        .addColumn('decision_id', 'text')
        .addColumn('error', 'text', (c) => c.notNull())
        .addColumn('record', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('decision_reject_at')
        .ifNotExists()
        .on('decision_reject')
        .column('at_ms')
        .execute();
    },
  },
};

/** One refused record as the writer hands it over. */
export interface Reject {
  record: object;
  error: string;
  atMs: number;
}

/** Keeps `rejects` in `decision_reject`, then trims the table to its newest `MAX_REJECTS`. */
export async function keepRejects(db: Kysely<RejectTables>, rejects: readonly Reject[]): Promise<void> {
  if (rejects.length === 0) return;
  const rows = rejects.map((r) => {
    const id = (r.record as { decisionId?: unknown }).decisionId;
    return {
      id: crypto.randomUUID(),
      at_ms: r.atMs,
      decision_id: typeof id === 'string' ? JSON.stringify(id).slice(1, -1) : null,
      // Escaped as JSON: the very character the database refused is stored as text it takes.
      error: JSON.stringify(r.error).slice(1, -1),
      record: JSON.stringify(r.record),
    };
  });
  await db.insertInto('decision_reject').values(rows).execute();
  const keep = await db
    .selectFrom('decision_reject')
    .select('at_ms')
    .orderBy('at_ms', 'desc')
    .offset(MAX_REJECTS)
    .limit(1)
    .executeTakeFirst();
  if (keep !== undefined) await db.deleteFrom('decision_reject').where('at_ms', '<=', keep.at_ms).execute();
}
