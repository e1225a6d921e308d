import { type Kysely, PostgresAdapter, sql } from 'kysely';
import type { FeatureMigrations } from '../database/database.ts';

/**
 * Policy versions (issue 33), control state beside lists and the audit trail, the same on SQLite
 * and PostgreSQL (src/database/database.ts):
 *
 * - `policy_version`: one row per version. Its content (id, name, YAML, revision, author, time,
 *   message, parent, the version it restores) is written once: a trigger on either engine refuses
 *   an UPDATE that changes any of it, and any DELETE (PostgreSQL: TRUNCATE too), so a reviewer's
 *   evidence always describes the bytes that were approved. Only `state` moves, along
 *   `POLICY_VERSION_TRANSITIONS` (checked by the store in the transition's own conditional UPDATE).
 * - `policy_active`: one row naming the active version, with a `generation` every activation bumps
 *   in its transaction: the cheap marker each replica polls (as `list_version` is for lists).
 */

/** A version's places in the promotion flow: the one list the type, the check constraint and the API read. */
export const POLICY_VERSION_STATES = [
  'draft',
  'proposed',
  'approved',
  'active',
  'retired',
  'rejected',
  'withdrawn',
] as const;
export type PolicyVersionState = (typeof POLICY_VERSION_STATES)[number];

// Types, not interfaces: kysely's withTables wants an index signature.
export type PolicyVersionTables = {
  policy_version: {
    id: string;
    name: string;
    yaml: string;
    revision: string;
    author: string;
    created_ms: number;
    message: string;
    parent_id: string | null;
    restores_id: string | null;
    state: string;
    state_changed_ms: number;
    state_changed_by: string;
  };
  policy_active: {
    id: number;
    version_id: string | null;
    generation: number;
    changed_ms: number;
    /** The approved version being rolled out beside the active one (policy-versions-002). */
    staged_version_id: string | null;
    /** `shadow` (evaluated, never served) or `percent` (served to a bucket of accounts). */
    stage: string | null;
    /** The share of accounts served the staged version, in basis points (0 to 10000). */
    stage_basis_points: number;
    /** The approved version to activate at `activate_at_ms` (epoch ms), and who scheduled it. */
    scheduled_version_id: string | null;
    activate_at_ms: number | null;
    scheduled_by: string | null;
  };
  /**
   * The evidence attached on proposal (policy-versions-003): one row per version, `pending` while
   * it is computed, then its JSON written once (a trigger refuses any later change, and a DELETE).
   */
  policy_version_evidence: {
    version_id: string;
    state: string;
    window_from_ms: number;
    window_to_ms: number;
    requested_by: string;
    requested_ms: number;
    evidence: string | null;
    completed_ms: number | null;
  };
};

/** An evidence row's states: computed, written, or failed with its reason (then written too). */
export const POLICY_EVIDENCE_STATES = ['pending', 'complete', 'failed'] as const;
export type PolicyEvidenceState = (typeof POLICY_EVIDENCE_STATES)[number];

/** The refusal both engines raise on a change to written evidence. */
export const EVIDENCE_IMMUTABLE_MESSAGE = 'policy_version_evidence is immutable once written';

/** How a staged version meets traffic: evaluated beside the active one, or served to a share of accounts. */
export type PolicyRolloutStage = 'shadow' | 'percent';
export const POLICY_ROLLOUT_STAGES: readonly PolicyRolloutStage[] = ['shadow', 'percent'];

/** The columns written once; the triggers name each. */
export const POLICY_VERSION_CONTENT_COLUMNS = [
  'id',
  'name',
  'yaml',
  'revision',
  'author',
  'created_ms',
  'message',
  'parent_id',
  'restores_id',
] as const;

/** The refusal both engines raise: the store recognises it by this text. */
export const IMMUTABLE_MESSAGE = 'policy_version content is immutable';

const changed = (prefix: 'NEW' | 'OLD', other: 'NEW' | 'OLD', op: string) =>
  POLICY_VERSION_CONTENT_COLUMNS.map((c) => `${prefix}.${c} ${op} ${other}.${c}`).join(' OR ');

export const policyVersionMigrations: FeatureMigrations = {
  'policy-versions-001-tables': {
    // biome-ignore lint/suspicious/noExplicitAny: a migration sees the database before its tables exist.
    async up(db: Kysely<any>) {
      const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
      const states = POLICY_VERSION_STATES.map((s) => `'${s}'`).join(', ');
      await db.schema
        .createTable('policy_version')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('yaml', 'text', (c) => c.notNull())
        .addColumn('revision', 'text', (c) => c.notNull())
        .addColumn('author', 'text', (c) => c.notNull())
        .addColumn('created_ms', 'bigint', (c) => c.notNull())
        .addColumn('message', 'text', (c) => c.notNull())
        .addColumn('parent_id', 'text', (c) => c.references('policy_version.id'))
        .addColumn('restores_id', 'text', (c) => c.references('policy_version.id'))
        .addColumn('state', 'text', (c) => c.notNull().check(sql.raw(`state in (${states})`)))
        .addColumn('state_changed_ms', 'bigint', (c) => c.notNull())
        .addColumn('state_changed_by', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('policy_version_created')
        .ifNotExists()
        .on('policy_version')
        .columns(['created_ms', 'id'])
        .execute();
      await db.schema
        .createTable('policy_active')
        .ifNotExists()
        .addColumn('id', 'integer', (c) => c.primaryKey())
        .addColumn('version_id', 'text', (c) => c.references('policy_version.id'))
        .addColumn('generation', 'bigint', (c) => c.notNull())
        .addColumn('changed_ms', 'bigint', (c) => c.notNull())
        .execute();
      await db
        .insertInto('policy_active')
        .values({ id: 1, version_id: null, generation: 0, changed_ms: 0 })
        .execute();
      if (postgres) {
        await sql
          .raw(
            `create or replace function policy_version_immutable() returns trigger language plpgsql as $$
begin
  -- Nested, not one OR: a DELETE's or TRUNCATE's NEW is unassigned and must not be read.
  if tg_op <> 'UPDATE' then
    raise exception '${IMMUTABLE_MESSAGE}' using errcode = 'integrity_constraint_violation';
  end if;
  if ${changed('NEW', 'OLD', 'is distinct from')} then
    raise exception '${IMMUTABLE_MESSAGE}' using errcode = 'integrity_constraint_violation';
  end if;
  return new;
end $$`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger policy_version_immutable before update or delete on policy_version
             for each row execute function policy_version_immutable()`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger policy_version_no_truncate before truncate on policy_version
             for each statement execute function policy_version_immutable()`,
          )
          .execute(db);
      } else {
        await sql
          .raw(
            `create trigger if not exists policy_version_immutable before update on policy_version
             when ${changed('NEW', 'OLD', 'is not')}
             begin select raise(abort, '${IMMUTABLE_MESSAGE}'); end`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger if not exists policy_version_no_delete before delete on policy_version
             begin select raise(abort, '${IMMUTABLE_MESSAGE}'); end`,
          )
          .execute(db);
      }
    },
  },
  'policy-versions-002-rollout': {
    // Staged and scheduled activation ride on the one `policy_active` row: every change bumps its
    // generation, so the replicas' one cheap poll sees a stage move as it sees an activation.
    // biome-ignore lint/suspicious/noExplicitAny: a migration sees the database before its tables exist.
    async up(db: Kysely<any>) {
      const stages = POLICY_ROLLOUT_STAGES.map((s) => `'${s}'`).join(', ');
      const add = (column: string, type: 'text' | 'bigint' | 'integer', check?: string) =>
        db.schema
          .alterTable('policy_active')
          .addColumn(column, type, (c) => {
            let col = c;
            if (type === 'integer') col = col.notNull().defaultTo(0);
            if (check !== undefined) col = col.check(sql.raw(check));
            return col;
          })
          .execute();
      await add('staged_version_id', 'text');
      await add('stage', 'text', `stage is null or stage in (${stages})`);
      await add('stage_basis_points', 'integer', 'stage_basis_points between 0 and 10000');
      await add('scheduled_version_id', 'text');
      await add('activate_at_ms', 'bigint');
      await add('scheduled_by', 'text');
    },
  },
  'policy-versions-003-evidence': {
    // biome-ignore lint/suspicious/noExplicitAny: a migration sees the database before its tables exist.
    async up(db: Kysely<any>) {
      const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
      const states = POLICY_EVIDENCE_STATES.map((s) => `'${s}'`).join(', ');
      await db.schema
        .createTable('policy_version_evidence')
        .ifNotExists()
        .addColumn('version_id', 'text', (c) => c.primaryKey().references('policy_version.id'))
        .addColumn('state', 'text', (c) => c.notNull().check(sql.raw(`state in (${states})`)))
        .addColumn('window_from_ms', 'bigint', (c) => c.notNull())
        .addColumn('window_to_ms', 'bigint', (c) => c.notNull())
        .addColumn('requested_by', 'text', (c) => c.notNull())
        .addColumn('requested_ms', 'bigint', (c) => c.notNull())
        .addColumn('evidence', 'text')
        .addColumn('completed_ms', 'bigint')
        .execute();
      // Written once: only a pending row may change (to its result); nothing is ever deleted.
      if (postgres) {
        await sql
          .raw(
            `create or replace function policy_version_evidence_immutable() returns trigger language plpgsql as $$
begin
  if tg_op <> 'UPDATE' then
    raise exception '${EVIDENCE_IMMUTABLE_MESSAGE}' using errcode = 'integrity_constraint_violation';
  end if;
  if OLD.state <> 'pending' or NEW.version_id is distinct from OLD.version_id
     or NEW.window_from_ms is distinct from OLD.window_from_ms or NEW.window_to_ms is distinct from OLD.window_to_ms
     or NEW.requested_by is distinct from OLD.requested_by or NEW.requested_ms is distinct from OLD.requested_ms then
    raise exception '${EVIDENCE_IMMUTABLE_MESSAGE}' using errcode = 'integrity_constraint_violation';
  end if;
  return new;
end $$`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger policy_version_evidence_immutable before update or delete on policy_version_evidence
             for each row execute function policy_version_evidence_immutable()`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger policy_version_evidence_no_truncate before truncate on policy_version_evidence
             for each statement execute function policy_version_evidence_immutable()`,
          )
          .execute(db);
      } else {
        await sql
          .raw(
            `create trigger if not exists policy_version_evidence_immutable before update on policy_version_evidence
             when OLD.state <> 'pending' or NEW.version_id is not OLD.version_id
               or NEW.window_from_ms is not OLD.window_from_ms or NEW.window_to_ms is not OLD.window_to_ms
               or NEW.requested_by is not OLD.requested_by or NEW.requested_ms is not OLD.requested_ms
             begin select raise(abort, '${EVIDENCE_IMMUTABLE_MESSAGE}'); end`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger if not exists policy_version_evidence_no_delete before delete on policy_version_evidence
             begin select raise(abort, '${EVIDENCE_IMMUTABLE_MESSAGE}'); end`,
          )
          .execute(db);
      }
    },
  },
};
