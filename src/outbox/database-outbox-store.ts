import type { CompiledQuery, Kysely, Transaction } from 'kysely';
import { CompanionRefusedError } from '../actions/action-dispatcher.ts';
import { type ActionSpec, parseStoredSpec } from '../actions/admin-actions.ts';
import type { RiskgateDatabase } from '../database/database.ts';
import { isRefusedRow } from '../database/refused-row.ts';
import {
  type InsertedRow,
  type OutboxRow,
  type OutboxStatements,
  outboxStatements,
} from './outbox-statements.ts';
import {
  type AppendCompanion,
  type ClaimOptions,
  type CompanionTx,
  type Completion,
  type DeliveryRecord,
  dueAtMs,
  type OutboxEntry,
  type OutboxListFilter,
  type OutboxStats,
  type OutboxStatus,
  type OutboxStore,
  type SettleAndClaim,
  type SettledClaim,
  settleThenClaim,
} from './outbox-store.ts';
import type { OutboxTables } from './outbox-tables.ts';

/**
 * The outbox in the database (RISKGATE_DATABASE), beside the lock-out records, the lists and the
 * audit trail: one transaction can hold a lock-out's entries and its record (`AppendCompanion`).
 * Every query goes through kysely: on the embedded SQLite file it runs on the database's thread
 * (src/database/sqlite-thread-dialect.ts), never on the event loop; on PostgreSQL, replicas share
 * the one table and a claim takes its rows `FOR UPDATE SKIP LOCKED` (one UPDATE statement, its own
 * transaction), so two replicas never lease the same entry and neither waits for the other.
 *
 * Batched, as the outbox's hot path needs: the appends of one event-loop turn share one
 * transaction (group commit, at most one in flight: see `#commitAppends`; should the database
 * refuse a row, each append is tried alone, so the refused one fails only itself, while a database
 * that is down fails the group once), and so do the completions (one UPDATE per owner). A claim is
 * one statement on either engine.
 *
 * A row whose spec cannot be read (damaged, or written by a later version) never stops the rows
 * beside it: whichever read meets it (a claim, the untold lines, a listing) sets it aside, dead
 * with reason `unreadable_spec` and marked logged (no outcome line can be told for it, and it is
 * never claimed again), counted (`unreadableSpecs`) and reported with its id (`onUnreadable`).
 */

/** The reason an entry whose stored spec cannot be read is dead-lettered with. */
export const UNREADABLE_SPEC_REASON = 'unreadable_spec';

type Row = OutboxRow;

/** Most ids in one `IN (...)` (far below either engine's parameter limit). */
const IDS_PER_STATEMENT = 500;

/** Which of each append's entries were new, from the ids the inserts added: the first of an id is the one added. */
function addedOf(appends: readonly PendingAppend[], added: ReadonlyArray<{ id: string }>): boolean[][] {
  const inserted = new Set(added.map((r) => r.id));
  return appends.map((a) => a.specs.map((s) => inserted.delete(s.id)));
}

function entryOf(row: Row, spec: ActionSpec): OutboxEntry {
  return {
    spec,
    status: row.status as OutboxStatus,
    attempts: Number(row.attempts),
    createdAtMs: Number(row.created_at),
    horizonStartMs: Number(row.horizon_start),
    nextAttemptAtMs: Number(row.next_attempt_at),
    updatedAtMs: Number(row.updated_at),
    lastError: row.last_error ?? undefined,
    reason: row.reason ?? undefined,
    owner: row.lease_owner ?? undefined,
  };
}

interface PendingAppend {
  specs: readonly ActionSpec[];
  nowMs: number;
  companions: readonly AppendCompanion[];
  resolve: (added: boolean[]) => void;
  reject: (error: unknown) => void;
}

interface PendingCompletion {
  id: string;
  owner: string;
  nowMs: number;
  record: DeliveryRecord | undefined;
  resolve: (completed: boolean) => void;
  reject: (error: unknown) => void;
}

export interface DatabaseOutboxStoreOptions {
  /** Close the database with the store (the CLI, tests: opened for this store alone). Default false. */
  ownsDatabase?: boolean;
  /**
   * Told each entry set aside because its stored spec cannot be read (`unreadable_spec`), once, as
   * it is set aside: a log line naming it. Must not throw. Default: not told (still counted).
   */
  onUnreadable?: (id: string, error: unknown) => void;
}

export class DatabaseOutboxStore implements OutboxStore {
  readonly durable = true;
  readonly deliveryRecords = true;
  readonly #db: Kysely<OutboxTables>;
  readonly #statements: OutboxStatements;
  readonly #script: RiskgateDatabase['script'];
  readonly #engine: RiskgateDatabase['engine'];
  #appends: PendingAppend[] = [];
  /** The group commit in flight (at most one: see `#commitAppends`). */
  #committing: Promise<void> | undefined;
  #completions: PendingCompletion[] = [];
  #closed = false;
  #unreadable = 0;
  readonly #closeDatabase: (() => Promise<void>) | undefined;
  readonly #onUnreadable: ((id: string, error: unknown) => void) | undefined;

  /** The store over `database`, which stays open on `close` (the database component's) unless it owns it. */
  constructor(database: RiskgateDatabase, options: DatabaseOutboxStoreOptions = {}) {
    this.#db = database.db.withTables<OutboxTables>();
    this.#statements = outboxStatements(this.#db, database.engine);
    this.#script = database.script;
    this.#engine = database.engine;
    this.#closeDatabase = options.ownsDatabase === true ? () => database.close() : undefined;
    this.#onUnreadable = options.onUnreadable;
  }

  /** Entries this process set aside as `unreadable_spec`. */
  get unreadableSpecs(): number {
    return this.#unreadable;
  }

  /**
   * The entries of `rows` in their order, those whose spec cannot be read left out and set aside
   * (dead, `unreadable_spec`, logged) in one statement. Counted and told only when this statement
   * is the one that set it aside: a listing that meets it again says nothing more.
   */
  async #entriesOf(rows: readonly Row[], nowMs: number): Promise<OutboxEntry[]> {
    const entries: OutboxEntry[] = [];
    const unreadable = new Map<string, unknown>();
    for (const row of rows) {
      try {
        // Written by this code, but a database is a boundary: checked, cheaply (the claim path is hot).
        entries.push(entryOf(row, parseStoredSpec(row.spec)));
      } catch (error) {
        unreadable.set(row.id, error);
      }
    }
    if (unreadable.size === 0) return entries;
    const ids = [...unreadable.keys()];
    for (let i = 0; i < ids.length; i += IDS_PER_STATEMENT) {
      const setAside = await this.#db
        .updateTable('outbox_entry')
        .set({ status: 'dead', reason: UNREADABLE_SPEC_REASON, lease_until: 0, logged: 1, updated_at: nowMs })
        .where('id', 'in', ids.slice(i, i + IDS_PER_STATEMENT))
        .where((eb) =>
          eb.or([
            eb('status', '<>', 'dead'),
            eb('reason', 'is', null),
            eb('reason', '<>', UNREADABLE_SPEC_REASON),
            eb('logged', '<>', 1),
          ]),
        )
        .returning('id')
        .execute();
      for (const { id } of setAside) {
        this.#unreadable++;
        this.#onUnreadable?.(id, unreadable.get(id));
      }
    }
    return entries;
  }

  append(
    specs: readonly ActionSpec[],
    nowMs: number,
    companions: readonly AppendCompanion[] = [],
  ): Promise<boolean[]> {
    if (this.#closed) return Promise.reject(new Error('the outbox is closed'));
    return new Promise((resolve, reject) => {
      this.#appends.push({ specs, nowMs, companions, resolve, reject });
      // Group commit: every append of this turn in one transaction.
      if (this.#appends.length === 1 && this.#committing === undefined)
        setImmediate(() => void this.#commitAppends());
    });
  }

  /**
   * Commits the appends batched so far, after the group commit in flight (if any) has ended.
   *
   * At most one in flight per process, because of PostgreSQL: `seq` is taken from its sequence as
   * a row is inserted, but the row becomes visible when its transaction commits. Two groups in
   * flight at once could commit out of order (a user's unlock, submitted after the lock-out, seen
   * first); one at a time, a process's entries become visible in the order they were appended.
   * Across replicas no order is promised between concurrent appends of one user (two decisions at
   * the same moment on two machines); the claim keeps them from running at once (see `claim`).
   */
  #commitAppends(): Promise<void> {
    if (this.#committing !== undefined || this.#appends.length === 0)
      return this.#committing ?? Promise.resolve();
    // The loop's end and `#committing`'s reset are one synchronous step: an append made after the
    // last check schedules its own commit.
    this.#committing = (async () => {
      try {
        while (this.#appends.length > 0) {
          const batch = this.#appends;
          this.#appends = [];
          await this.#commitGroup(batch);
        }
      } finally {
        this.#committing = undefined;
      }
    })();
    return this.#committing;
  }

  async #commitGroup(batch: readonly PendingAppend[]): Promise<void> {
    try {
      const results = await this.#writeGroup(batch);
      for (const [i, a] of batch.entries()) a.resolve(results[i]!);
    } catch (error) {
      // A row the database refuses (a constraint, a byte it cannot store), or a companion refusing
      // its own append: each append alone, so the refused one fails only itself. Anything else (the
      // database down, a full disk, a timeout) would fail each of them again: the group fails
      // once, not N times the load.
      if (batch.length === 1 || !(isRefusedRow(error) || error instanceof CompanionRefusedError)) {
        for (const a of batch) a.reject(error);
        return;
      }
      for (const a of batch) {
        try {
          a.resolve((await this.#writeGroup([a]))[0]!);
        } catch (alone) {
          a.reject(alone);
        }
      }
    }
  }

  /**
   * The appends' entries, then their companions' rows, in one transaction. Which were new, per
   * append: an id already there, or earlier in the batch, is not.
   *
   * On the SQLite file, when every companion can give its rows as statements up front (a lock-out's
   * record), the whole transaction is one script: one message to the database's thread instead of
   * `begin`, each insert, each companion's statement and `commit` (issue 32: each a message and a
   * wake-up of the thread). The same statements in the same order on the one connection, so the
   * same transaction: all of it or none (a statement that fails rolls the script back, and fails
   * the group as a failed transaction would), committed before the appends are told.
   */
  async #writeGroup(appends: readonly PendingAppend[]): Promise<boolean[][]> {
    const script = this.#script;
    if (script !== undefined) {
      const companions = appends.flatMap((a) =>
        a.companions.map((c) => c.statements?.(this.#db as unknown as CompanionTx, a.nowMs)),
      );
      if (companions.every((c): c is CompiledQuery[] => c !== undefined)) {
        const inserts = this.#inserts(appends);
        const results = await script([...inserts, ...companions.flat()]);
        const added = results.slice(0, inserts.length).flatMap((r) => r.rows as Array<{ id: string }>);
        return addedOf(appends, added);
      }
    }
    return this.#db.transaction().execute((tx) => this.#write(tx, appends));
  }

  /** `#writeGroup` with `tx`: one insert statement per IDS_PER_STATEMENT rows, then the companions. */
  async #write(tx: Transaction<OutboxTables>, appends: readonly PendingAppend[]): Promise<boolean[][]> {
    const added: Array<{ id: string }> = [];
    for (const insert of this.#inserts(appends)) added.push(...(await tx.executeQuery(insert)).rows);
    for (const a of appends)
      for (const c of a.companions) await c.write(tx as unknown as CompanionTx, a.nowMs);
    return addedOf(appends, added);
  }

  /** The appends' entries as insert statements of IDS_PER_STATEMENT rows at most, each returning the ids it added. */
  #inserts(appends: readonly PendingAppend[]): CompiledQuery<{ id: string }>[] {
    const rows = appends.flatMap((a) =>
      a.specs.map((s): InsertedRow => {
        const at = dueAtMs(s, a.nowMs);
        return {
          id: s.id,
          ordering_key: s.orderingKey,
          action_type: s.type,
          spec: JSON.stringify(s),
          created_at: at,
          horizon_start: at,
          next_attempt_at: at,
          updated_at: a.nowMs,
        };
      }),
    );
    return Array.from({ length: Math.ceil(rows.length / IDS_PER_STATEMENT) }, (_, i) =>
      this.#statements.insert(rows.slice(i * IDS_PER_STATEMENT, (i + 1) * IDS_PER_STATEMENT)),
    );
  }

  async claim(
    owner: string,
    limit: number,
    nowMs: number,
    leaseMs: number,
    options: ClaimOptions = {},
  ): Promise<OutboxEntry[]> {
    if (limit <= 0) return [];
    const { rows } = await this.#db.executeQuery(this.#claimQuery(owner, limit, nowMs, leaseMs, options));
    return this.#claimed(rows, nowMs);
  }

  /**
   * The claim as one statement (its own transaction, or a script's last): one round trip.
   *
   * Due, pending, not leased (or its lease ran out), first of its ordering key among the pending,
   * and no other entry of its key leased: a user's later action never overtakes an earlier one
   * still pending, nor runs beside one. The last rule is what makes the order safe on
   * PostgreSQL, where `seq` is taken at insert but seen at commit: an entry committed after a
   * later one of its key was claimed waits for that one to end instead of running with it. No
   * claim reads "seq above the last seen" (which would skip a row committed late): each looks at
   * every pending row.
   */
  #claimQuery(
    owner: string,
    limit: number,
    nowMs: number,
    leaseMs: number,
    options: ClaimOptions,
  ): CompiledQuery<Row> {
    const until = Math.round(nowMs + leaseMs);
    return this.#statements.claim({ owner, until, nowMs, limit }, options.skipWebhooks === true);
  }

  /** A claim's rows as entries, oldest first (RETURNING promises no order). */
  #claimed(rows: Row[], nowMs: number): Promise<OutboxEntry[]> {
    return this.#entriesOf(
      rows.sort((a, b) => Number(a.seq) - Number(b.seq)),
      nowMs,
    );
  }

  complete(id: string, owner: string, nowMs: number, record?: DeliveryRecord): Promise<boolean> {
    if (this.#closed) return Promise.reject(new Error('the outbox is closed'));
    return new Promise((resolve, reject) => {
      this.#completions.push({ id, owner, nowMs, record, resolve, reject });
      // The completions of this turn in one statement per owner.
      if (this.#completions.length === 1) setImmediate(() => void this.#commitCompletions());
    });
  }

  async #commitCompletions(): Promise<void> {
    const batch = this.#completions;
    this.#completions = [];
    const byOwner = new Map<string, PendingCompletion[]>();
    for (const c of batch) {
      const list = byOwner.get(c.owner);
      if (list === undefined) byOwner.set(c.owner, [c]);
      else list.push(c);
    }
    for (const [owner, all] of byOwner) {
      for (let i = 0; i < all.length; i += IDS_PER_STATEMENT) {
        const part = all.slice(i, i + IDS_PER_STATEMENT);
        try {
          const rows = await this.#completeWithRecords(part, owner);
          const ids = new Set(rows.map((r) => r.id));
          for (const c of part) c.resolve(ids.has(c.id));
        } catch (error) {
          for (const c of part) c.reject(error);
        }
      }
    }
  }

  /**
   * The completions of `part` and their records in one transaction, the records after the
   * completion so they see it: on the SQLite file one script, on PostgreSQL one statement, in a
   * process-private SQLite database (no script) a transaction.
   */
  async #completeWithRecords(part: readonly Completion[], owner: string): Promise<Array<{ id: string }>> {
    const complete = this.#completeQuery(part, owner);
    const records = this.#recordQueries(part);
    if (records.length === 0) return (await this.#db.executeQuery(complete)).rows;
    if (this.#script !== undefined)
      return (await this.#script([complete, ...records]))[0]!.rows as Array<{ id: string }>;
    if (this.#engine === 'postgres')
      return (await this.#db.executeQuery(this.#statements.completeWith(complete, records))).rows;
    return this.#db.transaction().execute(async (tx) => {
      const { rows } = await tx.executeQuery(complete);
      for (const record of records) await tx.executeQuery(record);
      return rows;
    });
  }

  /**
   * The delivery records of `completed` (a lock-out's `locked`), each changing its rows only if
   * its entry is delivered, so in the completion's transaction and after it: they land with it,
   * and a completion the lease holder lost (or one rolled back) changes none of them.
   */
  #recordQueries(completed: readonly Completion[]): CompiledQuery[] {
    const queries: CompiledQuery[] = [];
    const db = this.#db as unknown as CompanionTx;
    for (const { record, nowMs } of completed) {
      if (record === undefined) continue;
      const { spec, createdAtMs, companion } = record;
      queries.push(companion.statement(db, { spec, createdAtMs, nowMs }, this.#statements.delivered));
    }
    return queries;
  }

  /**
   * The completions of `part` (held by `owner`) as one statement, each delivered and its outcome
   * line due; it returns the ids it completed. At the batch's latest time: the completions of one
   * turn are within a few milliseconds.
   */
  #completeQuery(part: readonly Completion[], owner: string): CompiledQuery<{ id: string }> {
    const nowMs = Math.max(...part.map((c) => c.nowMs));
    return this.#statements.complete(
      part.map((c) => c.id),
      owner,
      nowMs,
    );
  }

  /**
   * On the SQLite file, the completions, their delivery records, the marks and the claim as one
   * script: one transaction, one message to the database's thread instead of three (the claim, in
   * the same transaction, sees the completions; a lock-out's `locked` is no transaction of its own). A script that fails rolled back whole: the step is tried again call by
   * call (`settleThenClaim`), so a claim that failed never takes the completions down with it, and
   * the script's error is told with the step's.
   */
  async settleAndClaim(step: SettleAndClaim): Promise<SettledClaim> {
    const script = this.#script;
    const { completed, logged, owner } = step;
    if (script === undefined || completed.length > IDS_PER_STATEMENT || logged.length > IDS_PER_STATEMENT)
      return settleThenClaim(this, step);
    if (completed.length === 0 && logged.length === 0) {
      const claimed = await this.claim(owner, step.limit, step.nowMs, step.leaseMs, step.options);
      return { completed: [], logged: true, claimed, errors: [] };
    }
    const statements: CompiledQuery[] = [];
    if (completed.length > 0)
      statements.push(this.#completeQuery(completed, owner), ...this.#recordQueries(completed));
    if (logged.length > 0) statements.push(this.#markLoggedQuery(logged));
    const claiming = step.limit > 0;
    if (claiming)
      statements.push(this.#claimQuery(owner, step.limit, step.nowMs, step.leaseMs, step.options ?? {}));
    let results: Awaited<ReturnType<typeof script>>;
    try {
      results = await script(statements);
    } catch (error) {
      const again = await settleThenClaim(this, step);
      return { ...again, errors: [error, ...again.errors] };
    }
    const done = new Set(
      completed.length > 0 ? (results[0]!.rows as Array<{ id: string }>).map((r) => r.id) : [],
    );
    const claimed = claiming ? await this.#claimed(results.at(-1)!.rows as Row[], step.nowMs) : [];
    return { completed: completed.map((c) => done.has(c.id)), logged: true, claimed, errors: [] };
  }

  async retryLater(
    id: string,
    owner: string,
    nextAttemptAtMs: number,
    lastError: string | undefined,
    countAttempt: boolean,
    nowMs: number,
  ): Promise<void> {
    await this.#db
      .updateTable('outbox_entry')
      .set((eb) => ({
        lease_owner: null,
        lease_until: 0,
        // Whole milliseconds: a backoff's jitter is fractional, and PostgreSQL's bigint refuses it.
        next_attempt_at: Math.round(nextAttemptAtMs),
        last_error: lastError ?? null,
        attempts: countAttempt ? eb.ref('attempts') : eb('attempts', '-', 1),
        updated_at: nowMs,
      }))
      .where('id', '=', id)
      .where('lease_owner', '=', owner)
      .where('status', '=', 'pending')
      .execute();
  }

  async deadLetter(id: string, owner: string, reason: string, nowMs: number): Promise<boolean> {
    const r = await this.#db
      .updateTable('outbox_entry')
      .set({ status: 'dead', reason, lease_until: 0, logged: 0, updated_at: nowMs })
      .where('id', '=', id)
      .where('lease_owner', '=', owner)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async unlogged(limit: number): Promise<OutboxEntry[]> {
    const rows = await this.#db
      .selectFrom('outbox_entry')
      .selectAll()
      .where('logged', '=', 0)
      .orderBy('updated_at')
      .limit(limit)
      .execute();
    return this.#entriesOf(rows, Date.now());
  }

  async markLogged(ids: readonly string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += IDS_PER_STATEMENT)
      await this.#db.executeQuery(this.#markLoggedQuery(ids.slice(i, i + IDS_PER_STATEMENT)));
  }

  /** Up to IDS_PER_STATEMENT outcome lines confirmed written, as one statement. */
  #markLoggedQuery(ids: readonly string[]): CompiledQuery {
    return this.#statements.markLogged(ids);
  }

  async leaseOwners(nowMs: number): Promise<string[]> {
    const rows = await this.#db
      .selectFrom('outbox_entry')
      .select('lease_owner')
      .distinct()
      .where('status', '=', 'pending')
      .where('lease_until', '>', nowMs)
      .where('lease_owner', 'is not', null)
      .execute();
    return rows.map((r) => r.lease_owner!);
  }

  async releaseOwner(owner: string, nowMs: number): Promise<number> {
    const r = await this.#db
      .updateTable('outbox_entry')
      .set({ lease_owner: null, lease_until: 0, next_attempt_at: nowMs, updated_at: nowMs })
      .where('lease_owner', '=', owner)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  async list(filter: OutboxListFilter): Promise<OutboxEntry[]> {
    let q = this.#db.selectFrom('outbox_entry').selectAll();
    if (filter.status !== undefined) q = q.where('status', '=', filter.status);
    const rows = await q
      .orderBy('seq', 'desc')
      .limit(Math.min(filter.limit ?? 100, Number.MAX_SAFE_INTEGER))
      .execute();
    return this.#entriesOf(rows, Date.now());
  }

  async get(id: string): Promise<OutboxEntry | undefined> {
    const row = await this.#db.selectFrom('outbox_entry').selectAll().where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : (await this.#entriesOf([row], Date.now()))[0];
  }

  async stats(nowMs: number): Promise<OutboxStats> {
    const count = (status: OutboxStatus) =>
      this.#db
        .selectFrom('outbox_entry')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('status', '=', status);
    const r = await this.#db
      .selectNoFrom((eb) => [
        count('pending').as('pending'),
        count('dead').as('dead'),
        eb
          .selectFrom('outbox_entry')
          .select((e) => e.fn.min('created_at').as('oldest'))
          .where('status', '=', 'pending')
          .as('oldest'),
      ])
      .executeTakeFirstOrThrow();
    const oldest = r.oldest === null ? undefined : Number(r.oldest);
    return {
      pending: Number(r.pending),
      dead: Number(r.dead),
      oldestPendingAgeMs: oldest === undefined ? 0 : Math.max(0, nowMs - oldest),
    };
  }

  async retry(id: string, nowMs: number): Promise<boolean> {
    const r = await this.#db
      .updateTable('outbox_entry')
      .set({
        status: 'pending',
        reason: null,
        next_attempt_at: nowMs,
        horizon_start: nowMs,
        lease_owner: null,
        lease_until: 0,
        updated_at: nowMs,
      })
      .where('id', '=', id)
      .where('status', 'in', ['dead', 'dropped'])
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async drop(id: string, reason: string, nowMs: number): Promise<boolean> {
    const r = await this.#db
      .updateTable('outbox_entry')
      .set({ status: 'dropped', reason, lease_owner: null, lease_until: 0, logged: 0, updated_at: nowMs })
      .where('id', '=', id)
      .where('status', 'in', ['pending', 'dead'])
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async prune(beforeMs: number): Promise<number> {
    const r = await this.#db
      .deleteFrom('outbox_entry')
      .where('status', 'in', ['delivered', 'dropped'])
      .where('updated_at', '<', beforeMs)
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** Writes what is batched, then refuses more (and closes the database if it owns it). */
  async close(): Promise<void> {
    if (this.#closed) return;
    while (this.#committing !== undefined || this.#appends.length > 0) await this.#commitAppends();
    await this.#commitCompletions();
    this.#closed = true;
    await this.#closeDatabase?.();
  }
}
