import type { Kysely } from 'kysely';
import type { RiskgateDatabase } from '../database/database.ts';
import { type Component, stopWaitMs } from '../lifecycle/component.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { PolicyEvidenceState, PolicyVersionTables } from './policy-version-tables.ts';

/**
 * A version's evidence in the control database (`policy_version_evidence`), and the runner that
 * computes it after a proposal: the row is written `pending` in the proposal's request, the
 * evidence computed off the request (a backtest over a day of decisions takes seconds to minutes),
 * then written once. A row left pending by a replica that stopped is closed as `failed` by the
 * first read after `staleAfterMs`, so a reviewer never waits on nothing.
 */

/** The window of stored decisions a backtest replays. */
export interface EvidenceWindow {
  /** Epoch ms, inclusive. */
  fromMs: number;
  /** Epoch ms, exclusive. */
  toMs: number;
}

/**
 * The evidence itself, as src/policy-evidence/policy-evidence.ts computes it (check, suites,
 * backtest): kept and shown as written, so this folder does not depend on the replay machinery.
 */
export type PolicyVersionEvidence = { computedAt: string } & Record<string, unknown>;

/**
 * Computes a version's evidence (injected: src/policy-evidence/). An abort of `signal` (riskgate
 * stopping) ends it at once: it rejects.
 */
export type ComputeEvidence = (
  yaml: string,
  window: EvidenceWindow,
  signal: AbortSignal,
) => Promise<PolicyVersionEvidence>;

/**
 * What a version's evidence says when riskgate stopped while computing it: written at once (state
 * `failed`), never a pending row left to go stale.
 */
export const EVIDENCE_STOPPED =
  'evidence incomplete: stopped (riskgate shut down before the backtest finished; a new draft of the same YAML gets evidence of its own)';

/** A version's evidence as the API shows it. */
export interface StoredEvidence {
  state: PolicyEvidenceState;
  window: { from: string; to: string };
  requestedBy: string;
  requestedAt: string;
  completedAt?: string;
  evidence?: PolicyVersionEvidence;
  /** Why no evidence was written (state `failed`). */
  error?: string;
}

type Row = PolicyVersionTables['policy_version_evidence'];

function storedOf(row: Row): StoredEvidence {
  const out: StoredEvidence = {
    state: row.state as PolicyEvidenceState,
    window: {
      from: new Date(Number(row.window_from_ms)).toISOString(),
      to: new Date(Number(row.window_to_ms)).toISOString(),
    },
    requestedBy: row.requested_by,
    requestedAt: new Date(Number(row.requested_ms)).toISOString(),
  };
  if (row.completed_ms != null) out.completedAt = new Date(Number(row.completed_ms)).toISOString();
  if (row.evidence != null) {
    const written = JSON.parse(row.evidence) as PolicyVersionEvidence | { error: string };
    if (typeof written.error === 'string') out.error = written.error;
    else out.evidence = written as PolicyVersionEvidence;
  }
  return out;
}

export interface PolicyEvidenceStoreOptions {
  /** Dates requests and results (wall time). Default {@link systemClock}. */
  clock?: Clock | undefined;
  /** A pending row older than this is closed as failed when read, milliseconds. Default 600,000. */
  staleAfterMs?: number;
}

export class PolicyEvidenceStore {
  readonly #db: Kysely<PolicyVersionTables>;
  readonly #now: () => number;
  readonly #staleAfterMs: number;

  constructor(database: RiskgateDatabase, o: PolicyEvidenceStoreOptions = {}) {
    this.#db = database.db.withTables<PolicyVersionTables>();
    const clock = o.clock ?? systemClock;
    this.#now = () => clock.nowMs();
    this.#staleAfterMs = o.staleAfterMs ?? 600_000;
  }

  /** Writes version `versionId`'s pending row; false when it has one already (evidence is made once). */
  async begin(versionId: string, window: EvidenceWindow, by: string): Promise<boolean> {
    const inserted = await this.#db
      .insertInto('policy_version_evidence')
      .values({
        version_id: versionId,
        state: 'pending',
        window_from_ms: window.fromMs,
        window_to_ms: window.toMs,
        requested_by: by,
        requested_ms: this.#now(),
        evidence: null,
        completed_ms: null,
      })
      .onConflict((oc) => oc.column('version_id').doNothing())
      .executeTakeFirst();
    return Number(inserted.numInsertedOrUpdatedRows ?? 0n) > 0;
  }

  /** Writes the result once: a row no longer pending is left as it is (false). */
  async finish(
    versionId: string,
    result: { evidence: PolicyVersionEvidence } | { error: string },
  ): Promise<boolean> {
    const moved = await this.#db
      .updateTable('policy_version_evidence')
      .set({
        state: 'evidence' in result ? 'complete' : 'failed',
        evidence: JSON.stringify('evidence' in result ? result.evidence : { error: result.error }),
        completed_ms: this.#now(),
      })
      .where('version_id', '=', versionId)
      .where('state', '=', 'pending')
      .executeTakeFirst();
    return Number(moved.numUpdatedRows) > 0;
  }

  async get(versionId: string): Promise<StoredEvidence | undefined> {
    const row = await this.#row(versionId);
    if (row?.state === 'pending' && this.#now() - Number(row.requested_ms) > this.#staleAfterMs) {
      await this.finish(versionId, {
        error: 'interrupted: the replica computing it stopped before it was written',
      });
      const closed = await this.#row(versionId);
      return closed === undefined ? undefined : storedOf(closed);
    }
    return row === undefined ? undefined : storedOf(row);
  }

  #row(versionId: string): Promise<Row | undefined> {
    return this.#db
      .selectFrom('policy_version_evidence')
      .selectAll()
      .where('version_id', '=', versionId)
      .executeTakeFirst();
  }
}

export interface PolicyEvidenceRunnerOptions {
  store: PolicyEvidenceStore;
  /** How evidence is computed (the policies directory, the decision store, the bounds). */
  compute: ComputeEvidence;
  log?: (line: Record<string, unknown>) => void;
}

/**
 * Computes evidence off the request that asked for it, one version at a time per call, and writes
 * it once. A component (`policyEvidenceComponent`): its stop ends the computations in progress
 * and writes each version's evidence as {@link EVIDENCE_STOPPED}.
 */
export class PolicyEvidenceRunner {
  readonly #o: PolicyEvidenceRunnerOptions;
  readonly #running = new Set<Promise<void>>();
  readonly #stopping = new AbortController();

  constructor(o: PolicyEvidenceRunnerOptions) {
    this.#o = o;
  }

  get store(): PolicyEvidenceStore {
    return this.#o.store;
  }

  /** Version `versionId`'s evidence as kept (the console and the API read it so). */
  get(versionId: string): Promise<StoredEvidence | undefined> {
    return this.#o.store.get(versionId);
  }

  /**
   * Writes the pending row (awaited: a proposal the database cannot record evidence for fails) and
   * starts the computation; false when the version has evidence already.
   */
  async request(version: { id: string; yaml: string }, window: EvidenceWindow, by: string): Promise<boolean> {
    if (this.#stopping.signal.aborted) throw new Error('the evidence runner is stopped');
    if (!(await this.#o.store.begin(version.id, window, by))) return false;
    const run = this.#compute(version, window).finally(() => this.#running.delete(run));
    this.#running.add(run);
    return true;
  }

  async #compute(version: { id: string; yaml: string }, window: EvidenceWindow): Promise<void> {
    let result: { evidence: PolicyVersionEvidence } | { error: string };
    try {
      result = { evidence: await this.#o.compute(version.yaml, window, this.#stopping.signal) };
    } catch (e) {
      result = this.#stopping.signal.aborted
        ? { error: EVIDENCE_STOPPED }
        : { error: `the evidence could not be computed: ${e instanceof Error ? e.message : String(e)}` };
    }
    try {
      await this.#o.store.finish(version.id, result);
      this.#o.log?.({
        msg: 'policy version evidence written',
        versionId: version.id,
        ...('error' in result && { error: result.error }),
      });
    } catch (e) {
      // Left pending: the first read after staleAfterMs closes it as failed.
      this.#o.log?.({ msg: 'policy version evidence not written', versionId: version.id, error: String(e) });
    }
  }

  /** Every computation started so far, finished (tests; a stop). */
  async settled(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running]);
  }

  /**
   * Ends the computations in progress (their threads terminated) and waits, until `deadlineAtMs`
   * at most, for each to write its evidence as stopped. One not written by then stays pending,
   * closed as failed by the first read after `staleAfterMs`.
   */
  async stop(deadlineAtMs: number): Promise<void> {
    this.#stopping.abort();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.settled(),
      new Promise<void>((r) => {
        timer = setTimeout(r, stopWaitMs(deadlineAtMs, STOP_WAIT_CAP_MS));
      }),
    ]);
    clearTimeout(timer);
  }
}

/** Longest a stop waits for stopped evidence to be written, milliseconds (a write or two). */
const STOP_WAIT_CAP_MS = 5000;

/** The evidence runner in the lifecycle: started after the database it writes, stopped before it. */
export function policyEvidenceComponent(runner: PolicyEvidenceRunner): Component<PolicyEvidenceRunner> {
  return {
    name: 'policy evidence',
    start: () => ({ handle: runner, stop: (deadlineAtMs) => runner.stop(deadlineAtMs) }),
  };
}
