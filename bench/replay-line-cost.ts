/**
 * What one decision line costs replay, by step (issue 32): reading it (the fields evaluation needs,
 * src/replay/replay-record.ts, from the string or from the bytes a replay thread holds, against
 * `JSON.parse` of the whole line and of its head), evaluating it with the shipped policy, and the
 * whole of it as a replay thread runs it (`ReplayTally.addBytes`). Over the real lines of
 * bench/fixtures/decision-lines.jsonl, on one thread, in CPU time (microseconds of this thread's CPU per line).
 *
 *   npx tsx bench/replay-line-cost.ts [--rounds 200000]
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { lineNeeds, readDecisionBytes, readDecisionLine } from '../src/replay/replay-record.ts';
import { ReplayTally } from '../src/replay/replay-tally.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '200000' } } });
const rounds = Number(values.rounds);
const root = resolve(import.meta.dirname, '..');
const lines = readFileSync(join(root, 'bench/fixtures/decision-lines.jsonl'), 'utf8').trim().split('\n');
const policy = await loadPolicy(join(root, 'policies'));

/** This thread's CPU time, microseconds: on a shared machine, wall time counts other processes' turns. */
function cpuUs(): number {
  const u = process.threadCpuUsage();
  return u.user + u.system;
}

function usPerLine(step: (text: string) => unknown): number {
  for (let i = 0; i < 20_000; i++) step(lines[i % lines.length]!);
  const started = cpuUs();
  for (let i = 0; i < rounds; i++) step(lines[i % lines.length]!);
  return (cpuUs() - started) / rounds;
}

const inputs = lines.map((t) => {
  const r = readDecisionLine(t);
  if (r.kind !== 'decision') throw new Error('a fixture line is not a decision');
  return r.decision.input;
});
// As a replay thread holds them: the lines' bytes in one chunk.
const chunk = Buffer.from(`${lines.join('\n')}\n`);
const bounds: [number, number][] = [];
for (let from = 0, nl = chunk.indexOf(10); nl !== -1; from = nl + 1, nl = chunk.indexOf(10, from))
  bounds.push([from, nl]);
let b = 0;
const shippedNeeds = lineNeeds(policy);
const oneSignal = lineNeeds({ requirements: { signals: new Set(['newBrowser']) } });
const tally = new ReplayTally(policy, 20);
/** As replay evaluates (src/replay/replay-tally.ts): no live budget. */
const NO_BUDGET = { budgetMs: Number.POSITIVE_INFINITY };
let k = 0;
const figures = {
  'JSON.parse of the whole line': usPerLine((t) => JSON.parse(t)),
  'decoding the whole line (bytes to string)': usPerLine(() => {
    const [s, e] = bounds[b++ % bounds.length]!;
    return chunk.toString('utf8', s, e);
  }),
  'readDecisionBytes (the fields evaluation needs, from the bytes)': usPerLine(() => {
    const [s, e] = bounds[b++ % bounds.length]!;
    return readDecisionBytes(chunk, s, e);
  }),
  'readDecisionBytes for the shipped policy (it reads every signal the lines hold)': usPerLine(() => {
    const [s, e] = bounds[b++ % bounds.length]!;
    return readDecisionBytes(chunk, s, e, shippedNeeds);
  }),
  'readDecisionBytes, a candidate reading one signal (newBrowser)': usPerLine(() => {
    const [s, e] = bounds[b++ % bounds.length]!;
    return readDecisionBytes(chunk, s, e, oneSignal);
  }),
  'JSON.parse of the head alone (what precedes `outcome`)': usPerLine((t) =>
    JSON.parse(`${t.slice(0, t.lastIndexOf(',"outcome":{'))}}`),
  ),
  'readDecisionLine (the fields evaluation needs)': usPerLine((t) => readDecisionLine(t)),
  'readDecisionLine read whole (the line made to miss the partial read)': usPerLine((t) =>
    readDecisionLine(` ${t}`),
  ),
  'policy.evaluate (shipped policy, the same 9 inputs over and over)': usPerLine(() =>
    policy.evaluate(inputs[k++ % inputs.length]!, NO_BUDGET),
  ),
  // As replay has it: each input new from JSON.parse. Less the read above, what evaluating a fresh
  // input costs (the 9 inputs reused stay in the CPU's caches and flatter the evaluation).
  'readDecisionBytes for the shipped policy, then policy.evaluate': usPerLine(() => {
    const [s, e] = bounds[b++ % bounds.length]!;
    const read = readDecisionBytes(chunk, s, e, shippedNeeds);
    return read.kind === 'decision' ? policy.evaluate(read.decision.input, NO_BUDGET) : undefined;
  }),
  'ReplayTally.addBytes (read, evaluate, count: a replay thread per decision line)': usPerLine(() => {
    const [s, e] = bounds[b++ % bounds.length]!;
    tally.addBytes(chunk, s, e, b);
  }),
};
for (const [step, us] of Object.entries(figures)) console.log(`${us.toFixed(2).padStart(8)} us  ${step}`);
console.log(
  `load average ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
