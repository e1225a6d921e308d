import { randomBytes } from 'node:crypto';
import type { Kysely, Transaction, Updateable } from 'kysely';
import type { RiskgateDatabase } from '../database/database.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { policyRevision } from '../policy/policy-compiler.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import {
  IMMUTABLE_MESSAGE,
  type PolicyRolloutStage,
  type PolicyVersionState,
  type PolicyVersionTables,
} from './policy-version-tables.ts';

type ActiveChanges = Updateable<PolicyVersionTables['policy_active']>;
/** `policy_active` with no version staged. */
const NO_STAGE = { staged_version_id: null, stage: null, stage_basis_points: 0 } satisfies ActiveChanges;
/** `policy_active` with no activation scheduled. */
const NO_SCHEDULE = {
  scheduled_version_id: null,
  activate_at_ms: null,
  scheduled_by: null,
} satisfies ActiveChanges;

/** One version as the API shows it. */
export interface PolicyVersion {
  id: string;
  /** The policy's `name` as the YAML declares it. */
  name: string;
  yaml: string;
  /** The content hash every decision reports (`policyRevision`). */
  revision: string;
  author: string;
  createdMs: number;
  message: string;
  /** The version this one was made from (the active one at the time), null for the first. */
  parentId: string | null;
  /** A revert: the earlier version whose YAML this one carries again. */
  restoresId: string | null;
  state: PolicyVersionState;
  stateChangedMs: number;
  stateChangedBy: string;
}

/** What a new version is made of: the YAML and who says why. */
export interface NewPolicyVersion {
  name: string;
  yaml: string;
  author: string;
  message: string;
  parentId?: string | null;
}

/**
 * The steps of the promotion flow, by the state each starts from. `active -> retired` is no
 * operator's step: activating another version retires the active one in the same transaction.
 */
export const POLICY_VERSION_TRANSITIONS = {
  propose: { from: ['draft'], to: 'proposed' },
  approve: { from: ['proposed'], to: 'approved' },
  reject: { from: ['proposed'], to: 'rejected' },
  withdraw: { from: ['draft', 'proposed', 'approved'], to: 'withdrawn' },
  activate: { from: ['approved'], to: 'active' },
} as const satisfies Record<string, { from: readonly PolicyVersionState[]; to: PolicyVersionState }>;

export type PolicyVersionStep = keyof typeof POLICY_VERSION_TRANSITIONS;

/** Which version is active, and the marker every activation bumps (polled by each replica). */
export interface ActivePolicyVersion {
  generation: number;
  version: PolicyVersion | undefined;
}

/** A version rolled out beside the active one: evaluated in shadow, or served to a share of accounts. */
export interface StagedPolicyVersion {
  version: PolicyVersion;
  stage: PolicyRolloutStage;
  /** The share of accounts (by `rolloutBucket`) served the staged version, in basis points (0 to 10000); 0 in shadow. */
  basisPoints: number;
}

/** An approved version to be activated once the clock passes `atMs`. */
export interface ScheduledPolicyActivation {
  versionId: string;
  /** Epoch milliseconds. */
  atMs: number;
  /** Who scheduled it: the activation is made in their name. */
  by: string;
}

/** Everything a replica serves from, read together: what the `generation` marker stands for. */
export interface ServedPolicyVersions {
  generation: number;
  active: PolicyVersion | undefined;
  staged?: StagedPolicyVersion;
  scheduled?: ScheduledPolicyActivation;
}

/** A rollout stage as asked for: shadow, or a percentage of accounts (0 < percent < 100, 0.01 steps). */
export type RolloutRequest = { stage: 'shadow' } | { stage: 'percent'; percent: number };

export interface PolicyVersionStoreOptions {
  /** Dates versions, steps and schedules (wall time). Default {@link systemClock}. */
  clock?: Clock | undefined;
  /**
   * Lets a version's author approve it (a single operator's installation). Default false: an
   * approval needs an admin other than the author (four eyes).
   */
  allowSelfApproval?: boolean;
}

type Row = PolicyVersionTables['policy_version'];
type Tx = Kysely<PolicyVersionTables> | Transaction<PolicyVersionTables>;

function versionOf(row: Row): PolicyVersion {
  return {
    id: row.id,
    name: row.name,
    yaml: row.yaml,
    revision: row.revision,
    author: row.author,
    createdMs: Number(row.created_ms),
    message: row.message,
    parentId: row.parent_id,
    restoresId: row.restores_id,
    state: row.state as PolicyVersionState,
    stateChangedMs: Number(row.state_changed_ms),
    stateChangedBy: row.state_changed_by,
  };
}

/** Whether `error` is a database's refusal to change a version's content (either engine's trigger). */
export function isImmutableRefusal(error: unknown): boolean {
  return String((error as Error | undefined)?.message ?? '').includes(IMMUTABLE_MESSAGE);
}

/**
 * The policy versions' queries, written once for both engines. There is no method that changes a
 * version's content, and the database refuses one anyway (policy-version-tables.ts); a step moves
 * `state` with a conditional UPDATE (`where state in from`), so two operators racing on one
 * version see one succeed and the other `RG_ERR_POLICY_VERSION_CONFLICT`.
 */
export class PolicyVersionStore {
  readonly #db: Kysely<PolicyVersionTables>;
  readonly #now: () => number;
  readonly #allowSelfApproval: boolean;

  constructor(database: RiskgateDatabase, options: PolicyVersionStoreOptions = {}) {
    this.#db = database.db.withTables<PolicyVersionTables>();
    const clock = options.clock ?? systemClock;
    this.#now = () => clock.nowMs();
    this.#allowSelfApproval = options.allowSelfApproval ?? false;
  }

  /** Whether an author may approve their own version (the setting, for the audit trail). */
  get allowSelfApproval(): boolean {
    return this.#allowSelfApproval;
  }

  /** Stores a new draft. */
  async create(input: NewPolicyVersion): Promise<PolicyVersion> {
    return this.#insert(this.#db, input, 'draft', null);
  }

  async #insert(
    db: Tx,
    input: NewPolicyVersion,
    state: PolicyVersionState,
    restoresId: string | null,
  ): Promise<PolicyVersion> {
    const nowMs = this.#now();
    // Sorts by time (12 hex digits of milliseconds), random bits keep two replicas apart.
    const id = `${nowMs.toString(16).padStart(12, '0')}${randomBytes(6).toString('hex')}`;
    const row: Row = {
      id,
      name: input.name,
      yaml: input.yaml,
      revision: policyRevision(input.yaml),
      author: input.author,
      created_ms: nowMs,
      message: input.message,
      parent_id: input.parentId ?? null,
      restores_id: restoresId,
      state,
      state_changed_ms: nowMs,
      state_changed_by: input.author,
    };
    await db.insertInto('policy_version').values(row).execute();
    return versionOf(row);
  }

  async get(id: string): Promise<PolicyVersion | undefined> {
    const row = await this.#db
      .selectFrom('policy_version')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row === undefined ? undefined : versionOf(row);
  }

  /** Versions, newest first, before `before` (an id) when given. */
  async list(limit: number, before?: string): Promise<PolicyVersion[]> {
    let q = this.#db.selectFrom('policy_version').selectAll();
    if (before !== undefined) q = q.where('id', '<', before);
    const rows = await q.orderBy('id', 'desc').limit(limit).execute();
    return rows.map(versionOf);
  }

  /** The active version and the activation marker, read together. */
  async active(): Promise<ActivePolicyVersion> {
    const row = await this.#db
      .selectFrom('policy_active')
      .leftJoin('policy_version', 'policy_version.id', 'policy_active.version_id')
      .selectAll('policy_version')
      .select(['policy_active.generation as generation'])
      .where('policy_active.id', '=', 1)
      .executeTakeFirst();
    const generation = Number(row?.generation ?? 0);
    if (row === undefined || row.id === null) return { generation, version: undefined };
    return { generation, version: versionOf(row as Row) };
  }

  /** The activation marker alone: the cheap poll. */
  async generation(): Promise<number> {
    const row = await this.marker().executeTakeFirst();
    return Number(row?.generation ?? 0);
  }

  /** The activation marker's query (src/database/marker-poll.ts reads it with the others). */
  marker() {
    return this.#db.selectFrom('policy_active').select('generation').where('id', '=', 1);
  }

  /**
   * Moves version `id` one step, by `actor`. Approval by the author is refused unless
   * `allowSelfApproval`; activation retires the active version and bumps the marker in the same
   * transaction.
   */
  async step(id: string, step: PolicyVersionStep, actor: string): Promise<PolicyVersion> {
    return this.#db.transaction().execute(async (trx) => {
      const current = await trx
        .selectFrom('policy_version')
        .selectAll()
        .where('id', '=', id)
        .executeTakeFirst();
      if (current === undefined)
        throw new RiskgateError(ErrorCode.NOT_FOUND, `policy version ${id} does not exist`);
      if (step === 'approve' && current.author === actor && !this.#allowSelfApproval)
        throw new RiskgateError(
          ErrorCode.POLICY_SELF_APPROVAL,
          `${actor} wrote policy version ${id}: an admin other than its author must approve it`,
        );
      return this.#move(trx, current, step, actor);
    });
  }

  async #move(
    trx: Transaction<PolicyVersionTables>,
    current: Row,
    step: PolicyVersionStep,
    actor: string,
  ): Promise<PolicyVersion> {
    const { from, to } = POLICY_VERSION_TRANSITIONS[step];
    const nowMs = this.#now();
    if (to === 'active') {
      await trx
        .updateTable('policy_version')
        .set({ state: 'retired', state_changed_ms: nowMs, state_changed_by: actor })
        .where('state', '=', 'active')
        .execute();
    }
    const moved = await trx
      .updateTable('policy_version')
      .set({ state: to, state_changed_ms: nowMs, state_changed_by: actor })
      .where('id', '=', current.id)
      .where('state', 'in', [...from])
      .returningAll()
      .executeTakeFirst();
    if (moved === undefined)
      throw new RiskgateError(
        ErrorCode.POLICY_VERSION_CONFLICT,
        `policy version ${current.id} is ${current.state}: ${step} needs it ${from.join(' or ')}`,
      );
    if (to === 'active') await this.#markActive(trx, current.id, nowMs);
    if (to === 'withdrawn') await this.#endStage(trx, current.id);
    return versionOf(moved);
  }

  async #markActive(trx: Transaction<PolicyVersionTables>, id: string, nowMs: number): Promise<void> {
    // An activation ends any rollout: a stage was judged against the control it replaced.
    await this.#changeActive(trx, { version_id: id, ...NO_STAGE }, nowMs).execute();
  }

  /** A withdrawn version stops being staged (the replicas see it at the next marker). */
  async #endStage(trx: Transaction<PolicyVersionTables>, id: string): Promise<void> {
    await this.#changeActive(trx, NO_STAGE).where('staged_version_id', '=', id).execute();
  }

  /**
   * Reverts to `targetId`, an earlier version that was once active (its content was approved then):
   * a new version carrying its YAML, pointing at it, made active in one transaction by `actor`.
   * History is never rewritten.
   */
  async revert(targetId: string, actor: string, message: string): Promise<PolicyVersion> {
    return this.#db.transaction().execute(async (trx) => {
      const target = await trx
        .selectFrom('policy_version')
        .selectAll()
        .where('id', '=', targetId)
        .executeTakeFirst();
      if (target === undefined)
        throw new RiskgateError(ErrorCode.NOT_FOUND, `policy version ${targetId} does not exist`);
      if (target.state !== 'retired' && target.state !== 'active')
        throw new RiskgateError(
          ErrorCode.POLICY_VERSION_CONFLICT,
          `policy version ${targetId} is ${target.state}: only a version that was active can be reverted to`,
        );
      const active = await trx
        .selectFrom('policy_active')
        .select('version_id')
        .where('id', '=', 1)
        .executeTakeFirst();
      const made = await this.#insert(
        trx,
        {
          name: target.name,
          yaml: target.yaml,
          author: actor,
          message,
          parentId: active?.version_id ?? null,
        },
        'approved',
        target.id,
      );
      return this.#move(trx, rowOf(made), 'activate', actor);
    });
  }

  /**
   * The active version, the staged one and the scheduled activation, with the marker, in one read
   * (what a replica compiles and serves when the marker moved).
   */
  async served(): Promise<ServedPolicyVersions> {
    const marker = await this.#db
      .selectFrom('policy_active')
      .selectAll()
      .where('id', '=', 1)
      .executeTakeFirst();
    const generation = Number(marker?.generation ?? 0);
    const ids = [marker?.version_id, marker?.staged_version_id].filter((id): id is string => !!id);
    const rows =
      ids.length === 0
        ? []
        : await this.#db.selectFrom('policy_version').selectAll().where('id', 'in', ids).execute();
    const byId = new Map(rows.map((r) => [r.id, versionOf(r)]));
    const out: ServedPolicyVersions = {
      generation,
      active: marker?.version_id ? byId.get(marker.version_id) : undefined,
    };
    const staged = marker?.staged_version_id ? byId.get(marker.staged_version_id) : undefined;
    if (staged !== undefined && marker?.stage != null)
      out.staged = {
        version: staged,
        stage: marker.stage as PolicyRolloutStage,
        basisPoints: Number(marker.stage_basis_points),
      };
    if (marker?.scheduled_version_id && marker.activate_at_ms != null)
      out.scheduled = {
        versionId: marker.scheduled_version_id,
        atMs: Number(marker.activate_at_ms),
        by: marker.scheduled_by ?? '',
      };
    return out;
  }

  /**
   * Rolls approved version `id` out beside the active one: in shadow (its verdict
   * recorded beside the active one's, never served) or to `percent` of accounts. Moving an already
   * staged version to another stage is the same call. Full activation is `step(id, 'activate')`,
   * which ends the stage. Refused (`RG_ERR_POLICY_VERSION_CONFLICT`) unless the version is approved
   * and no other version is staged; a percentage outside (0, 100) is `RG_ERR_VALIDATION`.
   */
  async stage(id: string, rollout: RolloutRequest): Promise<StagedPolicyVersion> {
    const basisPoints = rollout.stage === 'shadow' ? 0 : Math.round(rollout.percent * 100);
    if (rollout.stage === 'percent' && !(basisPoints > 0 && basisPoints < 10_000))
      throw new RiskgateError(
        ErrorCode.INVALID_INPUT,
        `percent must be above 0 and below 100 (0.01 steps); activate the version to serve it to all`,
      );
    return this.#db.transaction().execute(async (trx) => {
      const version = await this.#approved(trx, id, 'staged');
      const moved = await this.#changeActive(trx, {
        staged_version_id: id,
        stage: rollout.stage,
        stage_basis_points: basisPoints,
      })
        .where((eb) => eb.or([eb('staged_version_id', 'is', null), eb('staged_version_id', '=', id)]))
        .executeTakeFirst();
      if (Number(moved.numUpdatedRows) === 0)
        throw new RiskgateError(
          ErrorCode.POLICY_VERSION_CONFLICT,
          `another policy version is staged: end its rollout before staging ${id}`,
        );
      return { version, stage: rollout.stage, basisPoints };
    });
  }

  /**
   * Ends the rollout of the staged version (it stays approved). Refused when none is staged, or,
   * given `id`, when the staged version is not `id` (a page showing it staged may be out of date).
   */
  async unstage(id?: string): Promise<void> {
    const moved = await this.#changeActive(this.#db, NO_STAGE)
      .where('staged_version_id', id === undefined ? 'is not' : '=', id ?? null)
      .executeTakeFirst();
    if (Number(moved.numUpdatedRows) === 0)
      throw new RiskgateError(
        ErrorCode.POLICY_VERSION_CONFLICT,
        id === undefined ? 'no policy version is staged' : `policy version ${id} is not staged`,
      );
  }

  /**
   * Schedules approved version `id` to be activated at `atMs` (epoch ms) in `actor`'s name; a
   * replica polling after that time activates it (`activateDue`). One schedule at a time: a new one
   * replaces the previous. Refused unless the version is approved and `atMs` is in the future.
   */
  async schedule(id: string, atMs: number, actor: string): Promise<ScheduledPolicyActivation> {
    if (!Number.isSafeInteger(atMs) || atMs <= this.#now())
      throw new RiskgateError(ErrorCode.INVALID_INPUT, 'the activation time must be in the future');
    return this.#db.transaction().execute(async (trx) => {
      await this.#approved(trx, id, 'scheduled');
      await this.#changeActive(trx, {
        scheduled_version_id: id,
        activate_at_ms: atMs,
        scheduled_by: actor,
      }).execute();
      return { versionId: id, atMs, by: actor };
    });
  }

  /**
   * Cancels the scheduled activation. Refused when none is scheduled, or, given `id`, when the
   * scheduled version is not `id`.
   */
  async unschedule(id?: string): Promise<void> {
    const moved = await this.#changeActive(this.#db, NO_SCHEDULE)
      .where('scheduled_version_id', id === undefined ? 'is not' : '=', id ?? null)
      .executeTakeFirst();
    if (Number(moved.numUpdatedRows) === 0)
      throw new RiskgateError(
        ErrorCode.POLICY_VERSION_CONFLICT,
        id === undefined ? 'no policy activation is scheduled' : `policy version ${id} is not scheduled`,
      );
  }

  /**
   * Activates the scheduled version when `nowMs` has reached its time: the schedule is cleared by a
   * conditional UPDATE, so of several replicas polling, exactly one activates it (the others get
   * undefined). A version no longer approved (withdrawn meanwhile) clears the schedule unactivated.
   */
  async activateDue(nowMs: number): Promise<{ version: PolicyVersion; by: string } | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const due = await trx
        .selectFrom('policy_active')
        .select(['scheduled_version_id', 'activate_at_ms', 'scheduled_by'])
        .where('id', '=', 1)
        .executeTakeFirst();
      if (!due?.scheduled_version_id || due.activate_at_ms == null || Number(due.activate_at_ms) > nowMs)
        return undefined;
      const taken = await trx
        .updateTable('policy_active')
        .set(NO_SCHEDULE)
        .where('id', '=', 1)
        .where('scheduled_version_id', '=', due.scheduled_version_id)
        .executeTakeFirst();
      if (Number(taken.numUpdatedRows) === 0) return undefined;
      const current = await trx
        .selectFrom('policy_version')
        .selectAll()
        .where('id', '=', due.scheduled_version_id)
        .executeTakeFirst();
      const by = due.scheduled_by ?? 'schedule';
      if (current?.state !== 'approved') {
        await this.#changeActive(trx, {}).execute();
        return undefined;
      }
      return { version: await this.#move(trx, current, 'activate', by), by };
    });
  }

  /**
   * The UPDATE of the one `policy_active` row with `changes`: every change bumps its generation,
   * the marker each replica polls, so a stage or a schedule moving is seen as an activation is.
   */
  #changeActive(db: Kysely<PolicyVersionTables>, changes: ActiveChanges, nowMs = this.#now()) {
    return db
      .updateTable('policy_active')
      .set((eb) => ({ ...changes, generation: eb('generation', '+', 1), changed_ms: nowMs }))
      .where('id', '=', 1);
  }

  async #approved(trx: Transaction<PolicyVersionTables>, id: string, what: string): Promise<PolicyVersion> {
    const row = await trx.selectFrom('policy_version').selectAll().where('id', '=', id).executeTakeFirst();
    if (row === undefined)
      throw new RiskgateError(ErrorCode.NOT_FOUND, `policy version ${id} does not exist`);
    if (row.state !== 'approved')
      throw new RiskgateError(
        ErrorCode.POLICY_VERSION_CONFLICT,
        `policy version ${id} is ${row.state}: only an approved version can be ${what}`,
      );
    return versionOf(row);
  }
}

function rowOf(v: PolicyVersion): Row {
  return {
    id: v.id,
    name: v.name,
    yaml: v.yaml,
    revision: v.revision,
    author: v.author,
    created_ms: v.createdMs,
    message: v.message,
    parent_id: v.parentId,
    restores_id: v.restoresId,
    state: v.state,
    state_changed_ms: v.stateChangedMs,
    state_changed_by: v.stateChangedBy,
  };
}
