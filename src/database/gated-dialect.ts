import type {
  CompiledQuery,
  DatabaseConnection,
  DatabaseIntrospector,
  Dialect,
  DialectAdapter,
  Driver,
  Kysely,
  QueryCompiler,
  QueryResult,
  TransactionSettings,
} from 'kysely';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';

/**
 * A dialect whose every query can be refused from outside, and whose connection can be started
 * afresh. The control database goes through it so that a control file found corrupt, deleted or
 * replaced makes every read and write of control state fail at once (RG_ERR_DATABASE_UNAVAILABLE:
 * lists unavailable to decisions, operator writes 503) rather than go on against a file that is no
 * longer the system of record. The decisions database goes through it so that a file set aside at
 * run time is reopened on the fresh one (`reopen`), the handle the reader holds staying valid.
 */

/** SQLite's primary result codes that say the file is not a usable database. */
const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

/** Whether `error` says the database file is damaged (not a failed statement, not a full disk). */
export function isCorruptFileError(error: unknown): boolean {
  const e = error as { errcode?: unknown; message?: unknown } | undefined;
  const primary = typeof e?.errcode === 'number' ? e.errcode & 0xff : undefined;
  if (primary === SQLITE_CORRUPT || primary === SQLITE_NOTADB) return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  return /database disk image is malformed|file is not a database/i.test(message);
}

/** The switch a `GatedDialect` reads before each query. */
export class DatabaseGate {
  #reason: string | undefined;
  readonly #onTrip: ((reason: string) => void) | undefined;
  #drivers: GatedDriver[] = [];

  readonly #what: string;

  /**
   * `what` names the state in the refusal ("control state"); `closedReason`: refused from the
   * start; `onTrip`: told once when `trip` closes it.
   */
  constructor(options: { what?: string; closedReason?: string; onTrip?: (reason: string) => void } = {}) {
    this.#what = options.what ?? 'the database';
    this.#reason = options.closedReason;
    this.#onTrip = options.onTrip;
  }

  /** Why queries are refused, or undefined while they pass. */
  get reason(): string | undefined {
    return this.#reason;
  }

  /** Refuses every query from now on (the first reason is kept). */
  trip(reason: string): void {
    if (this.#reason !== undefined) return;
    this.#reason = reason;
    this.#onTrip?.(reason);
  }

  /** Ends the connection: the next query opens the file again (at its path: a fresh one if gone). */
  async reopen(): Promise<void> {
    await Promise.all(this.#drivers.map((d) => d.restart()));
  }

  /** @internal */
  attach(driver: GatedDriver): void {
    this.#drivers.push(driver);
  }

  refusal(): RiskgateError | undefined {
    if (this.#reason === undefined) return undefined;
    return new RiskgateError(ErrorCode.DATABASE_UNAVAILABLE, `${this.#what} unavailable: ${this.#reason}`);
  }
}

class GatedConnection implements DatabaseConnection {
  constructor(
    readonly inner: DatabaseConnection,
    readonly gate: DatabaseGate,
    readonly onError: (error: unknown) => void,
  ) {}

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const refused = this.gate.refusal();
    if (refused !== undefined) throw refused;
    try {
      return await this.inner.executeQuery<R>(compiledQuery);
    } catch (error) {
      this.onError(error);
      throw error;
    }
  }

  async *streamQuery<R>(
    compiledQuery: CompiledQuery,
    chunkSize: number,
  ): AsyncIterableIterator<QueryResult<R>> {
    const refused = this.gate.refusal();
    if (refused !== undefined) throw refused;
    yield* this.inner.streamQuery<R>(compiledQuery, chunkSize);
  }
}

class GatedDriver implements Driver {
  readonly #make: () => Driver;
  readonly #gate: DatabaseGate;
  readonly #onError: (error: unknown) => void;
  #inner: Driver | undefined;
  #initialized: Promise<void> | undefined;
  readonly #lent = new Map<DatabaseConnection, { driver: Driver; connection: GatedConnection }>();

  constructor(make: () => Driver, gate: DatabaseGate, onError: (error: unknown) => void) {
    this.#make = make;
    this.#gate = gate;
    this.#onError = onError;
    gate.attach(this);
  }

  // A gate closed from the start never opens the file (it may be the damaged one).
  async init(): Promise<void> {}

  async #driver(): Promise<Driver> {
    const refused = this.#gate.refusal();
    if (refused !== undefined) throw refused;
    if (this.#inner === undefined) {
      this.#inner = this.#make();
      const inner = this.#inner;
      this.#initialized = inner.init().catch((error: unknown) => {
        if (this.#inner === inner) {
          this.#inner = undefined;
          this.#initialized = undefined;
        }
        this.#onError(error);
        throw error;
      });
    }
    const inner = this.#inner;
    await this.#initialized;
    return inner;
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const driver = await this.#driver();
    const connection = await driver.acquireConnection();
    const gated = new GatedConnection(connection, this.#gate, this.#onError);
    this.#lent.set(gated, { driver, connection: gated });
    return gated;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const refused = this.#gate.refusal();
    if (refused !== undefined) throw refused;
    await this.#lent
      .get(connection)!
      .driver.beginTransaction((connection as GatedConnection).inner, settings);
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await this.#lent.get(connection)!.driver.commitTransaction((connection as GatedConnection).inner);
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await this.#lent.get(connection)!.driver.rollbackTransaction((connection as GatedConnection).inner);
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    const lent = this.#lent.get(connection);
    if (lent === undefined) return;
    this.#lent.delete(connection);
    await lent.driver.releaseConnection((connection as GatedConnection).inner);
  }

  /** Ends the current driver; the next query starts a new one. */
  async restart(): Promise<void> {
    const inner = this.#inner;
    this.#inner = undefined;
    this.#initialized = undefined;
    await inner?.destroy().catch(() => {});
  }

  async destroy(): Promise<void> {
    await this.restart();
  }
}

/** `inner`'s adapter, compiler and introspector; its driver behind `gate`. */
export class GatedDialect implements Dialect {
  readonly #inner: Dialect;
  readonly #gate: DatabaseGate;
  readonly #onError: (error: unknown) => void;

  /** `onError`: told of every failed query (the database component trips the gate on a damaged file). */
  constructor(inner: Dialect, gate: DatabaseGate, onError: (error: unknown) => void = () => {}) {
    this.#inner = inner;
    this.#gate = gate;
    this.#onError = onError;
  }

  createDriver(): Driver {
    return new GatedDriver(() => this.#inner.createDriver(), this.#gate, this.#onError);
  }

  createQueryCompiler(): QueryCompiler {
    return this.#inner.createQueryCompiler();
  }

  createAdapter(): DialectAdapter {
    return this.#inner.createAdapter();
  }

  // biome-ignore lint/suspicious/noExplicitAny: kysely's Dialect interface takes any schema.
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return this.#inner.createIntrospector(db);
  }
}
