import { readdir, stat } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import type { Kysely } from 'kysely';
import { DEFAULT_BACKTEST_MAX_DECISIONS, DEFAULT_BACKTEST_TIME_LIMIT_SECONDS } from '../config/settings.ts';
import type { PostgresConnection } from '../database/postgres-connection.ts';
import type { DecisionTables } from '../decision-store/decision-tables.ts';
import { type CompileOptions, compilePolicy } from '../policy/policy-compiler.ts';
import { compilePolicyFile, formatIssue, isTestFileName } from '../policy/policy-loader.ts';
import { runPolicyTestFile } from '../policy/policy-test-runner.ts';
import type { CompiledPolicy, Verdict } from '../policy/policy-types.ts';
import type { EvidenceWindow } from '../policy-versions/policy-version-evidence-store.ts';
import { CHANGE_SAMPLES, ChangeTally } from '../replay/replay-changes.ts';
import type { StoreStretch } from '../replay/replay-store.ts';
import { type ReplayStretchReply, replayStretch, type StoreRead } from '../replay/replay-stretch.ts';
import { replayOnThreads } from '../replay/replay-threads.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { kyselyPage, planStore } from './backtest-plan.ts';

/**
 * The evidence a reviewer approves a policy version with (issue 33, docs/policy-versions.md "The
 * evidence"): what `riskgate policy check` says of its YAML, its own test suites (the ones the
 * policies directory ships for a policy of its name) run against it, and a backtest: the stored
 * decisions of a window replayed with it (as `riskgate replay` does a log), verdict changes
 * counted by verdict pair and by rule, with sample decision ids.
 *
 * Off the event loop: the window is cut into one stretch per core (`planStore`, on the index), and
 * each stretch is read in keyset pages and replayed on a replay thread of its own (the one
 * evaluation path `riskgate replay` uses, src/replay/replay-stretch.ts) over a connection of its
 * own (a read-only SQLite connection, a PostgreSQL client), so a decision never waits behind a
 * backtest. Bounded, as an observation must be: at most `maxDecisions` decisions, for at most
 * `timeLimitMs` (RISKGATE_BACKTEST_MAX_DECISIONS, RISKGATE_BACKTEST_TIME_LIMIT_SECONDS); a backtest
 * cut short says why (`truncated`), with the counts it reached. An abort of `signal` (riskgate
 * stopping) ends the threads at once and rejects.
 */

/** Sample decision ids kept per verdict pair and per rule. */
export const EVIDENCE_SAMPLES = CHANGE_SAMPLES;

/** The decision store a backtest reads: the handle it plans with, and what a thread connects to. */
export interface BacktestSource {
  db: Kysely<DecisionTables>;
  /** The SQLite file: each thread opens it read-only. */
  file?: string | undefined;
  /** PostgreSQL: each thread connects a client of its own. */
  postgres?: PostgresConnection | undefined;
}

export type { EvidenceWindow };

export interface EvidenceIssue {
  line: number;
  col: number;
  severity: 'error' | 'warning';
  message: string;
}

export interface EvidenceSuite {
  /** The suite's file name, within the policies directory. */
  file: string;
  passed: number;
  failed: number;
  /** Problems that stopped the suite (a suite file that does not parse). */
  issues: string[];
  failures: { name: string; failures: string[] }[];
}

export interface EvidenceBacktest {
  /** Decisions of the window replayed. */
  decisions: number;
  /** Stored rows replay cannot read (a line of another schema), counted. */
  unreadable: number;
  /** Stored rows with nothing to replay (an overload answer, never evaluated). */
  skipped: number;
  changed: number;
  byPair: { from: Verdict; to: Verdict; count: number; samples: string[] }[];
  /** Per rule among the changed decisions: matching now where it did not (`fires`), or no longer (`stops`). */
  byRule: { rule: string; fires: number; stops: number; samples: string[] }[];
  /** Decisions whose replay is uncertain, by the input they did not record. */
  missingInputs: Record<string, number>;
  /**
   * Set when the backtest stopped before the window's end: the counts cover what was read. `atMs`:
   * the time of the first decision left unread (at the cap), or of the earliest point a stretch
   * reached (at the time limit: the stretches run side by side, each from its own start).
   */
  truncated: { reason: 'max-decisions' | 'time-limit'; atMs: number } | null;
  /** Replay threads the window was cut for (0: replayed in process, a store no thread can open). */
  threads: number;
  elapsedMs: number;
}

// A type, not an interface: the control database keeps it as a plain record.
export type PolicyEvidence = {
  window: { from: string; to: string };
  check: { ok: boolean; issues: EvidenceIssue[] };
  tests: { ran: boolean; note?: string; suites: EvidenceSuite[] };
  /** Null with `backtestNote` when there is no decision store to read. */
  backtest: EvidenceBacktest | null;
  backtestNote?: string;
  computedAt: string;
};

export interface EvidenceOptions {
  /** How the draft compiles (the service's input table). */
  compile?: CompileOptions | undefined;
  /** The policy file or directory the service loaded (RISKGATE_POLICY_PATH): where suites are found. */
  policyPath?: string | undefined;
  /** The decision store; undefined when it is off (the backtest says so). */
  decisions?: (() => BacktestSource) | undefined;
  /** Decisions read at most. Default {@link DEFAULT_BACKTEST_MAX_DECISIONS} (RISKGATE_BACKTEST_MAX_DECISIONS). */
  maxDecisions?: number | undefined;
  /** Longest a backtest reads, milliseconds. Default {@link DEFAULT_BACKTEST_TIME_LIMIT_SECONDS} s (RISKGATE_BACKTEST_TIME_LIMIT_SECONDS). */
  timeLimitMs?: number | undefined;
  /** Rows per page a thread reads. Default 1000. */
  batchSize?: number;
  /**
   * Replay threads at most. Default: one core fewer than there are (`os.availableParallelism()`),
   * at least one: the backtest runs beside live decisions, which keep a core of their own.
   */
  threads?: number;
  /** Decisions a thread gets at the least: a smaller window runs on fewer threads. Default 20,000. */
  minPerThread?: number;
  /** Stops the backtest (riskgate stopping): its threads end at once, and the evidence rejects. */
  signal?: AbortSignal | undefined;
  /** Dates the evidence (wall time). Default {@link systemClock}. */
  clock?: Clock | undefined;
}

/** The evidence of `yaml` over `window`. Never throws for a bad draft: that is evidence too. */
export async function computeEvidence(
  yaml: string,
  window: EvidenceWindow,
  o: EvidenceOptions = {},
): Promise<PolicyEvidence> {
  const clock = o.clock ?? systemClock;
  const compiled = compilePolicy('policy-version', yaml, o.compile ?? {});
  const issues = compiled.issues.map((i) => ({
    line: i.line,
    col: i.col,
    severity: i.severity,
    message: i.message,
  }));
  const ok = compiled.policy !== undefined && !issues.some((i) => i.severity === 'error');
  const evidence: PolicyEvidence = {
    window: { from: new Date(window.fromMs).toISOString(), to: new Date(window.toMs).toISOString() },
    check: { ok, issues },
    tests: { ran: false, suites: [] },
    backtest: null,
    computedAt: '',
  };
  if (!ok || compiled.policy === undefined) {
    evidence.tests.note = 'the policy does not compile: no suite ran';
    evidence.backtestNote = 'the policy does not compile: nothing replayed';
  } else {
    evidence.tests = await ownSuites(compiled.policy, o.policyPath);
    if (o.decisions === undefined) evidence.backtestNote = 'the decision store is off: nothing to replay';
    else evidence.backtest = await backtest(compiled.policy, yaml, o.decisions(), window, o);
  }
  evidence.computedAt = new Date(clock.nowMs()).toISOString();
  return evidence;
}

/** The suites of the policies directory whose policy file is a policy of the draft's name, run against the draft. */
async function ownSuites(
  policy: CompiledPolicy,
  policyPath: string | undefined,
): Promise<PolicyEvidence['tests']> {
  if (policyPath === undefined) return { ran: false, note: 'no policies directory configured', suites: [] };
  let dir: string;
  let names: string[];
  try {
    dir = (await stat(policyPath)).isDirectory() ? policyPath : dirname(policyPath);
    names = (await readdir(dir)).filter(isTestFileName).sort();
  } catch (e) {
    return {
      ran: false,
      note: `the policies directory cannot be read (${(e as NodeJS.ErrnoException).code ?? 'EIO'})`,
      suites: [],
    };
  }
  const suites: EvidenceSuite[] = [];
  const nameOf = new Map<string, string | undefined>();
  for (const name of names) {
    const r = await runPolicyTestFile(join(dir, name), { policy });
    if (r.policyFile !== '') {
      // A suite is the draft's when the policy file it names declares the draft's name.
      if (!nameOf.has(r.policyFile))
        nameOf.set(r.policyFile, (await compilePolicyFile(r.policyFile)).policy?.name);
      if (nameOf.get(r.policyFile) !== policy.name) continue;
    }
    suites.push({
      file: name,
      passed: r.cases.filter((c) => c.passed).length,
      failed: r.cases.filter((c) => !c.passed).length,
      issues: r.issues.map(formatIssue),
      failures: r.cases.filter((c) => !c.passed).map((c) => ({ name: c.name, failures: c.failures })),
    });
  }
  if (suites.length === 0)
    return {
      ran: false,
      note: `the policies directory ships no test suite for a policy named ${policy.name}`,
      suites,
    };
  return { ran: true, suites };
}

/** The window's stored decisions replayed with `policy`, each stretch on a thread of its own. */
async function backtest(
  policy: CompiledPolicy,
  yaml: string,
  source: BacktestSource,
  window: EvidenceWindow,
  o: EvidenceOptions,
): Promise<EvidenceBacktest> {
  const startedAt = performance.now();
  // The time limit runs from here: planning counts towards it.
  const deadlineMs = Date.now() + (o.timeLimitMs ?? DEFAULT_BACKTEST_TIME_LIMIT_SECONDS * 1000);
  const read = (stretch: StoreStretch): StoreRead => ({ stretch, pageSize: o.batchSize ?? 1000, deadlineMs });
  // A thread compiles the draft against the built-in input table and opens the store by itself: a
  // test's own table, or a process-private database, is replayed here instead, page by page.
  const threaded =
    o.compile?.inputs === undefined && (source.file !== undefined || source.postgres !== undefined);
  const plan = await planStore(source.db, window, {
    maxDecisions: o.maxDecisions ?? DEFAULT_BACKTEST_MAX_DECISIONS,
    parts: threaded ? (o.threads ?? Math.max(1, availableParallelism() - 1)) : 1,
    minPerPart: o.minPerThread ?? 20_000,
  });
  const task = { changedLimit: 0, labelIds: [], tallyChanges: true };
  let replies: ReplayStretchReply[];
  if (threaded) {
    replies = await replayOnThreads(
      plan.stretches.map((stretch) => ({
        ...task,
        policy: { yaml, revision: policy.revision },
        source:
          source.file !== undefined
            ? { kind: 'sqlite' as const, path: source.file, ...read(stretch) }
            : { kind: 'postgres' as const, connection: source.postgres!, ...read(stretch) },
      })),
      o.signal,
    );
  } else {
    replies = [];
    const pages = (stretch: StoreStretch, limit: number) => {
      o.signal?.throwIfAborted();
      return kyselyPage(source.db, stretch, limit);
    };
    for (const stretch of plan.stretches)
      replies.push(
        await replayStretch(policy, { ...task, source: { kind: 'pages', pages, ...read(stretch) } }),
      );
  }
  return mergeBacktest(replies, plan.cutAtMs, threaded ? plan.stretches.length : 0, startedAt);
}

/** The stretches' tallies, in window order, as one backtest. */
function mergeBacktest(
  replies: readonly ReplayStretchReply[],
  cutAtMs: number | undefined,
  threads: number,
  startedAt: number,
): EvidenceBacktest {
  const changes = new ChangeTally();
  const b: EvidenceBacktest = {
    decisions: 0,
    unreadable: 0,
    skipped: 0,
    changed: 0,
    byPair: [],
    byRule: [],
    missingInputs: {},
    truncated: cutAtMs === undefined ? null : { reason: 'max-decisions', atMs: cutAtMs },
    threads,
    elapsedMs: 0,
  };
  let stoppedAtMs: number | undefined;
  for (const reply of replies) {
    if (!reply.ok) throw new Error('tooLong' in reply ? 'a stored line is too long' : reply.error.message);
    const p = reply.partial;
    b.decisions += p.decisions;
    b.unreadable += p.badCount;
    b.skipped += p.skipped;
    b.changed += p.changed;
    for (const [k, n] of Object.entries(p.missingInputs)) b.missingInputs[k] = (b.missingInputs[k] ?? 0) + n;
    if (reply.changes !== undefined) changes.merge(reply.changes);
    if (reply.stoppedAtMs !== undefined) stoppedAtMs = Math.min(stoppedAtMs ?? Infinity, reply.stoppedAtMs);
  }
  // The time limit cut a stretch short: that says more than the cap (the counts cover less).
  if (stoppedAtMs !== undefined) b.truncated = { reason: 'time-limit', atMs: stoppedAtMs };
  ({ byPair: b.byPair, byRule: b.byRule } = changes.changes);
  b.elapsedMs = Math.round(performance.now() - startedAt);
  return b;
}
