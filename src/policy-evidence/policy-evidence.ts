import { readdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { DecisionTables } from '../decision-store/decision-tables.ts';
import { type CompileOptions, compilePolicy } from '../policy/policy-compiler.ts';
import { compilePolicyFile, formatIssue, isTestFileName } from '../policy/policy-loader.ts';
import { runPolicyTestFile } from '../policy/policy-test-runner.ts';
import type { CompiledPolicy, Verdict } from '../policy/policy-types.ts';
import type { EvidenceWindow } from '../policy-versions/policy-version-evidence-store.ts';
import { type ReplayChange, ReplayTally } from '../replay/replay-tally.ts';
import { type Clock, systemClock } from '../timing/clock.ts';

/**
 * The evidence a reviewer approves a policy version with (issue 33, docs/policy-versions.md "The
 * evidence"): what `riskgate policy check` says of its YAML, its own test suites (the ones the
 * policies directory ships for a policy of its name) run against it, and a backtest: the stored
 * decisions of a window replayed with it (as `riskgate replay` does a log), verdict changes
 * counted by verdict pair and by rule, with sample decision ids.
 *
 * Bounded, as an observation must be: at most `maxDecisions` decisions read, for at most
 * `timeLimitMs`, in keyset pages of `batchSize` rows with a turn of the event loop between pages
 * and every `sliceMs` of evaluation within one, so a backtest over a million decisions holds the
 * decision path for about one slice (plus one page's read) at a time. A backtest cut short says why (`truncated`), with the counts it reached.
 */

/** Sample decision ids kept per verdict pair and per rule. */
export const EVIDENCE_SAMPLES = 5;

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
  /** Set when the backtest stopped before the window's end: the counts cover what was read. */
  truncated: { reason: 'max-decisions' | 'time-limit'; atMs: number } | null;
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
  decisions?: (() => Kysely<DecisionTables>) | undefined;
  /** Decisions read at most. Default 1,000,000. */
  maxDecisions?: number;
  /** Longest a backtest reads, milliseconds. Default 120,000. */
  timeLimitMs?: number;
  /** Rows per page, each followed by a turn of the event loop. Default 1000. */
  batchSize?: number;
  /** Longest the backtest evaluates without a turn of the event loop, milliseconds. Default 10. */
  sliceMs?: number;
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
    else evidence.backtest = await backtest(compiled.policy, o.decisions(), window, o);
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

/** Counts of the changed decisions by verdict pair and by rule, with the first few ids of each. */
class ChangeTally {
  readonly byPair = new Map<string, { from: Verdict; to: Verdict; count: number; samples: string[] }>();
  readonly byRule = new Map<string, { rule: string; fires: number; stops: number; samples: string[] }>();

  add(change: ReplayChange, before: string[], after: string[]): void {
    const key = `${change.from}>${change.to}`;
    let pair = this.byPair.get(key);
    if (pair === undefined) {
      pair = { from: change.from, to: change.to, count: 0, samples: [] };
      this.byPair.set(key, pair);
    }
    pair.count++;
    if (pair.samples.length < EVIDENCE_SAMPLES) pair.samples.push(change.decisionId);
    const was = new Set(before);
    const now = new Set(after);
    for (const id of after) if (!was.has(id)) this.#rule(id, 'fires', change.decisionId);
    for (const id of before) if (!now.has(id)) this.#rule(id, 'stops', change.decisionId);
  }

  #rule(id: string, how: 'fires' | 'stops', decisionId: string): void {
    let r = this.byRule.get(id);
    if (r === undefined) {
      r = { rule: id, fires: 0, stops: 0, samples: [] };
      this.byRule.set(id, r);
    }
    r[how]++;
    if (r.samples.length < EVIDENCE_SAMPLES) r.samples.push(decisionId);
  }
}

/** The window's stored decisions replayed with `policy`, oldest first, page by page. */
async function backtest(
  policy: CompiledPolicy,
  db: Kysely<DecisionTables>,
  window: EvidenceWindow,
  o: EvidenceOptions,
): Promise<EvidenceBacktest> {
  const maxDecisions = o.maxDecisions ?? 1_000_000;
  const timeLimitMs = o.timeLimitMs ?? 120_000;
  const batchSize = o.batchSize ?? 1000;
  const sliceMs = o.sliceMs ?? 10;
  const startedAt = performance.now();
  let sliceStartedAt = startedAt;
  const changes = new ChangeTally();
  const tally = new ReplayTally(policy, 0, undefined, (c, before, after) => changes.add(c, before, after));
  let truncated: EvidenceBacktest['truncated'] = null;
  let after: { atMs: number; id: string } | undefined;
  let read = 0;
  for (;;) {
    const limit = Math.min(batchSize, maxDecisions - read);
    if (limit <= 0) {
      truncated = { reason: 'max-decisions', atMs: after?.atMs ?? window.fromMs };
      break;
    }
    if (performance.now() - startedAt > timeLimitMs) {
      truncated = { reason: 'time-limit', atMs: after?.atMs ?? window.fromMs };
      break;
    }
    const rows = await page(db, window, after, limit);
    for (const row of rows) {
      tally.add(row.line, ++read);
      // A page evaluates for ~0.1 ms a row: the event loop is let go every `sliceMs` within it too.
      if (performance.now() - sliceStartedAt > sliceMs) {
        await yieldToEventLoop();
        sliceStartedAt = performance.now();
      }
    }
    if (rows.length < limit) break;
    const last = rows[rows.length - 1]!;
    after = { atMs: Number(last.at_ms), id: last.decision_id };
    // A turn of the event loop between pages: decisions waiting are answered before the next one.
    await yieldToEventLoop();
    sliceStartedAt = performance.now();
  }
  const p = tally.partial;
  return {
    decisions: p.decisions,
    unreadable: p.badCount,
    skipped: p.skipped,
    changed: p.changed,
    byPair: [...changes.byPair.values()].sort((a, b) => b.count - a.count),
    byRule: [...changes.byRule.values()].sort((a, b) => b.fires + b.stops - (a.fires + a.stops)),
    missingInputs: p.missingInputs,
    truncated,
    elapsedMs: Math.round(performance.now() - startedAt),
  };
}

/** One page of the window after `after`, in (at_ms, decision_id) order: the `decision_at` index. */
function page(
  db: Kysely<DecisionTables>,
  window: EvidenceWindow,
  after: { atMs: number; id: string } | undefined,
  limit: number,
) {
  let q = db.selectFrom('decision').select(['decision_id', 'at_ms', 'line']).where('at_ms', '<', window.toMs);
  q =
    after === undefined
      ? q.where('at_ms', '>=', window.fromMs)
      : q.where((eb) =>
          eb.or([
            eb('at_ms', '>', after.atMs),
            eb.and([eb('at_ms', '=', after.atMs), eb('decision_id', '>', after.id)]),
          ]),
        );
  return q.orderBy('at_ms').orderBy('decision_id').limit(limit).execute();
}
