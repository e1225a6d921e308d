import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { pickPolicies, type RunDecisionDeps, type StagedPolicy } from '../src/decide/run-decision.ts';
import { compilePolicy } from '../src/policy/policy-compiler.ts';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import type { CompiledPolicy, PolicyInput } from '../src/policy/policy-types.ts';
import { median } from './bench-median.ts';
import { type EngineFigures, figures, suiteInputs } from './policy-eval.ts';

/**
 * The policy work of one decision with and without a staged rollout, in one process, interleaved
 * round by round (so the machine's noise falls on both alike), reported as a ratio:
 *
 * - `one`: no staged version: choose the policies (`pickPolicies`), evaluate the active one.
 * - `staged 10 %`: a version staged to 10 % of accounts: choose by the account's bucket, evaluate
 *   the one that answers, then the other (what `afterDecision` does for the shadow's place).
 * - `staged shadow`: a version in shadow: the active one answers, the staged one is evaluated too.
 *
 * The active policy is policies/login.yaml over its test suite's inputs; the candidate the same
 * with `challenge: 79` (the same inputs, so no extra call: what a rollout costs in CPU alone). A
 * candidate that reads a signal the active policy does not adds that call too (Server-Timing
 * `shadow-signals-<name>`), not measured here.
 *
 *   npx tsx bench/staged-rollout.ts [--iterations 200000] [--runs 5]
 */

const POLICY = new URL('../policies/login.yaml', import.meta.url).pathname;

type Mode = 'one' | 'staged 10 %' | 'staged shadow';
const MODES: readonly Mode[] = ['one', 'staged 10 %', 'staged shadow'];

function depsFor(mode: Mode, active: CompiledPolicy, candidate: CompiledPolicy): RunDecisionDeps {
  const staged: StagedPolicy | undefined =
    mode === 'one'
      ? undefined
      : {
          version: { id: '019b76daa800ad42047e2ed2' },
          policy: candidate,
          stage: mode === 'staged shadow' ? 'shadow' : 'percent',
          basisPoints: mode === 'staged shadow' ? 0 : 1000,
        };
  return {
    policies: { current: () => active },
    rollout: { staged: () => staged },
  } as unknown as RunDecisionDeps;
}

function measure(deps: RunDecisionDeps, inputs: PolicyInput[], iterations: number): EngineFigures {
  let sink = 0;
  const decide = (input: PolicyInput) => {
    const picked = pickPolicies(deps, input.request.accountId);
    sink += picked.policy.evaluate(input).score;
    if (picked.shadow !== undefined) sink += picked.shadow.evaluate(input).score;
  };
  for (let i = 0; i < Math.min(20_000, iterations); i++) decide(inputs[i % inputs.length]!);
  const samples = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const input = inputs[i % inputs.length]!;
    const t0 = process.hrtime.bigint();
    decide(input);
    samples[i] = Number(process.hrtime.bigint() - t0);
  }
  if (sink === Number.MIN_VALUE) console.log(sink);
  return figures(samples);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { iterations: { type: 'string', default: '200000' }, runs: { type: 'string', default: '5' } },
  });
  const iterations = Number(values.iterations);
  const runs = Number(values.runs);
  const active = await loadPolicy(POLICY);
  const text = (await readFile(POLICY, 'utf8')).replace(/challenge: \d+/, 'challenge: 79');
  const candidate = compilePolicy('candidate.yaml', text).policy;
  if (candidate === undefined || candidate.revision === active.revision) throw new Error('no candidate');
  // Each suite input under many accounts, so about 10 % of them fall in the staged buckets.
  const suite = await suiteInputs((active.velocityCounters ?? []).map((c) => c.name));
  const inputs = Array.from({ length: 2000 }, (_, i) => {
    const input = suite[i % suite.length]!;
    return { ...input, request: { ...input.request, accountId: `account-${i}` } };
  });
  const byMode = new Map<Mode, EngineFigures[]>(MODES.map((m) => [m, []]));
  for (let r = 0; r < runs; r++)
    for (const mode of MODES)
      byMode.get(mode)!.push(measure(depsFor(mode, active, candidate), inputs, iterations));
  const base = median(byMode.get('one')!.map((f) => f.medianNs));
  console.log(`${runs} rounds of ${iterations} decisions each, interleaved; median of the rounds' figures`);
  console.log('| | median ns | p99 ns | mean ns | median vs one |');
  console.log('|---|---:|---:|---:|---:|');
  for (const mode of MODES) {
    const f = byMode.get(mode)!;
    const medianNs = median(f.map((x) => x.medianNs));
    console.log(
      `| ${mode} | ${medianNs} | ${median(f.map((x) => x.p99Ns))} | ${median(f.map((x) => x.meanNs))} | ${(medianNs / base).toFixed(2)}× |`,
    );
  }
}

await main();
