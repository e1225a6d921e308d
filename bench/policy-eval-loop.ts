import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { buildInput } from '../src/policy/policy-test-runner.ts';
import { policyTestFileSchema } from '../src/policy/policy-test-schema.ts';

/**
 * The evaluator's cost in a tight loop, with no per-call timer: 5 runs of 50,000 evaluations of the
 * shipped policy (policies/login.yaml) over its test suite's inputs, after a warm-up of as many;
 * prints nanoseconds per evaluation of each run and their median. For before/after comparisons of
 * a change to src/policy/ (bench/policy-eval.ts times each evaluation and compares engines).
 *
 *   npx tsx bench/policy-eval-loop.ts
 */

const EVALUATIONS = 50_000;
const RUNS = 5;
const root = new URL('..', import.meta.url).pathname;

const policy = await loadPolicy(`${root}policies/login.yaml`);
const suite = policyTestFileSchema.parse(
  parseYaml(await readFile(`${root}policies/login.test.yaml`, 'utf8')),
);
const counters = (policy.velocityCounters ?? []).map((c) => c.name);
const inputs = suite.cases.map((c) => buildInput(suite.defaults, c.given, suite.now, counters));

let sink = 0;
for (let i = 0; i < EVALUATIONS; i++) sink += policy.evaluate(inputs[i % inputs.length]!).score;
const nsPerEvaluation: number[] = [];
for (let r = 0; r < RUNS; r++) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < EVALUATIONS; i++) sink += policy.evaluate(inputs[i % inputs.length]!).score;
  nsPerEvaluation.push(Math.round(Number(process.hrtime.bigint() - t0) / EVALUATIONS));
}
nsPerEvaluation.sort((a, b) => a - b);
console.log(
  JSON.stringify({
    inputs: inputs.length,
    nsPerEvaluation,
    medianNs: nsPerEvaluation[Math.floor(RUNS / 2)],
    checksum: sink,
  }),
);
