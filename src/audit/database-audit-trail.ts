import { randomBytes } from 'node:crypto';
import type { FeatureMigrations, RiskgateDatabase } from '../database/database.ts';
import type { AuditAction, AuditEntry, AuditFilter, AuditTrail } from '../operators/audit-trail.ts';
import type { OperatorRole } from '../operators/operator.ts';

/**
 * The audit trail in the database (src/database/): one row per change, the same queries on SQLite
 * and PostgreSQL. Entries are only ever inserted; a reader pages newest first by id.
 */

// A type, not an interface: kysely's withTables wants an index signature.
export type AuditTables = {
  audit_entry: {
    /** 12 hex digits of epoch milliseconds, 4 of a per-process sequence, 8 random: sorts by time. */
    id: string;
    at_ms: number;
    actor: string;
    role: string;
    key_id: string;
    action: string;
    target: string;
    from_address: string;
    /** JSON, or null. */
    detail: string | null;
  };
};

export const auditMigrations: FeatureMigrations = {
  'audit-001-entries': {
    async up(db) {
      await db.schema
        .createTable('audit_entry')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('at_ms', 'bigint', (c) => c.notNull())
        .addColumn('actor', 'text', (c) => c.notNull())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('key_id', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('target', 'text', (c) => c.notNull())
        .addColumn('from_address', 'text', (c) => c.notNull())
        .addColumn('detail', 'text')
        .execute();
      // Each filter pages by id within its value.
      for (const column of ['actor', 'action', 'target'] as const) {
        await db.schema
          .createIndex(`audit_entry_${column}_id`)
          .ifNotExists()
          .on('audit_entry')
          .columns([column, 'id'])
          .execute();
      }
    },
  },
};

/** Default and largest page, entries. */
export const AUDIT_PAGE_DEFAULT = 50;
export const AUDIT_PAGE_MAX = 500;

/** An audit entry id: what a cursor is too. */
export const AUDIT_ID = /^[0-9a-f]{24}$/;

/**
 * Ids sortable by time: the millisecond, then a sequence within this process (two entries of one
 * millisecond keep their order), then random bits (two replicas' entries of one millisecond never
 * collide). Lower-case hex: byte order and any collation agree.
 */
function auditIdSource(now: () => number): () => { id: string; atMs: number } {
  let lastMs = 0;
  let seq = 0;
  return () => {
    // A clock stepping back must not sort a later entry before an earlier one of this process.
    const atMs = Math.max(now(), lastMs);
    seq = atMs === lastMs ? seq + 1 : 0;
    if (seq > 0xffff) throw new Error('more than 65536 audit entries in one millisecond');
    lastMs = atMs;
    const id = `${atMs.toString(16).padStart(12, '0')}${seq.toString(16).padStart(4, '0')}${randomBytes(4).toString('hex')}`;
    return { id, atMs };
  };
}

type AuditRow = AuditTables['audit_entry'];

function entryOf(row: AuditRow): AuditEntry {
  return {
    id: row.id,
    // PostgreSQL hands bigint columns back as strings.
    at: new Date(Number(row.at_ms)).toISOString(),
    actor: row.actor,
    role: row.role as OperatorRole,
    keyId: row.key_id,
    action: row.action as AuditAction,
    target: row.target,
    from: row.from_address,
    ...(row.detail !== null && { detail: JSON.parse(row.detail) as Record<string, unknown> }),
  };
}

/** The audit trail over an open database (migrated with `auditMigrations`). */
export function databaseAuditTrail(
  database: RiskgateDatabase,
  options: { now?: () => number } = {},
): AuditTrail {
  const db = database.db.withTables<AuditTables>();
  const nextId = auditIdSource(options.now ?? Date.now);
  return {
    async record(change) {
      const { id, atMs } = nextId();
      const row: AuditRow = {
        id,
        at_ms: atMs,
        actor: change.actor,
        role: change.role,
        key_id: change.keyId,
        action: change.action,
        target: change.target,
        from_address: change.from,
        detail: change.detail === undefined ? null : JSON.stringify(change.detail),
      };
      await db.insertInto('audit_entry').values(row).execute();
      return entryOf(row);
    },
    async list(filter: AuditFilter) {
      const limit = Math.min(Math.max(1, Math.trunc(filter.limit ?? AUDIT_PAGE_DEFAULT)), AUDIT_PAGE_MAX);
      let query = db.selectFrom('audit_entry').selectAll();
      if (filter.actor !== undefined) query = query.where('actor', '=', filter.actor);
      if (filter.action !== undefined) query = query.where('action', '=', filter.action);
      if (filter.target !== undefined) query = query.where('target', '=', filter.target);
      if (filter.cursor !== undefined) query = query.where('id', '<', filter.cursor);
      // One more than the page says whether there is a next one.
      const rows = await query
        .orderBy('id', 'desc')
        .limit(limit + 1)
        .execute();
      const entries = rows.slice(0, limit).map(entryOf);
      return rows.length > limit ? { entries, nextCursor: entries.at(-1)!.id } : { entries };
    },
  };
}
