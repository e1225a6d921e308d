import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { loadPolicy } from '../policy/policy-loader.ts';
import { readDecisionLine } from './replay-record.ts';
import { type ReplayReport, replayDecisions } from './replay-run.ts';

/**
 * A replay has no deadline: an evaluation that takes long (a thread descheduled on a busy machine,
 * a collection mid-evaluation) must answer what a quick one answers, never the degraded verdict the
 * live evaluation budget gives. The clocks the budget reads are driven here: every read of either
 * one is 30 ms after the last, past the shipped policy's 20 ms at its second check.
 */

const ROOT = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'riskgate-replay-slow-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => {
  vi.restoreAllMocks();
});

const STEP_MS = 30;

/** Both clocks the budget reads, each 30 ms later at every read. */
function driveClocksSlow(): void {
  let wallMs = 0;
  let cpuUs = 0;
  vi.spyOn(performance, 'now').mockImplementation(() => {
    wallMs += STEP_MS;
    return wallMs;
  });
  vi.spyOn(process, 'threadCpuUsage').mockImplementation(() => {
    cpuUs += STEP_MS * 1000;
    return { user: cpuUs, system: 0 };
  });
}

function comparable(r: ReplayReport): Omit<ReplayReport, 'elapsedMs'> {
  const { elapsedMs: _, ...rest } = r;
  return rest;
}

describe('replaying decisions whose evaluation is slow', () => {
  it('reports the verdicts a quick replay reports, none changed by the live budget', async () => {
    const log = join(dir, 'decisions.jsonl');
    writeFileSync(log, readFileSync(join(ROOT, 'bench/fixtures/decision-lines.jsonl')));
    const policy = await loadPolicy(join(ROOT, 'policies'));
    const all = { changedLimit: Number.POSITIVE_INFINITY };
    const quick = await replayDecisions(policy, [log], all);
    expect(quick.decisions).toBeGreaterThan(5);
    expect(quick.changed).toBe(0);

    driveClocksSlow();
    const slow = await replayDecisions(policy, [log], all);
    const first = readDecisionLine(readFileSync(log, 'utf8').split('\n')[0]!);
    if (first.kind !== 'decision') throw new Error('the fixture starts with a decision');
    const live = policy.evaluate(first.decision.input);
    vi.restoreAllMocks();

    expect(comparable(slow)).toEqual(comparable(quick));
    // The same clocks do spend a live evaluation's budget: the replay's answer is not by luck.
    expect(live.degraded?.rules.some((r) => r.reason === 'evaluation_budget')).toBe(true);
  });

  it('reads neither clock while evaluating without a budget, and the same decision as with one', async () => {
    const policy = await loadPolicy(join(ROOT, 'policies'));
    const first = readDecisionLine(
      readFileSync(join(ROOT, 'bench/fixtures/decision-lines.jsonl'), 'utf8').split('\n')[0]!,
    );
    if (first.kind !== 'decision') throw new Error('the fixture starts with a decision');
    const budgeted = policy.evaluate(first.decision.input);
    const wall = vi.spyOn(performance, 'now');
    const cpu = vi.spyOn(process, 'threadCpuUsage');
    const unbudgeted = policy.evaluate(first.decision.input, { budgetMs: Number.POSITIVE_INFINITY });
    expect(wall).not.toHaveBeenCalled();
    expect(cpu).not.toHaveBeenCalled();
    expect(unbudgeted).toEqual(budgeted);
    policy.evaluate(first.decision.input);
    expect(wall).toHaveBeenCalled();
  });
});
