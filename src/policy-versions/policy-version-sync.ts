import { createHash } from 'node:crypto';
import type { MarkerPoll, MarkerWatch } from '../database/marker-poll.ts';
import type { CompileOptions } from '../policy/policy-compiler.ts';
import { compilePolicy } from '../policy/policy-compiler.ts';
import { formatIssue } from '../policy/policy-loader.ts';
import type { CompiledPolicy } from '../policy/policy-types.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { PolicyVersion, PolicyVersionStore } from './policy-version-store.ts';
import type { PolicyRolloutStage } from './policy-version-tables.ts';

/**
 * Keeps this replica serving what the control database says: every `pollMs` it reads the
 * activation marker (`policy_active.generation`, one tiny row, as lists poll `list_version`), and
 * only when it moved reads the active and staged versions and compiles them, here, off the
 * decision path. A decision reads the compiled policies from fields swapped in one assignment
 * each, so it sees either the old or the new, never a mix.
 *
 * A version that does not compile (an input table this replica lacks, a bug) is never served: the
 * last good one stays, the failure is logged once per version, counted (`onRefused`, the reload
 * metric) and shown in `status().lastError`. The scheduled activation is made here too: the first
 * replica whose poll finds its time passed activates it (the store's conditional UPDATE lets one win).
 */

/** Buckets an account falls in, out of `ROLLOUT_BUCKETS`; a staged percentage is a number of them (basis points). */
export const ROLLOUT_BUCKETS = 10_000;

/**
 * The account's bucket for version `versionId`'s rollout, 0 to 9999: stable for the pair, so an
 * account does not flip between versions from one login to the next, and independent across
 * versions, so the same accounts are not always the first to meet a change.
 */
export function rolloutBucket(accountId: string, versionId: string): number {
  return (
    createHash('sha256').update(accountId).update('\0').update(versionId).digest().readUInt32BE(0) %
    ROLLOUT_BUCKETS
  );
}

/** A compiled version as this replica serves it. */
export interface ServedVersion {
  version: PolicyVersion;
  policy: CompiledPolicy;
  /** When this replica began serving it (epoch ms). */
  sinceMs: number;
}

/** The staged version as this replica serves it. */
export interface ServedStage extends ServedVersion {
  stage: PolicyRolloutStage;
  /** Accounts whose `rolloutBucket` is below this are served the staged version; 0 in shadow. */
  basisPoints: number;
}

export interface PolicyVersionSyncOptions {
  store: PolicyVersionStore;
  /** How each version compiles (the input table); the same as the files'. */
  compile?: CompileOptions | undefined;
  /** How often the activation marker is read, milliseconds (RISKGATE_POLICY_VERSION_POLL_MS). */
  pollMs: number;
  /** The scheduled activation is due on its wall time. Default {@link systemClock}. */
  clock?: Clock;
  /**
   * The control database's one timer (src/database/marker-poll.ts): the marker is read there with
   * the others instead of on a timer of its own. Default: a timer of its own.
   */
  poll?: MarkerPoll | undefined;
  log?: (line: Record<string, unknown>) => void;
  /** A version this replica refused to serve (it does not compile): the reload metric. */
  onRefused?: (versionId: string) => void;
  /** A version this replica began serving (active or staged). */
  onServed?: (versionId: string) => void;
  /** This replica made the scheduled activation of `version` in `by`'s name: the audit trail. */
  onScheduledActivation?: (version: PolicyVersion, by: string) => Promise<void>;
}

export interface PolicyVersionSyncStatus {
  generation: number;
  active?: { versionId: string; revision: string; since: string };
  staged?: { versionId: string; revision: string; stage: PolicyRolloutStage; percent: number; since: string };
  scheduled?: { versionId: string; at: string; by: string };
  /** The latest version this replica refused to serve; cleared when it serves what is active again. */
  lastError?: { versionId: string; message: string; at: string };
  /** The marker could not be read since this time: what is served may be behind. */
  failingSince?: string;
}

export class PolicyVersionSync {
  readonly #o: PolicyVersionSyncOptions;
  readonly #pollMs: number;
  readonly #clock: Clock;
  #generation = -1;
  #active: ServedVersion | undefined;
  #staged: ServedStage | undefined;
  #scheduled: { versionId: string; atMs: number; by: string } | undefined;
  #lastError: PolicyVersionSyncStatus['lastError'];
  /** Versions that did not compile, by id: tried once each (their content never changes). */
  readonly #refused = new Map<string, string>();
  #failingSinceMs: number | undefined;
  #timer: NodeJS.Timeout | undefined;
  #unwatch: (() => void) | undefined;
  #running: Promise<void> | undefined;
  #listeners: (() => void)[] = [];

  constructor(options: PolicyVersionSyncOptions) {
    this.#o = options;
    this.#pollMs = options.pollMs;
    this.#clock = options.clock ?? systemClock;
  }

  /**
   * Reads what is served, then polls. A control database that cannot be read at start (damaged,
   * missing: riskgate starts degraded, docs/operations.md) does not stop the start: the file serves
   * until a poll reads the versions, `failingSince` says so in `GET /policies`, and it is logged.
   */
  async start(): Promise<void> {
    await this.refresh().catch(() => {});
    if (this.#o.poll !== undefined) {
      this.#unwatch = this.#o.poll.watch({
        marker: this.#o.store.marker(),
        pollMs: this.#pollMs,
        observe: (seen) => this.#observe(seen),
      });
      return;
    }
    this.#timer = setInterval(() => void this.refresh().catch(() => {}), this.#pollMs);
    this.#timer.unref();
  }

  stop(): Promise<void> {
    this.#unwatch?.();
    clearInterval(this.#timer);
    return this.#running?.catch(() => {}) ?? Promise.resolve();
  }

  /** The active version, compiled; undefined while the database has none this replica can serve. */
  active(): ServedVersion | undefined {
    return this.#active;
  }

  /** The staged version, compiled; undefined when none is (or none this replica can serve). */
  staged(): ServedStage | undefined {
    return this.#staged;
  }

  /** The marker this replica last acted on. */
  get generation(): number {
    return this.#generation;
  }

  /** Calls `listener` after each refresh that changed what is served (tests await it). */
  onChange(listener: () => void): () => void {
    this.#listeners.push(listener);
    return () => {
      this.#listeners = this.#listeners.filter((l) => l !== listener);
    };
  }

  status(): PolicyVersionSyncStatus {
    const s: PolicyVersionSyncStatus = { generation: this.#generation };
    const iso = (ms: number) => new Date(ms).toISOString();
    if (this.#active !== undefined)
      s.active = {
        versionId: this.#active.version.id,
        revision: this.#active.version.revision,
        since: iso(this.#active.sinceMs),
      };
    if (this.#staged !== undefined)
      s.staged = {
        versionId: this.#staged.version.id,
        revision: this.#staged.version.revision,
        stage: this.#staged.stage,
        percent: this.#staged.basisPoints / 100,
        since: iso(this.#staged.sinceMs),
      };
    if (this.#scheduled !== undefined)
      s.scheduled = {
        versionId: this.#scheduled.versionId,
        at: iso(this.#scheduled.atMs),
        by: this.#scheduled.by,
      };
    if (this.#lastError !== undefined) s.lastError = this.#lastError;
    if (this.#failingSinceMs !== undefined) s.failingSince = iso(this.#failingSinceMs);
    return s;
  }

  /** Reads the marker, makes a due scheduled activation, and reloads when the marker moved. One at a time. */
  refresh(): Promise<void> {
    if (this.#running !== undefined) return this.#running;
    this.#running = this.#refresh().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #refresh(): Promise<void> {
    const { store, log } = this.#o;
    try {
      if (this.#scheduled !== undefined && this.#clock.nowMs() >= this.#scheduled.atMs) {
        const made = await store.activateDue(this.#clock.nowMs());
        if (made !== undefined) {
          log?.({
            level: 'info',
            msg: 'scheduled policy activation made',
            versionId: made.version.id,
            by: made.by,
          });
          await this.#o.onScheduledActivation?.(made.version, made.by);
        }
      }
      const generation = await store.generation();
      if (generation !== this.#generation) await this.#load();
      if (this.#failingSinceMs !== undefined) log?.({ level: 'info', msg: 'policy versions readable again' });
      this.#failingSinceMs = undefined;
    } catch (error) {
      if (this.#failingSinceMs === undefined) {
        this.#failingSinceMs = this.#clock.nowMs();
        log?.({
          level: 'warn',
          msg: 'policy versions not readable; serving the last one read',
          error: (error as Error).message,
        });
      }
      throw error;
    }
  }

  /**
   * The shared poll's reading of the marker: a refresh (its own reads) when it moved, when a
   * scheduled activation is due, or when the last read failed; nothing more when unchanged.
   */
  #observe(seen: Parameters<MarkerWatch['observe']>[0]): void {
    const due = this.#scheduled !== undefined && this.#clock.nowMs() >= this.#scheduled.atMs;
    const moved = 'error' in seen || (seen.value !== undefined && seen.value !== this.#generation);
    if (due || moved || this.#failingSinceMs !== undefined || this.#generation === -1)
      void this.refresh().catch(() => {});
  }

  async #load(): Promise<void> {
    const served = await this.#o.store.served();
    const active = served.active === undefined ? undefined : this.#compiled(served.active, this.#active);
    // A version that does not compile leaves the last good one in place (and the file, with none).
    if (active !== undefined || served.active === undefined) this.#active = active;
    const staged =
      served.staged === undefined ? undefined : this.#compiled(served.staged.version, this.#staged);
    this.#staged =
      staged === undefined || served.staged === undefined
        ? undefined
        : { ...staged, stage: served.staged.stage, basisPoints: served.staged.basisPoints };
    // The alarm stands while the refused version is the one the database says to serve.
    const meant = [served.active?.id, served.staged?.version.id];
    if (this.#lastError !== undefined && !meant.includes(this.#lastError.versionId))
      this.#lastError = undefined;
    this.#scheduled = served.scheduled;
    this.#generation = served.generation;
    for (const listener of this.#listeners) listener();
  }

  /** `version` compiled (or `previous` when it is the same), undefined when it does not compile. */
  #compiled(version: PolicyVersion, previous: ServedVersion | undefined): ServedVersion | undefined {
    if (previous?.version.id === version.id) return previous;
    if (this.#refused.has(version.id)) return undefined;
    const result = compilePolicy(`policy-version:${version.id}`, version.yaml, this.#o.compile);
    if (result.policy === undefined) {
      const errors = result.issues.filter((i) => i.severity === 'error');
      const message = `policy version ${version.id} does not compile: ${errors[0] ? formatIssue(errors[0]) : 'invalid policy'}`;
      this.#refused.set(version.id, message);
      this.#lastError = { versionId: version.id, message, at: new Date(this.#clock.nowMs()).toISOString() };
      this.#o.log?.({
        level: 'error',
        msg: 'policy version refused; the last good policy stays served',
        versionId: version.id,
        error: message,
      });
      this.#o.onRefused?.(version.id);
      return undefined;
    }
    this.#o.log?.({
      level: 'info',
      msg: 'policy version served',
      versionId: version.id,
      revision: version.revision,
    });
    this.#o.onServed?.(version.id);
    return { version, policy: result.policy, sinceMs: this.#clock.nowMs() };
  }
}
