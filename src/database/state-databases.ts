import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { Kysely, sql } from 'kysely';
import { safeErrorText } from '../errors/safe-error-text.ts';
import type { LifecycleLog } from '../lifecycle/component.ts';
import { type FeatureMigrations, MIGRATION_TABLE, openDatabase, type RiskgateDatabase } from './database.ts';
import { DatabaseGate, GatedDialect, isCorruptFileError } from './gated-dialect.ts';
import { splitLegacyFile } from './legacy-split.ts';
import { SqliteThreadDialect } from './sqlite-thread-dialect.ts';
import {
  DECISIONS_PAGE_SIZE,
  fileIdentity,
  markerPresent,
  prepareStateDir,
  type StateFiles,
  setAside,
  stateFiles,
  withStartLock,
  writeMarker,
} from './state-files.ts';

/**
 * The two kinds of state (docs/architecture.md, "Two kinds of state") as two database handles:
 * `control` (lists, lock-outs, the outbox, the audit trail: the system of record) and `decisions`
 * (the decision store: observations).
 *
 * - PostgreSQL and `memory`: both kinds in the one database, one handle (one pool) for both: a
 *   second pool would double the connections for no isolation PostgreSQL does not already give.
 * - SQLite (RISKGATE_STATE_DIR): two files (src/database/state-files.ts), treated differently.
 *   The control file is never moved aside nor replaced: when it is missing (but was there before),
 *   damaged, or deleted or replaced while running, its handle refuses every query
 *   (RG_ERR_DATABASE_UNAVAILABLE), so the lists are unavailable to decisions (the policy's
 *   onUnavailable and the degraded floor) and operator changes answer 503, with an alarm on
 *   /healthz and `riskgate_control_state_unavailable 1`; riskgate still starts and answers. The
 *   decisions file, when it cannot be opened or is found damaged, deleted or replaced, is set
 *   aside (`decisions.sqlite.corrupt-<ts>`) and a fresh one made, at start or while running: it
 *   never stops a start or a decision. Only the control file gets a `quick_check` at start (a
 *   full read: seconds for a large audit trail); a damaged page of the decisions file (up to a
 *   gigabyte) shows when a query or a write meets it, which sets the file aside then.
 *
 * A watch stats both paths every `watchEveryMs` and compares device and inode (and a size fallen
 * to 0) with the file opened, as SQLite's own tools do to notice a file swapped under them: a
 * connection on a deleted file goes on writing into an inode nobody will see again.
 */

/** Where the state lives (RISKGATE_DATABASE with RISKGATE_STATE_DIR). */
export type StateTarget =
  | { kind: 'sqlite'; dir: string }
  | { kind: 'memory' }
  | { kind: 'postgres'; url: string };

export interface StateStatus {
  control: { available: boolean; reason?: string; file?: string };
  decisions: {
    file?: string;
    /** Decisions files moved aside since start (damaged or unopenable). */
    setAside: number;
    /** Fresh decisions files made where one had been (missing, set aside, deleted while running). */
    recreated: number;
    lastSetAsideAs?: string;
  };
}

export interface StateDatabases {
  control: RiskgateDatabase;
  decisions: RiskgateDatabase;
  /** The decisions SQLite file (the decision store writes it from a thread of its own). */
  decisionsFile: string | undefined;
  /** The decision store's word that the file failed as a damaged file does: it is set aside. */
  decisionsDamaged(error: unknown): void;
  /** Called after the decisions file was reopened (a writer's own connection must follow). */
  onDecisionsReopened(listener: () => Promise<void> | void): void;
  status(): StateStatus;
  /** Alarms for /healthz: one sentence each, empty when all is well. */
  alarms(): string[];
  close(): Promise<void>;
}

export interface OpenStateOptions {
  controlMigrations: FeatureMigrations;
  decisionMigrations: FeatureMigrations;
  log: LifecycleLog;
  /** How often the files' identity is checked, milliseconds. Default 2000. */
  watchEveryMs?: number;
  /** Passed to `openDatabase` (PostgreSQL timeouts, pool size). */
  sqliteTimeoutMs?: number;
}

export async function openStateDatabases(target: StateTarget, o: OpenStateOptions): Promise<StateDatabases> {
  if (target.kind !== 'sqlite') {
    const migrations = { ...o.decisionMigrations, ...o.controlMigrations };
    const one = await openDatabase(target, { migrations, log: o.log });
    return sharedState(one, { closes: true });
  }
  return new EmbeddedState(stateFiles(target.dir), o).open();
}

/** Both kinds in `one` database (PostgreSQL, memory, a test's); `closes`: closing it is ours. */
export function sharedState(one: RiskgateDatabase, o: { closes: boolean }): StateDatabases {
  return {
    control: one,
    decisions: one,
    decisionsFile: undefined,
    decisionsDamaged() {},
    onDecisionsReopened() {},
    status: () => ({ control: { available: true }, decisions: { setAside: 0, recreated: 0 } }),
    alarms: () => [],
    close: () => (o.closes ? one.close() : Promise.resolve()),
  };
}

type Identity = ReturnType<typeof fileIdentity>;

class EmbeddedState implements StateDatabases {
  readonly #files: StateFiles;
  readonly #o: OpenStateOptions;
  readonly #controlGate: DatabaseGate;
  readonly #decisionsGate = new DatabaseGate({ what: 'the decision store' });
  #control!: RiskgateDatabase;
  #decisions!: RiskgateDatabase;
  #controlId: Identity;
  /** Whether the control file's -wal has been seen since the open (its deletion is then noticed). */
  #controlWalSeen = false;
  #decisionsId: Identity;
  #status: StateStatus;
  #watch: NodeJS.Timeout | undefined;
  #recovering: Promise<void> | undefined;
  /** The marker was there at start: this state dir had files before (not a first start). */
  #hadState = false;
  #closed = false;
  readonly #reopened: (() => Promise<void> | void)[] = [];

  constructor(files: StateFiles, o: OpenStateOptions) {
    this.#files = files;
    this.#o = o;
    this.#status = {
      control: { available: true, file: files.control },
      decisions: { file: files.decisions, setAside: 0, recreated: 0 },
    };
    this.#controlGate = new DatabaseGate({
      what: 'control state',
      onTrip: (reason) => {
        this.#status.control = { available: false, reason, file: files.control };
        o.log({
          level: 'error',
          msg: 'control state unavailable: lists are unavailable to decisions, operator changes are refused (503)',
          file: files.control,
          reason,
        });
      },
    });
  }

  get control(): RiskgateDatabase {
    return this.#control;
  }

  get decisions(): RiskgateDatabase {
    return this.#decisions;
  }

  get decisionsFile(): string {
    return this.#files.decisions;
  }

  async open(): Promise<this> {
    const warning = prepareStateDir(this.#files.dir);
    if (warning !== undefined) this.#o.log({ level: 'warn', msg: warning });
    await withStartLock(this.#files.dir, async () => {
      this.#hadState = markerPresent(this.#files);
      this.#control = await this.#openControl();
      this.#decisions = await this.#openDecisions();
    });
    this.#controlId = fileIdentity(this.#files.control);
    this.#controlWalSeen = existsSync(`${this.#files.control}-wal`);
    this.#decisionsId = fileIdentity(this.#files.decisions);
    this.#watch = setInterval(() => this.#check(), this.#o.watchEveryMs ?? 2000);
    this.#watch.unref();
    return this;
  }

  async #openControl(): Promise<RiskgateDatabase> {
    const f = this.#files;
    if (!existsSync(f.control)) {
      if (existsSync(f.legacy)) {
        try {
          const { copied, setAsideAs } = await splitLegacyFile(f, this.#o.controlMigrations);
          this.#o.log({
            level: 'info',
            msg: `control state copied from ${f.legacy} into ${f.control}; the old file (with its decisions) renamed aside`,
            copied,
            setAsideAs,
          });
        } catch (error) {
          return this.#controlUnavailable(
            `the upgrade from ${f.legacy} failed (the file is left in place): ${safeErrorText(error)}`,
          );
        }
      } else if (this.#hadState) {
        return this.#controlUnavailable(
          `${f.control} is missing, but this state dir had one (${f.marker}): restore it from a backup, or remove ${f.marker} to start with empty control state`,
        );
      }
    } else if (existsSync(f.legacy)) {
      // Someone put the single file of an earlier version back (a restored backup?): it is not
      // read again (its control state was copied once), which an operator should know.
      this.#o.log({
        level: 'warn',
        msg: `${f.legacy} is back beside ${f.control}: it is not read (control state was copied from it once); move it away, or restore ${f.control} from it by hand`,
      });
    }
    if (existsSync(f.control) && this.#hadState && holdsNoState(f.control)) {
      // Emptied (truncated to 0 bytes) or replaced by a fresh database: migrating it would start
      // with empty lists as if nothing had been lost.
      return this.#controlUnavailable(
        `${f.control} holds no riskgate state (emptied or replaced), but this state dir had control state (${f.marker}): restore it from a backup, or remove ${f.marker} to start with empty control state`,
      );
    }
    const gate = this.#controlGate;
    try {
      const db = await openDatabase(
        { kind: 'sqlite', path: f.control },
        {
          migrations: this.#o.controlMigrations,
          log: this.#o.log,
          sqliteTimeoutMs: this.#o.sqliteTimeoutMs,
          gate: {
            gate,
            onError: (error) => {
              if (isCorruptFileError(error))
                gate.trip(`the control file is damaged: ${safeErrorText(error)}`);
            },
          },
        },
      );
      const damage = await quickCheck(db);
      if (damage !== undefined) {
        await db.close().catch(() => {});
        return this.#controlUnavailable(`the control file is damaged (quick_check: ${damage})`);
      }
      writeMarker(f);
      return db;
    } catch (error) {
      return this.#controlUnavailable(`the control file cannot be opened: ${safeErrorText(error)}`);
    }
  }

  /** A handle on the control file that never opens it: every query refused with `reason`. */
  #controlUnavailable(reason: string): RiskgateDatabase {
    this.#controlGate.trip(reason);
    return gatedHandle(this.#files.control, this.#controlGate);
  }

  /**
   * Opens (and migrates) the decisions file; one that cannot be opened is set aside and a fresh one
   * made. `gated`: the handle the store keeps (through the reopenable gate); else a handle only to
   * make the fresh file's tables, closed by the caller.
   */
  async #openDecisions(gated = true): Promise<RiskgateDatabase> {
    const f = this.#files;
    if (gated && !existsSync(f.decisions) && this.#hadState) {
      this.#status.decisions.recreated++;
      this.#o.log({
        level: 'warn',
        msg: 'the decisions file is missing: a fresh one is made',
        file: f.decisions,
      });
    }
    const open = () =>
      openDatabase(
        { kind: 'sqlite', path: f.decisions, pageSize: DECISIONS_PAGE_SIZE },
        {
          migrations: this.#o.decisionMigrations,
          log: this.#o.log,
          sqliteTimeoutMs: this.#o.sqliteTimeoutMs,
          ...(gated && {
            gate: { gate: this.#decisionsGate, onError: (error: unknown) => this.decisionsDamaged(error) },
          }),
        },
      );
    try {
      return await open();
    } catch (error) {
      // Only a damaged file is set aside: a busy, full or unwritable one is the file still.
      if (!isCorruptFileError(error)) return this.#decisionsLater(error, gated);
      this.#setDecisionsAside(safeErrorText(error));
    }
    try {
      return await open();
    } catch (error) {
      return this.#decisionsLater(error, gated);
    }
  }

  /**
   * The decisions file cannot be opened now (a full disk, a lock, a read-only directory): the store
   * goes on through a handle that tries the file again at each query (its writes fail and are
   * retried, then dropped and counted); decisions and the start go on.
   */
  #decisionsLater(error: unknown, gated: boolean): RiskgateDatabase {
    const f = this.#files;
    const reason = safeErrorText(error);
    this.#o.log({
      level: 'error',
      msg: 'the decisions file cannot be opened now: decision store writes fail until it can',
      file: f.decisions,
      reason,
    });
    if (!gated) throw error;
    return gatedHandle(f.decisions, this.#decisionsGate, (e) => this.decisionsDamaged(e));
  }

  #setDecisionsAside(reason: string): void {
    const f = this.#files;
    let aside: string | undefined;
    try {
      if (existsSync(f.decisions)) aside = setAside(f.decisions, 'corrupt');
    } catch (error) {
      this.#o.log({
        level: 'error',
        msg: 'cannot set the decisions file aside',
        error: safeErrorText(error),
      });
    }
    const d = this.#status.decisions;
    if (aside !== undefined) {
      d.setAside++;
      d.lastSetAsideAs = aside;
    }
    d.recreated++;
    this.#o.log({
      level: 'error',
      msg: 'decisions file set aside: a fresh one is made (decisions go on; the old file is kept for a look)',
      file: f.decisions,
      setAsideAs: aside,
      reason,
    });
  }

  decisionsDamaged(error: unknown): void {
    // While opening, a failure is the open's own to handle (it sets the file aside itself).
    if (this.#watch === undefined || !isCorruptFileError(error)) return;
    void this.#recoverDecisions(`the decisions file is damaged: ${safeErrorText(error)}`, true);
  }

  onDecisionsReopened(listener: () => Promise<void> | void): void {
    this.#reopened.push(listener);
  }

  /** Sets the file aside (when `damaged`), reopens every connection on a fresh one. One at a time. */
  #recoverDecisions(reason: string, damaged: boolean): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#recovering ??= (async () => {
      if (damaged) this.#setDecisionsAside(reason);
      else {
        this.#status.decisions.recreated++;
        this.#o.log({
          level: 'error',
          msg: 'decisions file lost: a fresh one is made',
          file: this.#files.decisions,
          reason,
        });
      }
      // The fresh file and its tables first (0600, migrated), then every connection moves to it.
      await (await this.#openDecisions(false)).close().catch(() => {});
      await this.#decisionsGate.reopen();
      for (const listener of this.#reopened) await listener();
      this.#decisionsId = fileIdentity(this.#files.decisions);
    })().finally(() => {
      this.#recovering = undefined;
    });
    return this.#recovering;
  }

  /** The watch: has a file been deleted, replaced or emptied under its open connection? */
  #check(): void {
    const control = changed(this.#controlId, fileIdentity(this.#files.control));
    if (control !== undefined && this.#status.control.available) {
      this.#controlGate.trip(`the control file was ${control} while running`);
    }
    // The -wal holds every commit since the last checkpoint: deleted under the open connection,
    // those commits live only in an unlinked inode and are gone at the next start. SQLite itself
    // never deletes it while a connection is open (a checkpoint truncates it, never unlinks it).
    const wal = `${this.#files.control}-wal`;
    if (this.#status.control.available && this.#controlWalSeen && !existsSync(wal)) {
      this.#controlGate.trip(
        'the control file’s -wal was deleted while running (recent changes are lost at restart)',
      );
    }
    this.#controlWalSeen ||= existsSync(wal);
    if (this.#recovering !== undefined) return;
    const decisions = changed(this.#decisionsId, fileIdentity(this.#files.decisions));
    if (decisions !== undefined)
      void this.#recoverDecisions(`the decisions file was ${decisions} while running`, false);
  }

  status(): StateStatus {
    return structuredClone(this.#status);
  }

  alarms(): string[] {
    const c = this.#status.control;
    return c.available ? [] : [`control state unavailable: ${c.reason}`];
  }

  async close(): Promise<void> {
    clearInterval(this.#watch);
    this.#closed = true;
    await this.#recovering?.catch(() => {});
    await Promise.all([this.#control.close(), this.#decisions.close()]);
  }
}

/** What changed between the file opened and the path now, or undefined when it is the same file. */
function changed(opened: Identity, now: Identity): string | undefined {
  if (opened === undefined) return undefined;
  if (now === undefined) return 'deleted';
  if (now.dev !== opened.dev || now.ino !== opened.ino) return 'replaced';
  if (now.size === 0 && opened.size > 0) return 'emptied';
  return undefined;
}

/** SQLite's `quick_check`: undefined when the file is sound, else its first findings. */
async function quickCheck(database: RiskgateDatabase): Promise<string | undefined> {
  const { rows } = await sql<{ quick_check: string }>`pragma quick_check(5)`.execute(database.db);
  const found = rows.map((r) => Object.values(r)[0]).join('; ');
  return found === 'ok' ? undefined : found.slice(0, 300);
}

/**
 * A handle on `path` through `gate`, opening the file only at its first query let through: never,
 * while the gate is tripped (a damaged control file is not opened again).
 */
function gatedHandle(path: string, gate: DatabaseGate, onError?: (error: unknown) => void): RiskgateDatabase {
  // biome-ignore lint/complexity/noBannedTypes: kysely's empty schema.
  const db = new Kysely<{}>({ dialect: new GatedDialect(new SqliteThreadDialect({ path }), gate, onError) });
  return { db, engine: 'sqlite', close: () => db.destroy() };
}

/**
 * Whether the SQLite file at `path` opens and has no migration table: a file riskgate never
 * migrated (0 bytes, or a fresh database put in its place). A file that cannot be read says
 * false here: the open after it reports the damage.
 */
function holdsNoState(path: string): boolean {
  // Switching to WAL writes the header page, so a file riskgate opened is never 0 bytes (seen
  // after a SIGKILL right after the first commit: 4,096 bytes, the tables in the -wal); 0 bytes
  // with a -wal holding pages is read through below rather than called empty.
  if (fileIdentity(path)?.size === 0 && !(fileIdentity(`${path}-wal`)?.size ?? 0)) return true;
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(path, { readOnly: true });
    const row = db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
      .get(MIGRATION_TABLE);
    return row === undefined;
  } catch {
    return false;
  } finally {
    db?.close();
  }
}
