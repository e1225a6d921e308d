import { parseArgs } from 'node:util';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import type { CompiledPolicy, PolicyInput } from '../src/policy/policy-types.ts';
import { median } from './bench-median.ts';
import { shippedInputs } from './shipped-cases.ts';

/**
 * The evaluator's cost in a tight loop, with no per-call timer: 5 runs of 50,000 evaluations of the
 * shipped policy (policies/login.yaml, or `--policy`) over the shipped test suite's inputs, after a
 * warm-up of as many; prints nanoseconds per evaluation of each run and their median. For
 * before/after comparisons of a change to src/policy/ (bench/policy-eval.ts times each evaluation
 * and compares engines).
 *
 * `--fast-path both` compiles the policy twice, with the rule closures (src/policy/cel-fast-path.ts)
 * and with cel-js alone, and alternates their runs in one process: the figures of each, the ratio
 * of their median thread-CPU times, and whether every evaluation answered the same (verdict, score,
 * reasons).
 *
 *   npx tsx bench/policy-eval-loop.ts [--policy policies/login.yaml] [--fast-path on|off|both]
 *     [--runs 5] [--evaluations 50000]
 */

const { values: args } = parseArgs({
  options: {
    policy: { type: 'string', default: 'policies/login.yaml' },
    'fast-path': { type: 'string', default: 'on' },
    runs: { type: 'string', default: '5' },
    evaluations: { type: 'string', default: '50000' },
  },
});
const EVALUATIONS = Number(args.evaluations);
const RUNS = Number(args.runs);
const root = new URL('..', import.meta.url).pathname;
const mode = args['fast-path'];
if (mode !== 'on' && mode !== 'off' && mode !== 'both') throw new Error('--fast-path: on, off or both');
const path = args.policy.startsWith('/') ? args.policy : `${root}${args.policy}`;

const builds: [string, CompiledPolicy][] = [];
if (mode !== 'off') builds.push(['fast', await loadPolicy(path, { fastPath: true })]);
if (mode !== 'on') builds.push(['cel', await loadPolicy(path, { fastPath: false })]);
const counters = (builds[0]![1].velocityCounters ?? []).map((c) => c.name);
const inputs = await shippedInputs<PolicyInput>(root, counters);

/** Everything a decision says but its policy reference: both builds must agree on it. */
function answers(policy: CompiledPolicy, all: readonly PolicyInput[]): string {
  return JSON.stringify(
    all.map((i) => ({ ...policy.evaluate(i, { budgetMs: Infinity }), policy: undefined })),
  );
}
const same = builds.length < 2 || answers(builds[0]![1], inputs) === answers(builds[1]![1], inputs);

let sink = 0;
const ns = new Map<string, number[]>(builds.map(([name]) => [name, []]));
const cpu = new Map<string, number[]>(builds.map(([name]) => [name, []]));
/** Wall and thread-CPU nanoseconds per evaluation (CPU: what a busy machine's other processes leave alone). */
function run(policy: CompiledPolicy): [number, number] {
  const c0 = process.threadCpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < EVALUATIONS; i++) sink += policy.evaluate(inputs[i % inputs.length]!).score;
  const wall = Number(process.hrtime.bigint() - t0);
  const c1 = process.threadCpuUsage(c0);
  return [Math.round(wall / EVALUATIONS), Math.round(((c1.user + c1.system) * 1000) / EVALUATIONS)];
}
for (const [, policy] of builds) run(policy);
for (let r = 0; r < RUNS; r++) {
  // Alternate which build goes first, so neither always runs on a warmer or a busier machine.
  const order = r % 2 === 0 ? builds : [...builds].reverse();
  for (const [name, policy] of order) {
    const [wall, cpuNs] = run(policy);
    ns.get(name)!.push(wall);
    cpu.get(name)!.push(cpuNs);
  }
}
const out: Record<string, unknown> = { policy: args.policy, inputs: inputs.length };
for (const [name, xs] of ns) {
  const c = cpu.get(name)!;
  out[name] = { nsPerEvaluation: xs, medianNs: median(xs), cpuNsPerEvaluation: c, medianCpuNs: median(c) };
}
if (builds.length === 2) {
  // Of thread CPU: on a shared machine wall time also counts the neighbours' turns.
  out.fastOverCel = Math.round((median(cpu.get('fast')!) / median(cpu.get('cel')!)) * 1000) / 1000;
  out.sameAnswers = same;
}
out.checksum = sink;
console.log(JSON.stringify(out));
if (!same) process.exitCode = 1;
