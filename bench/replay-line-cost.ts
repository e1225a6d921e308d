/**
 * What one decision line costs replay, by step (issue 32): reading it (the fields evaluation needs,
 * src/replay/replay-record.ts, against `JSON.parse` of the whole line) and evaluating it with the
 * shipped policy. Over the real lines of bench/fixtures/decision-lines.jsonl, on one thread.
 *
 *   npx tsx bench/replay-line-cost.ts [--rounds 200000]
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { readDecisionLine } from '../src/replay/replay-record.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '200000' } } });
const rounds = Number(values.rounds);
const root = resolve(import.meta.dirname, '..');
const lines = readFileSync(join(root, 'bench/fixtures/decision-lines.jsonl'), 'utf8').trim().split('\n');
const policy = await loadPolicy(join(root, 'policies'));

function usPerLine(step: (text: string) => unknown): number {
  for (let i = 0; i < 20_000; i++) step(lines[i % lines.length]!);
  const started = performance.now();
  for (let i = 0; i < rounds; i++) step(lines[i % lines.length]!);
  return ((performance.now() - started) * 1000) / rounds;
}

const inputs = lines.map((t) => {
  const r = readDecisionLine(t);
  if (r.kind !== 'decision') throw new Error('a fixture line is not a decision');
  return r.decision.input;
});
let k = 0;
const figures = {
  'JSON.parse of the whole line': usPerLine((t) => JSON.parse(t)),
  'readDecisionLine (the fields evaluation needs)': usPerLine((t) => readDecisionLine(t)),
  'readDecisionLine read whole (the line made to miss the partial read)': usPerLine((t) =>
    readDecisionLine(` ${t}`),
  ),
  'policy.evaluate (shipped policy)': usPerLine(() => policy.evaluate(inputs[k++ % inputs.length]!)),
};
for (const [step, us] of Object.entries(figures)) console.log(`${us.toFixed(2).padStart(8)} us  ${step}`);
console.log(
  `load average ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
