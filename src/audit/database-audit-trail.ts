import { randomBytes } from 'node:crypto';
import type { FeatureMigrations, RiskgateDatabase } from '../database/database.ts';
import type {
  AuditAction,
  AuditEntry,
  AuditEntryOutcome,
  AuditFilter,
  AuditOutcomeStatus,
  AuditTrail,
} from '../operators/audit-trail.ts';
import type { OperatorRole } from '../operators/operator.ts';
import { type Clock, systemClock } from '../timing/clock.ts';

/**
 * The audit trail in the database (src/database/): one row per change (the intent, written before
 * it) and one per outcome (written after, keyed by the change's id), the same queries on SQLite and
 * PostgreSQL. Rows are only ever inserted; a reader pages newest first by id, each entry with its
 * outcome beside it (`unknown` when none was written).
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
  audit_outcome: {
    /** The `audit_entry` it settles: one outcome per change. */
    entry_id: string;
    /** `done`, `failed` or `refused`. */
    outcome: string;
    /** The `RG_ERR_*` code of a failure or refusal, or null. */
    code: string | null;
    outcome_at_ms: number;
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
  // Issue 30: the trail showed an add whose write then failed. The outcome is a row of its own
  // (insert-only, like the entries), so an entry never claims a change it cannot vouch for.
  'audit-002-outcomes': {
    async up(db) {
      await db.schema
        .createTable('audit_outcome')
        .ifNotExists()
        .addColumn('entry_id', 'text', (c) => c.primaryKey())
        .addColumn('outcome', 'text', (c) => c.notNull())
        .addColumn('code', 'text')
        .addColumn('outcome_at_ms', 'bigint', (c) => c.notNull())
        .execute();
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
type OutcomeColumns = Omit<AuditTables['audit_outcome'], 'entry_id'>;
/** An entry as read: its outcome's columns null when none was written (a left join). */
type ListedRow = AuditRow & { [K in keyof OutcomeColumns]: OutcomeColumns[K] | null };

function outcomeOf(row: ListedRow): AuditEntryOutcome {
  if (row.outcome === null || row.outcome_at_ms === null) return { status: 'unknown' };
  return {
    status: row.outcome as AuditOutcomeStatus,
    ...(row.code !== null && { code: row.code }),
    at: new Date(Number(row.outcome_at_ms)).toISOString(),
  };
}

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
  options: {
    /** Entries are dated on its wall time. Default {@link systemClock}. */
    clock?: Clock | undefined;
  } = {},
): AuditTrail {
  const db = database.db.withTables<AuditTables>();
  const clock = options.clock ?? systemClock;
  const now = () => clock.nowMs();
  const nextId = auditIdSource(now);
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
    async settle(id, outcome) {
      await db
        .insertInto('audit_outcome')
        .values({
          entry_id: id,
          outcome: outcome.status,
          code: outcome.code ?? null,
          outcome_at_ms: now(),
        })
        // One outcome per change: the first written stands.
        .onConflict((oc) => oc.column('entry_id').doNothing())
        .execute();
    },
    async list(filter: AuditFilter) {
      const limit = Math.min(Math.max(1, Math.trunc(filter.limit ?? AUDIT_PAGE_DEFAULT)), AUDIT_PAGE_MAX);
      let query = db
        .selectFrom('audit_entry')
        .leftJoin('audit_outcome', 'audit_outcome.entry_id', 'audit_entry.id')
        .selectAll('audit_entry')
        .select(['audit_outcome.outcome', 'audit_outcome.code', 'audit_outcome.outcome_at_ms']);
      if (filter.actor !== undefined) query = query.where('audit_entry.actor', '=', filter.actor);
      if (filter.action !== undefined) query = query.where('audit_entry.action', '=', filter.action);
      if (filter.target !== undefined) query = query.where('audit_entry.target', '=', filter.target);
      if (filter.cursor !== undefined) query = query.where('audit_entry.id', '<', filter.cursor);
      // One more than the page says whether there is a next one.
      const rows = (await query
        .orderBy('audit_entry.id', 'desc')
        .limit(limit + 1)
        .execute()) as ListedRow[];
      const entries = rows.slice(0, limit).map((row) => ({ ...entryOf(row), outcome: outcomeOf(row) }));
      return rows.length > limit ? { entries, nextCursor: entries.at(-1)!.id } : { entries };
    },
  };
}
